// Windowed / ring-buffer attention (attention_window.h).
#include "cuda/attention_window.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/ops_reduce.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <class T>
__global__ void kv_store_ring_kernel(T* k_cache, T* v_cache, int64_t kv_dim, const float* k, int64_t ldk,
                                     const float* v, int64_t ldv, const int32_t* d_pos, int64_t n_cells) {
  const int64_t t = blockIdx.x;
  const int64_t row = (static_cast<int64_t>(*d_pos) + t) % n_cells;
  for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    store_f(k_cache + row * kv_dim + i, k[t * ldk + i]);
    store_f(v_cache + row * kv_dim + i, v[t * ldv + i]);
  }
}

// E = head_dim / 32 elements per lane: element lane + 32 e of the head. blockIdx.z is the
// key split: keys [j0 + z*chunk, j0 + (z+1)*chunk) of the query's range, partials to a.ws
// ([t][h][split] rows of m, l, acc[hd]) when gridDim.z > 1.
template <class T, int E>
__global__ void __launch_bounds__(32 * kWarps) attention_window_kernel(WindowAttnArgs a, int64_t chunk) {
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][32 * E];
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t hd = 32 * E, kv_dim = a.n_head_kv * hd;
  const int64_t g = h / (a.n_head / a.n_head_kv);
  const int64_t p_last = static_cast<int64_t>(*a.d_pos) + t;
  const int64_t q_first = a.window > 0 && p_last - a.window + 1 > 0 ? p_last - a.window + 1 : 0;
  const int64_t j0 = q_first + static_cast<int64_t>(blockIdx.z) * chunk;
  const int64_t p = j0 + chunk - 1 < p_last ? j0 + chunk - 1 : p_last;
  const float* q = a.q + t * a.ldq + h * hd;
  float qr[E], acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    qr[e] = q[lane + 32 * e];
    acc[e] = 0.0f;
  }
  const T* kc = static_cast<const T*>(a.k_cache) + g * hd;
  const T* vc = static_cast<const T*>(a.v_cache) + g * hd;
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = j0 + warp; j <= p; j += kWarps) {
    const int64_t row = j % a.n_cells;
    const T* kr = kc + row * kv_dim;
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) dot += qr[e] * load_f(kr + lane + 32 * e);
    dot = ops::warp_sum(dot);
    const float sc = a.scale * dot;
    const float m_new = sc > m ? sc : m;
    const float corr = expf(m - m_new);  // exp(-inf) = 0 on the first key
    const float pj = expf(sc - m_new);
    l = l * corr + pj;
    const T* vr = vc + row * kv_dim;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = acc[e] * corr + pj * load_f(vr + lane + 32 * e);
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) s_acc[warp][lane + 32 * e] = acc[e];
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = s_m[w] > M ? s_m[w] : M;
  float L = 0.0f, f[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    f[w] = s_l[w] > 0.0f ? expf(s_m[w] - M) : 0.0f;
    L += s_l[w] * f[w];
  }
  if (gridDim.z > 1) {  // a partial: this block's max, sum and unnormalised accumulator
    float* part = a.ws + ((t * a.n_head + h) * gridDim.z + blockIdx.z) * (hd + 2);
    if (threadIdx.x == 0) {
      part[0] = M;
      part[1] = L;
    }
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w) v += s_acc[w][d] * f[w];
      part[2 + d] = v;
    }
    return;
  }
  float* o = a.out + t * a.ldo + h * hd;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += s_acc[w][d] * f[w];
    o[d] = round_to(a.round, v / L);
  }
}

// Merges the n_split partials of each (token, head); a split without keys has l = 0.
__global__ void attention_window_merge(WindowAttnArgs a, int n_split) {
  const int64_t t = blockIdx.x, h = blockIdx.y, hd = a.head_dim;
  const float* part = a.ws + (t * a.n_head + h) * n_split * (hd + 2);
  float M = -INFINITY;
  for (int s = 0; s < n_split; ++s)
    if (part[s * (hd + 2) + 1] > 0.0f) M = fmaxf(M, part[s * (hd + 2)]);
  float L = 0.0f;
  for (int s = 0; s < n_split; ++s) {
    const float l = part[s * (hd + 2) + 1];
    if (l > 0.0f) L += l * expf(part[s * (hd + 2)] - M);
  }
  float* o = a.out + t * a.ldo + h * hd;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < n_split; ++s) {
      const float l = part[s * (hd + 2) + 1];
      if (l > 0.0f) v += part[s * (hd + 2) + 2 + d] * expf(part[s * (hd + 2)] - M);
    }
    o[d] = round_to(a.round, v / L);
  }
}

template <class T>
void launch(const WindowAttnArgs& a, cudaStream_t s) {
  // Keys a query can see: at most the window, and never more than the cache holds.
  const int64_t max_keys = a.window > 0 && a.window < a.n_cells ? a.window : a.n_cells;
  int64_t n_split = 1;
  if (a.ws != nullptr && a.n_tok <= kAttnDecodeMaxTokens)
    n_split = std::min<int64_t>(kWindowAttnMaxSplits, (max_keys + kWindowAttnSplitKeys - 1) / kWindowAttnSplitKeys);
  const int64_t chunk = n_split > 1 ? (max_keys + n_split - 1) / n_split : max_keys;
  const dim3 grid(static_cast<unsigned>(a.n_tok), static_cast<unsigned>(a.n_head), static_cast<unsigned>(n_split));
  switch (a.head_dim) {
    case 64: attention_window_kernel<T, 2><<<grid, 32 * kWarps, 0, s>>>(a, chunk); break;
    case 128: attention_window_kernel<T, 4><<<grid, 32 * kWarps, 0, s>>>(a, chunk); break;
    case 256: attention_window_kernel<T, 8><<<grid, 32 * kWarps, 0, s>>>(a, chunk); break;
    case 512: attention_window_kernel<T, 16><<<grid, 32 * kWarps, 0, s>>>(a, chunk); break;
    default: fail_message("attention_window: head_dim " + std::to_string(a.head_dim) + " is not 64/128/256/512");
  }
  FT_CUDA_CHECK_LAUNCH();
  if (n_split > 1) {
    attention_window_merge<<<dim3(static_cast<unsigned>(a.n_tok), static_cast<unsigned>(a.n_head)), 128, 0, s>>>(
        a, static_cast<int>(n_split));
    FT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void kv_store_ring(KvType type, void* k_cache, void* v_cache, int64_t kv_dim, const float* k, int64_t ldk,
                   const float* v, int64_t ldv, int64_t n_tok, const int32_t* d_pos, int64_t n_cells,
                   cudaStream_t s) {
  if (n_tok <= 0) return;
  if (n_cells <= 0) fail_message("kv_store_ring: n_cells must be > 0");
  const unsigned threads = 256;
  if (type == KvType::kF32)
    kv_store_ring_kernel<float><<<static_cast<unsigned>(n_tok), threads, 0, s>>>(
        static_cast<float*>(k_cache), static_cast<float*>(v_cache), kv_dim, k, ldk, v, ldv, d_pos, n_cells);
  else if (type == KvType::kF16)
    kv_store_ring_kernel<__half><<<static_cast<unsigned>(n_tok), threads, 0, s>>>(
        static_cast<__half*>(k_cache), static_cast<__half*>(v_cache), kv_dim, k, ldk, v, ldv, d_pos, n_cells);
  else
    kv_store_ring_kernel<__nv_bfloat16><<<static_cast<unsigned>(n_tok), threads, 0, s>>>(
        static_cast<__nv_bfloat16*>(k_cache), static_cast<__nv_bfloat16*>(v_cache), kv_dim, k, ldk, v, ldv, d_pos,
        n_cells);
  FT_CUDA_CHECK_LAUNCH();
}

size_t attention_window_workspace_bytes(int64_t n_head, int64_t head_dim) {
  return static_cast<size_t>(kAttnDecodeMaxTokens * n_head * kWindowAttnMaxSplits * (head_dim + 2)) * sizeof(float);
}

void attention_window(const WindowAttnArgs& a, cudaStream_t s) {
  if (a.n_tok <= 0) return;
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
    fail_message("attention_window: n_head " + std::to_string(a.n_head) + " is not a multiple of n_head_kv " +
                 std::to_string(a.n_head_kv));
  if (a.n_cells <= 0) fail_message("attention_window: n_cells must be > 0");
  if (a.kv_type == KvType::kF32)
    launch<float>(a, s);
  else if (a.kv_type == KvType::kF16)
    launch<__half>(a, s);
  else
    launch<__nv_bfloat16>(a, s);
}

}  // namespace ft::cuda
