// GPU argmax and sampler (sample.h).
//
// sample(): 1. keys_kernel packs (logit, id) into 64-bit keys whose ascending order is the
// CPU's candidate order (sample_keys.cuh); penalty_kernel rewrites the keys of the
// penalised tokens. 2. Greedy: one block takes the smallest key. Otherwise CUB's radix sort
// orders all keys (32 + id_bits key bits) and finish_kernel, one block of 1024 threads,
// walks the sorted candidates like the CPU: top-k cut, softmax + first cumulative sum >=
// top_p, softmax + min-p cut, softmax at the temperature and the first cumulative sum > r.
// Sorting everything even when top_k is small keeps one exact path for every parameter
// set; sampling runs once per token, next to ~100 GEMVs.
#include "cuda/sample.h"

#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/sample_keys.cuh"

namespace ft::cuda {
namespace {

using namespace sample_detail;

constexpr int kArgmaxThreads = 1024;
constexpr int kFinishThreads = 1024;

struct Best {
  float v;
  int32_t i;  // -1: none yet
};

// Larger value wins; equal values: the lower index (the CPU keeps the first maximum).
__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other;
    other.v = __shfl_xor_sync(0xffffffffu, b.v, o);
    other.i = __shfl_xor_sync(0xffffffffu, b.i, o);
    b = better(b, other);
  }
  return b;
}

template <bool kVec>
__global__ void argmax_kernel(const float* logits, int64_t ld, int64_t n, int32_t* out) {
  pdl_wait();
  pdl_trigger();
  __shared__ Best scratch[32];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * ld;
  Best b{-INFINITY, -1};
  // Each thread visits its indices in increasing order, so a strict '>' keeps its first max.
  if constexpr (kVec) {
    for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < n; i += 4 * blockDim.x) {
      const float4 v = *reinterpret_cast<const float4*>(x + i);
      const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (b.i < 0 || e[k] > b.v) b = {e[k], static_cast<int32_t>(i + k)};
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      if (b.i < 0 || x[i] > b.v) b = {x[i], static_cast<int32_t>(i)};
  }
  b = warp_best(b);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : Best{-INFINITY, -1};
    b = warp_best(b);
    if (lane == 0) out[blockIdx.x] = b.i;
  }
}

// The split argmax (argmax with scratch): kSplitThreads threads a CTA, kSplitVec float4s a thread,
// so a CTA takes kSplitChunk logits and a row's CTAs run side by side across the SMs; each folds
// its maximum into the row's 64-bit key (atomicMax) and the last CTA to take a ticket writes the
// index and zeroes the slot. Why: the one-block kernel reads a whole row (151,936 logits = 594 KB
// for Qwen3) through one SM at the end of every decode step. H200 session 28 call 1, tg128
// alternating, 4 rounds: Qwen3-30B-A3B 518.82 / 517.42 / 518.36 / 519.32 against 516.04 / 515.16 /
// 517.37 / 517.73 tok/s with the one-block kernel (+0.4%), Llama-8B 492.41 / 492.08 / 491.90 /
// 491.54 against 489.11 / 489.02 / 489.87 / 489.51 (+0.5%); the same 64 greedy tokens.
constexpr int kSplitThreads = 256, kSplitVec = 2;
constexpr int kSplitChunk = kSplitThreads * kSplitVec * 4;

// One row's running maximum and ticket (argmax_scratch_bytes): zero between calls.
struct ArgmaxSlot {
  unsigned long long key;
  unsigned ticket, pad;
};

// A 64-bit key whose maximum is engine::argmax's choice: the logit's order (sample_keys.cuh
// ordered, -0 as +0) above the complement of the index (equal logits: the first index). NaN never
// compares greater on the CPU, so a NaN loses to everything -- but at index 0, where the CPU's
// running best starts and stays.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t i) {
  const uint32_t o = v != v ? (i == 0 ? 0xFFFFFFFFu : 0u) : ordered(v);
  return (static_cast<unsigned long long>(o) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(i));
}

__global__ void __launch_bounds__(kSplitThreads) argmax_split_kernel(const float* logits, int64_t ld, int64_t n,
                                                                     int32_t* out, ArgmaxSlot* slots) {
  pdl_wait();
  pdl_trigger();
  __shared__ unsigned long long scratch[kSplitThreads / 32];
  const float* x = logits + static_cast<int64_t>(blockIdx.y) * ld;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kSplitChunk;
  float4 v[kSplitVec];
#pragma unroll
  for (int k = 0; k < kSplitVec; ++k) {  // every load issued before any is used
    const int64_t i = base + 4 * (threadIdx.x + k * kSplitThreads);
    if (i < n) v[k] = *reinterpret_cast<const float4*>(x + i);  // n % 4 == 0
  }
  unsigned long long best = 0;  // below every key
#pragma unroll
  for (int k = 0; k < kSplitVec; ++k) {
    const int64_t i = base + 4 * (threadIdx.x + k * kSplitThreads);
    if (i < n) {
      const float e[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) best = max(best, argmax_key(e[j], i + j));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
#pragma unroll
  for (int w = 1; w < kSplitThreads / 32; ++w) best = max(best, scratch[w]);
  ArgmaxSlot& s = slots[blockIdx.y];
  atomicMax(&s.key, best);
  __threadfence();
  if (atomicAdd(&s.ticket, 1u) != gridDim.x - 1) return;
  // The row's last CTA: every other CTA's maximum is in (their fences came before their tickets).
  __threadfence();
  const unsigned long long k = atomicExch(&s.key, 0ull);
  s.ticket = 0;
  out[blockIdx.y] = static_cast<int32_t>(~static_cast<uint32_t>(k));
}

__global__ void keys_kernel(const float* logits, int64_t n, int bits, uint64_t* keys) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) keys[i] = make_key(logits[i], static_cast<int32_t>(i), bits);
}

// Thread j applies the penalty to token j of the window unless an earlier entry holds it.
__global__ void penalty_kernel(const float* logits, int64_t n, int bits, const int32_t* tokens, int n_pen,
                               float penalty, uint64_t* keys) {
  for (int j = threadIdx.x; j < n_pen; j += blockDim.x) {
    const int32_t t = tokens[j];
    if (t < 0 || t >= n) continue;
    bool seen = false;
    for (int k = 0; k < j && !seen; ++k) seen = tokens[k] == t;
    if (!seen) keys[t] = make_key(penalise(logits[t], penalty), t, bits);
  }
}

__global__ void min_key_kernel(const uint64_t* keys, int64_t n, int bits, int32_t* out) {
  __shared__ uint64_t scratch[32];
  uint64_t m = ~uint64_t{0};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = keys[i] < m ? keys[i] : m;
  m = ops::block_min(m, scratch);
  if (threadIdx.x == 0) *out = key_id(m, bits);
}

struct FinishShared {
  double d[32];
  double carry;
  int first;
};

// probs[i] = softmax of the first m sorted logits at temperature temp, as the CPU computes
// it; ends with a barrier (probs readable by every thread).
__device__ void softmax(const uint64_t* keys, int bits, int64_t m, float temp, float* probs, FinishShared& sh) {
  const float mx = key_logit(keys[0], bits);
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const float e = ops::exp_f32(ops::div_rn(ops::sub_rn(key_logit(keys[i], bits), mx), temp));
    probs[i] = e;
    sum += static_cast<double>(e);
  }
  sum = ops::block_sum(sum, sh.d);
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x)
    probs[i] = static_cast<float>(static_cast<double>(probs[i]) / sum);
  __syncthreads();
}

// Inclusive scan of one double per thread across the block (blockDim.x a multiple of 32).
__device__ double block_inclusive_scan(double v, double* warp_totals, double& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double w = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += w;
  }
  __syncthreads();
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double t = lane < n_warps ? warp_totals[lane] : 0.0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const double w = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += w;
    }
    if (lane < n_warps) warp_totals[lane] = t;  // inclusive prefix of warp totals
  }
  __syncthreads();
  total = warp_totals[n_warps - 1];
  return warp > 0 ? v + warp_totals[warp - 1] : v;
}

// First i < m whose running sum cum_i = probs[0] + ... + probs[i] (double) satisfies
// `pred`; -1 if none.
template <class Pred>
__device__ int64_t first_cum(const float* probs, int64_t m, Pred pred, FinishShared& sh) {
  if (threadIdx.x == 0) sh.carry = 0.0, sh.first = INT_MAX;
  __syncthreads();
  for (int64_t base = 0; base < m; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const double v = i < m ? static_cast<double>(probs[i]) : 0.0;
    double total;
    const double incl = block_inclusive_scan(v, sh.d, total);
    const double cum = sh.carry + incl;
    if (i < m && pred(cum)) atomicMin(&sh.first, static_cast<int>(i));
    __syncthreads();
    const int f = sh.first;
    __syncthreads();  // every thread has read sh.first before anyone rewrites it
    if (f != INT_MAX) return f;
    if (threadIdx.x == 0) sh.carry += total;
    __syncthreads();
  }
  return -1;
}

// First i in [1, m) with !(probs[i] >= thr) (the CPU's min-p loop stops there); m if none.
__device__ int64_t first_below(const float* probs, int64_t m, float thr, FinishShared& sh) {
  if (threadIdx.x == 0) sh.first = INT_MAX;
  __syncthreads();
  for (int64_t i = 1 + threadIdx.x; i < m; i += blockDim.x)
    if (!(probs[i] >= thr)) atomicMin(&sh.first, static_cast<int>(i));
  __syncthreads();
  const int64_t f = sh.first;
  __syncthreads();
  return f == INT_MAX ? m : f;
}

__global__ void finish_kernel(const uint64_t* keys, int64_t n_vocab, int bits, int32_t top_k, float top_p,
                              float min_p, float temp, const double* u, float* probs, int32_t* out) {
  __shared__ FinishShared sh;
  int64_t n = (top_k > 0 && top_k < n_vocab) ? top_k : n_vocab;
  if (top_p < 1.0f) {
    softmax(keys, bits, n, 1.0f, probs, sh);
    const double p = top_p;
    const int64_t f = first_cum(probs, n, [p](double cum) { return cum >= p; }, sh);
    n = f < 0 ? n : f + 1;  // >= 1
  }
  if (min_p > 0.0f) {
    softmax(keys, bits, n, 1.0f, probs, sh);
    n = first_below(probs, n, ops::mul_rn(probs[0], min_p), sh);
  }
  softmax(keys, bits, n, temp, probs, sh);
  const double r = *u;
  const int64_t f = first_cum(probs, n, [r](double cum) { return r < cum; }, sh);
  if (threadIdx.x == 0) *out = key_id(keys[f < 0 ? n - 1 : f], bits);
}

struct Layout {
  size_t keys_in, keys_out, probs, temp, temp_bytes, total;
};

size_t align256(size_t b) { return (b + 255) & ~size_t{255}; }

Layout layout(int64_t n_vocab) {
  size_t temp_bytes = 0;
  FT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, static_cast<const uint64_t*>(nullptr),
                                               static_cast<uint64_t*>(nullptr), n_vocab, 0, 64));
  Layout l{};
  const size_t keys = align256(static_cast<size_t>(n_vocab) * sizeof(uint64_t));
  l.keys_in = 0;
  l.keys_out = keys;
  l.probs = 2 * keys;
  l.temp = l.probs + align256(static_cast<size_t>(n_vocab) * sizeof(float));
  l.temp_bytes = temp_bytes;
  l.total = l.temp + align256(temp_bytes);
  return l;
}

void check_vocab(const char* what, int64_t n_vocab) {
  if (n_vocab <= 0 || n_vocab > INT_MAX)
    fail_message(std::string(what) + ": n_vocab " + std::to_string(n_vocab) + " must be in [1, 2^31)");
}

}  // namespace

size_t argmax_scratch_bytes(int64_t n_rows) { return static_cast<size_t>(n_rows) * sizeof(ArgmaxSlot); }

void argmax(const float* logits, int64_t ld, int64_t n_vocab, int64_t n_rows, int32_t* out, cudaStream_t s,
            void* scratch) {
  if (n_rows <= 0) return;
  check_vocab("argmax", n_vocab);
  if (n_rows > INT_MAX) fail_message("argmax: " + std::to_string(n_rows) + " rows exceed the grid limit");
  const bool vec = n_vocab % 4 == 0 && ld % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0;
  if (vec && scratch != nullptr && n_rows <= 65535 && n_vocab > kSplitChunk) {
    const auto ctas = static_cast<unsigned>((n_vocab + kSplitChunk - 1) / kSplitChunk);
    launch_pdl(argmax_split_kernel, dim3(ctas, static_cast<unsigned>(n_rows)), dim3(kSplitThreads), 0, s, logits, ld,
               n_vocab, out, static_cast<ArgmaxSlot*>(scratch));
  } else if (vec)
    launch_pdl(argmax_kernel<true>, dim3(static_cast<unsigned>(n_rows)), dim3(kArgmaxThreads), 0, s,
               logits, ld, n_vocab, out);
  else
    launch_pdl(argmax_kernel<false>, dim3(static_cast<unsigned>(n_rows)), dim3(kArgmaxThreads), 0,
               s, logits, ld, n_vocab, out);
  FT_CUDA_CHECK_LAUNCH();
}

size_t sample_workspace_bytes(int64_t n_vocab) {
  check_vocab("sample", n_vocab);
  return layout(n_vocab).total;
}

void sample(const float* logits, int64_t n_vocab, const SampleParams& p, const double* u, int32_t* out, void* ws,
            cudaStream_t s) {
  check_vocab("sample", n_vocab);
  if (p.n_penalty < 0 || (p.n_penalty > 0 && p.penalty_tokens == nullptr))
    fail_message("sample: n_penalty " + std::to_string(p.n_penalty) + " needs as many penalty_tokens");
  if (reinterpret_cast<uintptr_t>(ws) % 256 != 0) fail_message("sample: the workspace must be 256-byte aligned");
  const Layout l = layout(n_vocab);
  auto* base = static_cast<uint8_t*>(ws);
  auto* keys_in = reinterpret_cast<uint64_t*>(base + l.keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(base + l.keys_out);
  auto* probs = reinterpret_cast<float*>(base + l.probs);
  const int bits = id_bits(n_vocab);

  keys_kernel<<<static_cast<unsigned>((n_vocab + 255) / 256), 256, 0, s>>>(logits, n_vocab, bits, keys_in);
  FT_CUDA_CHECK_LAUNCH();
  if (p.repeat_penalty != 1.0f && p.n_penalty > 0) {
    penalty_kernel<<<1, 128, 0, s>>>(logits, n_vocab, bits, p.penalty_tokens, p.n_penalty, p.repeat_penalty,
                                     keys_in);
    FT_CUDA_CHECK_LAUNCH();
  }
  if (p.temperature <= 0.0f) {
    min_key_kernel<<<1, 1024, 0, s>>>(keys_in, n_vocab, bits, out);
    FT_CUDA_CHECK_LAUNCH();
    return;
  }
  size_t temp_bytes = l.temp_bytes;
  FT_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(base + l.temp, temp_bytes, keys_in, keys_out, n_vocab, 0, 32 + bits, s));
  finish_kernel<<<1, kFinishThreads, 0, s>>>(keys_out, n_vocab, bits, p.top_k, p.top_p, p.min_p, p.temperature, u,
                                             probs, out);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
