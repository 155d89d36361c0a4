// attention_decode_batch (attention_batch.h).
#include "cuda/attention_batch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/act_q8.h"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"
#include "cuda/ticket.cuh"

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

// Chunks of keys a slot is cut in (attention_batch_chunk) and the workspace's ticket region.
constexpr int64_t kMinChunk = 128, kMaxChunks = 64;
size_t ticket_bytes(int64_t max_tok, int64_t n_head) {
  return (static_cast<size_t>(max_tok * n_head) * sizeof(uint32_t) + 255) / 256 * 256;
}

// Column d of head h of token t's output, y rounded as stored; with out_q8 also its Q8 copy. The
// callers' loops give each warp 32 consecutive columns of one head (head_dim is a multiple of 32):
// one Q8 block, quantised from registers with quantize_act_q8's arithmetic (q8_tail.cuh).
// q8_row: act_q8_row_bytes(n_head * HD).
template <int HD>
__device__ __forceinline__ void write_out(const AttnBatchArgs& a, int64_t q8_row, int64_t t, int64_t h, int d,
                                          float y) {
  a.out[t * a.ldo + h * HD + d] = y;
  if (a.out_q8 != nullptr)
    q8_quantize_warp(y, (h * HD + d) / 32, a.n_head * HD, static_cast<uint8_t*>(a.out_q8) + t * q8_row);
}

// splits: chunks a token's keys are cut in (1: no split), chunk keys each; part / tickets: the
// workspace (split only).
template <class T, int HD>
__global__ void __launch_bounds__(kWarps * 32)
    attn_batch_kernel(const AttnBatchArgs a, int64_t group, int n_gz, int splits, int64_t chunk, float* part,
                      uint32_t* tickets, int64_t q8_row) {
  constexpr int E = HD / 32, G = max_group<HD>();
  __shared__ float s_acc[kWarps][G][HD];
  __shared__ float s_ml[kWarps][G][2];
  __shared__ int s_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x, kvh = blockIdx.y;
  const int gz = static_cast<int>(blockIdx.z) % n_gz, split = static_cast<int>(blockIdx.z) / n_gz;
  const int64_t pos = a.d_pos[t];
  // pos + 1 keys in chunks (the first split_tokens tokens: a step's decode tokens come first); the
  // chunks past them have nothing to do.
  const bool cut = splits > 1 && t < a.split_tokens;
  int64_t n_valid = cut ? (pos + chunk) / chunk : 1;
  if (n_valid > splits) n_valid = splits;  // past n_ctx (a caller's bug): the last chunk takes the rest
  if (split >= n_valid) return;
  // d_pos (the step's inputs, copied in before its first launch) may be read before the wait; q and
  // the new K / V rows come from the launch before.
  pdl_wait();
  pdl_trigger();
  const int64_t j0 = cut ? split * chunk : 0;
  const int64_t j1 = cut && split + 1 < n_valid ? j0 + chunk : pos + 1;
  const int64_t h0 = kvh * group + static_cast<int64_t>(gz) * G;  // first query head of this block
  const int64_t h_end = (kvh + 1) * group;
  const int ng = static_cast<int>(h_end - h0 < G ? h_end - h0 : G);
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
  for (int64_t j = j0 + warp; j < j1; j += kWarps) {
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
  // Merge the warps' partial softmaxes: thread (g, d) for every query head and column. One chunk:
  // the output; else this chunk's partial (o and l against its max m).
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
    if (n_valid == 1) {
      write_out<HD>(a, q8_row, t, h0 + g, d, round_to(a.round, o / sum));
      continue;
    }
    float* pp = part + ((t * a.n_head + h0 + g) * splits + split) * (HD + 2);
    pp[d] = o;
    if (d == 0) {
      pp[HD] = mx;
      pp[HD + 1] = sum;
    }
  }
  if (n_valid == 1) return;
  // The last chunk's block of this (token, head group) merges the chunks in chunk order.
  if (!take_last(tickets + (t * gridDim.y + kvh) * n_gz + gz, n_valid, &s_last)) return;
  for (int i = threadIdx.x; i < ng * HD; i += blockDim.x) {
    const int g = i / HD, d = i % HD;
    const float* pp = part + (t * a.n_head + h0 + g) * splits * (HD + 2);
    float mx = -INFINITY;
    for (int64_t c = 0; c < n_valid; ++c) mx = fmaxf(mx, __ldcg(pp + c * (HD + 2) + HD));
    float sum = 0.0f, o = 0.0f;
    for (int64_t c = 0; c < n_valid; ++c) {
      const float w = expf(__ldcg(pp + c * (HD + 2) + HD) - mx);
      sum += __ldcg(pp + c * (HD + 2) + HD + 1) * w;
      o += __ldcg(pp + c * (HD + 2) + d) * w;
    }
    write_out<HD>(a, q8_row, t, h0 + g, d, round_to(a.round, o / sum));
  }
}

template <class T>
void dispatch(const AttnBatchArgs& a, cudaStream_t s) {
  const int64_t group = a.n_head / a.n_head_kv;
  const bool split = a.workspace != nullptr && a.n_ctx > 0 && a.split_tokens > 0;
  const int64_t chunk = split ? attention_batch_chunk(a.n_ctx) : 0;
  const int splits = split ? static_cast<int>((a.n_ctx + chunk - 1) / chunk) : 1;
  auto* tickets = static_cast<uint32_t*>(a.workspace);
  auto* part = split ? reinterpret_cast<float*>(static_cast<char*>(a.workspace) + ticket_bytes(a.split_tokens, a.n_head))
                     : nullptr;
  const int64_t q8_row = a.out_q8 != nullptr ? act_q8_row_bytes(a.n_head * a.head_dim) : 0;
  auto go = [&](auto kernel, int64_t g_max) {
    const int n_gz = static_cast<int>((group + g_max - 1) / g_max);
    const dim3 grid(static_cast<unsigned>(a.n_tok), static_cast<unsigned>(a.n_head_kv),
                    static_cast<unsigned>(n_gz * splits));
    launch_pdl(kernel, grid, dim3(kWarps * 32), 0, s, a, group, n_gz, splits, chunk, part, tickets, q8_row);
  };
  switch (a.head_dim) {
    case 32: go(attn_batch_kernel<T, 32>, max_group<32>()); break;
    case 64: go(attn_batch_kernel<T, 64>, max_group<64>()); break;
    case 128: go(attn_batch_kernel<T, 128>, max_group<128>()); break;
    default: go(attn_batch_kernel<T, 256>, max_group<256>()); break;
  }
}

}  // namespace

int64_t attention_batch_chunk(int64_t n_ctx) {
  const int64_t c = (n_ctx + kMaxChunks - 1) / kMaxChunks;
  return c <= kMinChunk ? kMinChunk : (c + 7) / 8 * 8;
}

size_t attention_batch_workspace_bytes(int64_t max_tok, int64_t n_head, int64_t n_ctx, int64_t head_dim) {
  const int64_t chunks = (n_ctx + attention_batch_chunk(n_ctx) - 1) / attention_batch_chunk(n_ctx);
  return ticket_bytes(max_tok, n_head) +
         static_cast<size_t>(max_tok * n_head * chunks * (head_dim + 2)) * sizeof(float);
}

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
  if (a.out_q8 != nullptr && reinterpret_cast<uintptr_t>(a.out_q8) % 16 != 0)
    fail_message("attention_decode_batch: out_q8 must be 16-byte aligned");
  if (a.workspace != nullptr && (a.n_ctx <= 0 || a.split_tokens <= 0))
    fail_message("attention_decode_batch: a workspace needs n_ctx > 0 and split_tokens > 0");
  if (a.kv_type == KvType::kF32)
    dispatch<float>(a, s);
  else if (a.kv_type == KvType::kF16)
    dispatch<__half>(a, s);
  else
    dispatch<__nv_bfloat16>(a, s);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
