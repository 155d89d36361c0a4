// attention_decode_batch (attention_batch.h).
#include "cuda/attention_batch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/ops_reduce.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

// Warps per block, each taking every kWarps-th key: 8 warps keep 8 K/V rows in flight per
// block, which matters because a warp's loop waits on each row's load.
constexpr int kWarps = 8;

// Query heads per block: 8 up to head_dim 128, 4 at 256 (registers: q and acc hold
// kMaxG * head_dim / 32 floats each per lane).
template <int HD>
__host__ __device__ constexpr int max_group() {
  return HD <= 128 ? 8 : 4;
}

template <class T, int HD>
__global__ void __launch_bounds__(kWarps * 32) attn_batch_kernel(const AttnBatchArgs a, int64_t group) {
  constexpr int E = HD / 32, G = max_group<HD>();
  __shared__ float s_acc[kWarps][G][HD];
  __shared__ float s_ml[kWarps][G][2];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x, kvh = blockIdx.y;
  const int64_t h0 = kvh * group + static_cast<int64_t>(blockIdx.z) * G;  // first query head of this block
  const int64_t h_end = (kvh + 1) * group;
  const int ng = static_cast<int>(h_end - h0 < G ? h_end - h0 : G);
  const int64_t pos = a.d_pos[t];
  const int64_t base = a.d_base[t];
  const int64_t row_elems = a.n_head_kv * HD;

  float q[G][E], acc[G][E], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      q[g][e] = g < ng ? a.q[t * a.ldq + (h0 + g) * HD + lane + 32 * e] : 0.0f;
      acc[g][e] = 0.0f;
    }
  }
  const T* kbase = static_cast<const T*>(a.k_cache) + base * row_elems + kvh * HD + lane;
  const T* vbase = static_cast<const T*>(a.v_cache) + base * row_elems + kvh * HD + lane;
  for (int64_t j = warp; j <= pos; j += kWarps) {
    float k[E], v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      k[e] = attn_detail::to_float<T>(kbase[j * row_elems + 32 * e]);
      v[e] = attn_detail::to_float<T>(vbase[j * row_elems + 32 * e]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g >= ng) break;
      float d = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) d = fmaf(q[g][e], k[e], d);
      d = ops::warp_sum(d) * a.scale;
      const float m_new = fmaxf(m[g], d);
      const float corr = expf(m[g] - m_new), p = expf(d - m_new);
      l[g] = l[g] * corr + p;
      m[g] = m_new;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] = fmaf(p, v[e], acc[g][e] * corr);
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < E; ++e) s_acc[warp][g][lane + 32 * e] = acc[g][e];
    if (lane == 0) {
      s_ml[warp][g][0] = m[g];
      s_ml[warp][g][1] = l[g];
    }
  }
  __syncthreads();
  // Merge the warps' partial softmaxes: thread (g, d) for every query head and column.
  for (int i = threadIdx.x; i < ng * HD; i += blockDim.x) {
    const int g = i / HD, d = i % HD;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_ml[w][g][0]);
    float sum = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (s_ml[w][g][1] == 0.0f) continue;  // a warp that saw no key
      const float c = expf(s_ml[w][g][0] - mx);
      sum += s_ml[w][g][1] * c;
      o += s_acc[w][g][d] * c;
    }
    a.out[t * a.ldo + (h0 + g) * HD + d] = round_to(a.round, o / sum);
  }
}

template <class T>
void dispatch(const AttnBatchArgs& a, cudaStream_t s) {
  const int64_t group = a.n_head / a.n_head_kv;
  auto go = [&](auto kernel, int64_t g_max) {
    const dim3 grid(static_cast<unsigned>(a.n_tok), static_cast<unsigned>(a.n_head_kv),
                    static_cast<unsigned>((group + g_max - 1) / g_max));
    kernel<<<grid, kWarps * 32, 0, s>>>(a, group);
  };
  switch (a.head_dim) {
    case 32: go(attn_batch_kernel<T, 32>, max_group<32>()); break;
    case 64: go(attn_batch_kernel<T, 64>, max_group<64>()); break;
    case 128: go(attn_batch_kernel<T, 128>, max_group<128>()); break;
    default: go(attn_batch_kernel<T, 256>, max_group<256>()); break;
  }
}

}  // namespace

void attention_decode_batch(const AttnBatchArgs& a, cudaStream_t s) {
  if (a.n_tok <= 0) return;
  if (a.head_dim != 32 && a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256)
    fail_message("attention_decode_batch: head_dim = " + std::to_string(a.head_dim) + " must be 32, 64, 128 or 256");
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    fail_message("attention_decode_batch: n_head = " + std::to_string(a.n_head) + " must be a multiple of n_head_kv = " +
                 std::to_string(a.n_head_kv));
  if (a.ldq < a.n_head * a.head_dim || a.ldo < a.n_head * a.head_dim || !a.q || !a.out || !a.k_cache || !a.v_cache ||
      !a.d_pos || !a.d_base)
    fail_message("attention_decode_batch: missing buffers or row strides shorter than n_head*head_dim");
  if (a.kv_type == KvType::kF32)
    dispatch<float>(a, s);
  else if (a.kv_type == KvType::kF16)
    dispatch<__half>(a, s);
  else
    dispatch<__nv_bfloat16>(a, s);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
