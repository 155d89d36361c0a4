// MoE routing (moe_route.h). Up to kWarpMaxExperts experts and kWarpMaxUsed chosen ones
// (every model we run), one warp routes a token with no barrier (route_row_warp): lane i
// holds experts 8i..8i+7 in registers, the max and the counts are warp reductions, the exp
// sum is rounded exactly as the block route's thread 0 rounds it, and the top k come from k
// rounds of a warp argmax (redux.sync on the probabilities' bits). Past those limits, one
// block of 128 threads per token (route_row): the probabilities in shared memory, each thread
// ranks its experts by counting the experts with a larger probability and flags a tie when
// an expert of rank < n_used shares its probability with another one. Both redo the
// selection with the std::sort twin on one thread only when a tie reaches the top k (about
// 10 us for 128 experts). The two give the same bits (test CudaOpsMoeRoute.WarpEqualsBlock).
// H200 (session 7, ft-bench-small-cuda, one token, per launch in a graph): Qwen3 router
// GEMV + route 5.40 us with the warp route vs 6.09 with the block route; moe_route alone
// 2.91 vs 3.98. Since session 22 the warp route first tries route_row_warp_fast (the top k
// chosen on the exponentials while their sum runs, 4 experts a lane up to 128, checked for ties
// on the probabilities after; the same bits, the exact rounds on a tie): Qwen3-30B-A3B tg128
// +6.6-8.4% on the H200 (FT_MOE_ROUTE_FAST=0: the exact rounds only).
#include "cuda/moe_route.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/norm_row.cuh"
#include "cuda/pdl.cuh"
#include "cuda/stl_sort.cuh"
#include "cuda/moe_route_warp.cuh"

namespace ft::cuda {
namespace {

using namespace route_warp;

constexpr int kThreads = 128;
constexpr int kMaxUsed = 64;
// Routes one token's logits l (all threads of a 128-thread block; ends with a barrier, so a
// block may call it for several tokens in turn). probs / order: n_expert floats / ints of
// shared memory.
__device__ void route_row(const float* l, int n_expert, int n_used, float* probs, int32_t* order, int32_t* ids,
                          float* weights) {
  __shared__ float scratch_f[32];
  __shared__ double scratch_d[32];
  __shared__ int32_t sel[kMaxUsed];
  __shared__ int tie;
  float mx = -INFINITY;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) mx = fmaxf(mx, l[e]);
  mx = ops::block_max(mx, scratch_f);
  // e^(l - max) and their sum as engine::moe_route (vec_math.h exp_sum, unpadded rows):
  // groups of 8 through exp_v, each group summed in fp32 as ((y0+y4) + (y2+y6)) + ((y1+y5) +
  // (y3+y7)) and added to a double in group order; the last n mod 8 through expf, one by one.
  const int n8 = n_expert / 8 * 8;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    const float d = ops::sub_rn(l[e], mx);
    probs[e] = e < n8 ? ops::exp_v(d) : ops::exp_f32(d);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (int g = 0; g < n8; g += 8) {
      const float* y = probs + g;
      const float a = ops::add_rn(y[0], y[4]), b = ops::add_rn(y[1], y[5]), c = ops::add_rn(y[2], y[6]),
                  d = ops::add_rn(y[3], y[7]);
      sum += static_cast<double>(ops::add_rn(ops::add_rn(a, c), ops::add_rn(b, d)));
    }
    for (int e = n8; e < n_expert; ++e) sum += static_cast<double>(probs[e]);
    scratch_d[0] = sum;
  }
  __syncthreads();
  const double sum = scratch_d[0];
  __syncthreads();  // scratch_d is reused by the next token's block_max / block_sum
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) probs[e] = ops::mul_rn(probs[e], inv);
  if (threadIdx.x == 0) tie = 0;
  __syncthreads();

  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    const float p = probs[e];
    int gt = 0, eq = 0;
    for (int j = 0; j < n_expert; ++j) {
      const float q = probs[j];
      gt += q > p;
      eq += q == p;
    }
    if (gt < n_used) {
      if (eq > 1) tie = 1;  // eq counts e itself
      else sel[gt] = e;
    }
  }
  __syncthreads();

  __shared__ SortRange sort_stack[kSortStack];
  if (threadIdx.x == 0) {
    if (tie) {
      for (int e = 0; e < n_expert; ++e) order[e] = e;
      stl_sort::sort_with(order, n_expert, ByProbDesc{probs}, sort_stack);
      for (int r = 0; r < n_used; ++r) sel[r] = order[r];
    }
    write_renormalised(probs, sel, n_used, ids, weights);
  }
  __syncthreads();  // sel, tie and probs are free for the next token
}

// moe_route_set_warp(0): the block route everywhere (tests, ft-bench-small-cuda); 2: the warp route
// without its fast path (route_row_warp_exact only); 3 (tests): the fast path alone, ids -1 where it
// finds a tie. FT_MOE_ROUTE_FAST=0 makes 2 the default.
int route_default() {
  const char* e = std::getenv("FT_MOE_ROUTE_FAST");
  return e != nullptr && *e == '0' ? 2 : 1;
}
int g_warp_route = route_default();
// The warp route's mode for these counts: 0 none (the block route), 1 fast, 2 exact, 3 fast only.
// route_row_warp's `fast` argument for a mode.
__host__ __device__ inline int fast_arg(int mode) { return mode == 1 ? 1 : mode == 3 ? 2 : 0; }
int use_warp_route(int n_expert, int n_used) { return warp_route_fits(n_expert, n_used) ? g_warp_route : 0; }

// Warp route: block b's warp w routes token 4b + w (no barrier: warps past n_tok just end).
__global__ void __launch_bounds__(kThreads) moe_route_warp_kernel(const float* logits, int64_t ld, int n_expert,
                                                                  int n_used, int n_tok, int32_t* ids,
                                                                  float* weights, int fast) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ float smem[];
  const int w = static_cast<int>(threadIdx.x) >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + w;
  if (t >= n_tok) return;
  float* probs = smem + 2 * n_expert * w;
  route_row_warp(logits + t * ld, n_expert, n_used, probs, reinterpret_cast<int32_t*>(probs + n_expert),
                 ids + t * n_used, weights + t * n_used, fast);
}

__global__ void __launch_bounds__(kThreads) moe_route_kernel(const float* logits, int64_t ld, int n_expert,
                                                             int n_used, int32_t* ids, float* weights) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ float smem[];
  const int64_t t = blockIdx.x;
  route_row(logits + t * ld, n_expert, n_used, smem, reinterpret_cast<int32_t*>(smem + n_expert), ids + t * n_used,
            weights + t * n_used);
}

// Weight element loads of the fused router: 4 consecutive elements of a row as floats.
template <class WT>
__device__ __forceinline__ float4 load4(const uint8_t* row, int64_t i);
template <>
__device__ __forceinline__ float4 load4<float>(const uint8_t* row, int64_t i) {
  return __ldg(reinterpret_cast<const float4*>(row) + i / 4);
}
template <>
__device__ __forceinline__ float4 load4<__nv_bfloat16>(const uint8_t* row, int64_t i) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(row + 2 * i));
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                     __uint_as_float(u.y & 0xFFFF0000u));
}
template <>
__device__ __forceinline__ float4 load4<__half>(const uint8_t* row, int64_t i) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(row + 2 * i));
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// moe_router_route: block e computes expert e's logits for every token (its 8 warps split
// the row; fp32 products and sums, as the float GEMV, in some order), writes them, and the
// last block to finish (atomic ticket, reset by that block for the next replay) routes the
// tokens. The first weight loads are issued before pdl_wait (the router weights do not
// depend on the kernel before). H200, Qwen3 router (128 x 2048 fp32): 11.0 us with one warp
// per row and one load in flight, 10.1 us with one warp per row and 8 loads in flight.
constexpr int kRouterThreads = 256;
static_assert(kRouterThreads / 32 <= kMaxWarps && kThreads / 32 <= kMaxWarps, "one sort stack a warp");

// The end of both router kernels: block e's per-thread sums acc[t] into logits[t][e] (warp
// sums, then the warps in order, by one thread), and the last block to finish routes.
__device__ __forceinline__ void router_finish(const float (&acc)[kMoeRouterMaxTokens], int n_tok, int e, int n_expert,
                                              float* logits, int64_t ld, int n_used, int32_t* ids, float* weights,
                                              unsigned* ticket, int warp_route, float* smem, bool route = true) {
  __shared__ float part[kRouterThreads / 32][kMoeRouterMaxTokens];
  __shared__ bool last;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
#pragma unroll
  for (int t = 0; t < kMoeRouterMaxTokens; ++t) {
    if (t >= n_tok) break;
    const float v = ops::warp_sum(acc[t]);
    if (lane == 0) part[warp][t] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // one thread writes the logits, fences them and takes the ticket
    for (int t = 0; t < n_tok; ++t) {
      float v = part[0][t];
      for (int j = 1; j < kRouterThreads / 32; ++j) v += part[j][t];
      logits[t * ld + e] = v;
    }
    if (!route) return;  // the next launch routes the logits (moe_norm_router_route's route)
    __threadfence();  // this block's logits are visible device-wide before its ticket
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!route || !last) return;
  __threadfence();
  if (warp_route) {  // a warp per token, each reading its logits straight from L2
    const int w = static_cast<int>(threadIdx.x) >> 5;
    if (w < n_tok) {
      float* probs = smem + 2 * n_expert * w;
      route_row_warp(logits + w * ld, n_expert, n_used, probs, reinterpret_cast<int32_t*>(probs + n_expert),
                     ids + w * n_used, weights + w * n_used, fast_arg(warp_route));
    }
    __syncthreads();
    if (threadIdx.x == 0) *ticket = 0;
    return;
  }
  for (int t = 0; t < n_tok; ++t) {
    float* l = smem + 2 * n_expert;  // the logits, read past L1 (other blocks wrote them)
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) l[e] = __ldcg(logits + t * ld + e);
    __syncthreads();
    route_row(l, n_expert, n_used, smem, reinterpret_cast<int32_t*>(smem + n_expert), ids + t * n_used,
              weights + t * n_used);
  }
  if (threadIdx.x == 0) *ticket = 0;
}

template <class WT>
__global__ void __launch_bounds__(kRouterThreads) router_route_kernel(const float* x, int64_t ldx, int n_tok,
                                                                      const uint8_t* w, int64_t row_bytes, int64_t k,
                                                                      int n_expert, float* logits, int64_t ld,
                                                                      int n_used, int32_t* ids, float* weights,
                                                                      unsigned* ticket, int warp_route) {
  extern __shared__ float smem[];
  constexpr int kU = 4;  // float4 weight loads in flight per thread
  const int e = static_cast<int>(blockIdx.x);
  const uint8_t* row = w + static_cast<int64_t>(e) * row_bytes;
  const int64_t nf = k / 4;  // float4 columns of the row
  float acc[kMoeRouterMaxTokens];
#pragma unroll
  for (int t = 0; t < kMoeRouterMaxTokens; ++t) acc[t] = 0.0f;
  float4 q[kU];
  auto load = [&](int64_t f0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t f = f0 + static_cast<int64_t>(kRouterThreads) * u;
      q[u] = f < nf ? load4<WT>(row, 4 * f) : make_float4(0, 0, 0, 0);
    }
  };
  int64_t f0 = threadIdx.x;
  load(f0);
  pdl_wait();
  pdl_trigger();
  for (;;) {
#pragma unroll
    for (int t = 0; t < kMoeRouterMaxTokens; ++t) {
      if (t >= n_tok) break;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t f = f0 + static_cast<int64_t>(kRouterThreads) * u;
        if (f >= nf) break;
        const float4 v = __ldg(reinterpret_cast<const float4*>(x + t * ldx) + f);
        acc[t] = fmaf(q[u].x, v.x, acc[t]);
        acc[t] = fmaf(q[u].y, v.y, acc[t]);
        acc[t] = fmaf(q[u].z, v.z, acc[t]);
        acc[t] = fmaf(q[u].w, v.w, acc[t]);
      }
    }
    f0 += static_cast<int64_t>(kRouterThreads) * kU;
    if (f0 >= nf) break;
    load(f0);
  }
  router_finish(acc, n_tok, e, n_expert, logits, ld, n_used, ids, weights, ticket, warp_route, smem);
}


// moe_norm_router_route (one token): every block normalises the row itself with the norm
// kernel's body (norm_row.cuh: the same bits as rmsnorm_q8), block 0 also writes the row and
// its Q8 copy for the experts, and block e's router dot product takes the normalised values
// from its registers -- thread i holds float4 i, i + 256, ... of both, the same elements in the
// same order as router_route_kernel reads them -- so the logits are that kernel's too. Saves
// the norm's launch; the norm weights and the first router weights load before pdl_wait.
template <class WT, int NV>
__global__ void __launch_bounds__(kRouterThreads) norm_router_route_kernel(
    const float* x, const float* norm_w, float eps, Round round, float* h, uint8_t* xq, int64_t k, const uint8_t* w,
    int64_t row_bytes, int n_expert, float* logits, int64_t ld, int n_used, int32_t* ids, float* weights,
    unsigned* ticket, int warp_route, bool route) {
  static_assert(kRouterThreads == norm_row::kThreads, "norm_row's thread layout");
  extern __shared__ float smem[];
  __shared__ double scratch[32];
  const int e = static_cast<int>(blockIdx.x), tid = static_cast<int>(threadIdx.x);
  const uint8_t* row = w + static_cast<int64_t>(e) * row_bytes;
  float4 q[NV];
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kRouterThreads) * j);
    q[j] = i < k ? load4<WT>(row, i) : make_float4(0, 0, 0, 0);
  }
  float4 g[NV];
  norm_row::load_weights(norm_w, k, g);
  pdl_wait();
  pdl_trigger();
  float4 o[NV];
  norm_row::normalize<false, NV>(const_cast<float*>(x), nullptr, g, norm_w != nullptr, k, eps, e == 0 ? h : nullptr,
                                 round, e == 0 ? xq : nullptr, scratch, o);
  float acc[kMoeRouterMaxTokens];
#pragma unroll
  for (int t = 0; t < kMoeRouterMaxTokens; ++t) acc[t] = 0.0f;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kRouterThreads) * j);
    if (i >= k) break;
    acc[0] = fmaf(q[j].x, o[j].x, acc[0]);
    acc[0] = fmaf(q[j].y, o[j].y, acc[0]);
    acc[0] = fmaf(q[j].z, o[j].z, acc[0]);
    acc[0] = fmaf(q[j].w, o[j].w, acc[0]);
  }
  router_finish(acc, 1, e, n_expert, logits, ld, n_used, ids, weights, ticket, warp_route, smem, route);
}
}  // namespace

void moe_route(const float* logits, int64_t ld, int64_t n_expert, int64_t n_tok, int n_used, int32_t* ids,
               float* weights, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (n_expert <= 0 || n_expert > kMoeRouteMaxExperts)
    fail_message("moe_route: n_expert " + std::to_string(n_expert) + " must be in [1, " +
                 std::to_string(kMoeRouteMaxExperts) + "]");
  if (n_used <= 0 || n_used > n_expert || n_used > kMaxUsed)
    fail_message("moe_route: n_used " + std::to_string(n_used) + " must be in [1, min(n_expert, " +
                 std::to_string(kMaxUsed) + ")]");
  if (n_tok > 0x7fffffff) fail_message("moe_route: " + std::to_string(n_tok) + " tokens exceed the grid limit");
  if (const int mode = use_warp_route(static_cast<int>(n_expert), n_used); mode != 0) {
    constexpr int64_t per = kThreads / 32;
    const size_t smem = static_cast<size_t>(per * n_expert) * (sizeof(float) + sizeof(int32_t));
    launch_pdl(moe_route_warp_kernel, dim3(static_cast<unsigned>((n_tok + per - 1) / per)), dim3(kThreads), smem, s,
               logits, ld, static_cast<int>(n_expert), n_used, static_cast<int>(n_tok), ids, weights, fast_arg(mode));
    FT_CUDA_CHECK_LAUNCH();
    return;
  }
  const size_t smem = static_cast<size_t>(n_expert) * (sizeof(float) + sizeof(int32_t));
  launch_pdl(moe_route_kernel, dim3(static_cast<unsigned>(n_tok)), dim3(kThreads), smem, s, logits,
             ld, static_cast<int>(n_expert), n_used, ids, weights);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_route_set_warp(int on) { g_warp_route = on < 0 ? route_default() : on; }
int moe_route_fast() { return fast_arg(g_warp_route); }

namespace {

// The expert counts both router launches take (fails with `who` in the message).
void check_route_counts(const char* who, int64_t n_expert, int n_used) {
  if (n_expert <= 0 || n_expert > kMoeRouteMaxExperts || n_used <= 0 || n_used > n_expert || n_used > kMaxUsed)
    fail_message(std::string(who) + ": n_expert " + std::to_string(n_expert) + " / n_used " + std::to_string(n_used) +
                 " out of range");
}

// Shared memory of router_finish for n_tok tokens: the warp route holds probs + order per
// token's warp; the block route probs, order and the logits.
size_t route_smem(int64_t n_tok, int64_t n_expert, bool warp) {
  return warp ? static_cast<size_t>(n_tok * n_expert) * (sizeof(float) + sizeof(int32_t))
              : static_cast<size_t>(n_expert) * (2 * sizeof(float) + sizeof(int32_t));
}

// f(WT{}) for the router weights' element type (F32, BF16, F16; callers checked it).
template <class F>
void by_weight_type(GgmlType type, F&& f) {
  if (type == GgmlType::F32) f(float{});
  else if (type == GgmlType::BF16) f(__nv_bfloat16{});
  else f(__half{});
}

}  // namespace

bool moe_router_route_supported(GgmlType type, int64_t k, int64_t row_bytes, int64_t n_tok) {
  return (type == GgmlType::F32 || type == GgmlType::BF16 || type == GgmlType::F16) && k > 0 && k % 4 == 0 &&
         row_bytes % 16 == 0 && n_tok >= 1 && n_tok <= kMoeRouterMaxTokens;
}

void moe_router_route(const float* x, int64_t ldx, int64_t n_tok, GgmlType type, const void* w, int64_t row_bytes,
                      int64_t k, int64_t n_expert, float* logits, int64_t ld, int n_used, int32_t* ids,
                      float* weights, unsigned* ticket, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (!moe_router_route_supported(type, k, row_bytes, n_tok) || ldx % 4 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0 || ticket == nullptr)
    fail_message("moe_router_route: needs F32/BF16/F16 router weights, k % 4 == 0, 16-byte aligned rows and "
                 "activations, 1.." + std::to_string(kMoeRouterMaxTokens) + " tokens and a ticket counter (k = " +
                 std::to_string(k) + ", n_tok = " + std::to_string(n_tok) + ")");
  check_route_counts("moe_router_route", n_expert, n_used);
  const unsigned grid = static_cast<unsigned>(n_expert);  // one block per expert row
  const int warp = use_warp_route(static_cast<int>(n_expert), n_used);
  const size_t smem = route_smem(n_tok, n_expert, warp);
  by_weight_type(type, [&](auto wt) {
    launch_pdl(router_route_kernel<decltype(wt)>, dim3(grid), dim3(kRouterThreads), smem, s, x, ldx,
               static_cast<int>(n_tok), static_cast<const uint8_t*>(w), row_bytes, k, static_cast<int>(n_expert), logits,
               ld, n_used, ids, weights, ticket, warp);
  });
  FT_CUDA_CHECK_LAUNCH();
}


bool moe_norm_router_route_supported(GgmlType type, int64_t k, int64_t row_bytes, const void* x, const void* norm_w,
                                     const void* h, const void* xq, const void* w) {
  for (const void* p : {x, norm_w, h, xq, w})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return moe_router_route_supported(type, k, row_bytes, 1) && k % 32 == 0 && k <= 8 * 4 * kRouterThreads;
}

void moe_norm_router_route(const float* x, const float* norm_w, float eps, Round round, float* h, void* xq,
                           int64_t k, GgmlType type, const void* w, int64_t row_bytes, int64_t n_expert, float* logits,
                           int64_t ld, int n_used, int32_t* ids, float* weights, unsigned* ticket, cudaStream_t s,
                           bool route) {
  if (!moe_norm_router_route_supported(type, k, row_bytes, x, norm_w, h, xq, w) || x == nullptr || h == nullptr ||
      xq == nullptr || w == nullptr || ticket == nullptr)
    fail_message("moe_norm_router_route: needs F32/BF16/F16 router weights, k % 32 == 0 and k <= 8192, 16-byte "
                 "aligned rows, activations and outputs, and a ticket counter (k = " + std::to_string(k) + ")");
  check_route_counts("moe_norm_router_route", n_expert, n_used);
  const int warp = use_warp_route(static_cast<int>(n_expert), n_used);
  const size_t smem = route_smem(1, n_expert, warp);
  auto* xq8 = static_cast<uint8_t*>(xq);
  const auto* wb = static_cast<const uint8_t*>(w);
  auto go = [&](auto kernel) {
    launch_pdl(kernel, dim3(static_cast<unsigned>(n_expert)), dim3(kRouterThreads), smem, s, x, norm_w, eps, round, h,
               xq8, k, wb, row_bytes, static_cast<int>(n_expert), logits, ld, n_used, ids, weights, ticket, warp,
               route);
  };
  const int64_t nv = (k + 4 * kRouterThreads - 1) / (4 * kRouterThreads);
  auto by_nv = [&](auto wt) {
    using WT = decltype(wt);
    if (nv <= 1) go(norm_router_route_kernel<WT, 1>);
    else if (nv <= 2) go(norm_router_route_kernel<WT, 2>);
    else if (nv <= 4) go(norm_router_route_kernel<WT, 4>);
    else go(norm_router_route_kernel<WT, 8>);
  };
  by_weight_type(type, by_nv);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
