// One RMSNorm row held in registers by a 256-thread block (thread i: float4 i, i + 256, ...),
// shared by the norm's register kernel (norm.cu) and the kernels that normalise their own input
// (moe_route.cu's norm + router): one body, so their outputs are the same bits by construction.
// CUDA only.
#pragma once

#include <cstdint>

#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"

namespace ft::cuda::norm_row {

inline constexpr int kThreads = 256;

// One float4 of a normalised row: x * scale * weight (x * scale without weights), each product rounded to
// float, then rounded by r -- the element epilogue every RMSNorm body here shares (norm.cu's kernels, normalize,
// normalize_played), so their outputs are the same bits by construction.
__device__ __forceinline__ float4 scale_quad(float4 x, float scale, bool weighted, float4 g, Round r) {
  float4 t;
  if (weighted) {
    t.x = ops::mul_rn(ops::mul_rn(x.x, scale), g.x), t.y = ops::mul_rn(ops::mul_rn(x.y, scale), g.y);
    t.z = ops::mul_rn(ops::mul_rn(x.z, scale), g.z), t.w = ops::mul_rn(ops::mul_rn(x.w, scale), g.w);
  } else {
    t.x = ops::mul_rn(x.x, scale), t.y = ops::mul_rn(x.y, scale), t.z = ops::mul_rn(x.z, scale),
    t.w = ops::mul_rn(x.w, scale);
  }
  t.x = round_to(r, t.x), t.y = round_to(r, t.y), t.z = round_to(r, t.z), t.w = round_to(r, t.w);
  return t;
}

// The norm weights of this thread's float4s (ones without weights); they never depend on an
// earlier kernel, so callers load them before pdl_wait.
template <int NV>
__device__ __forceinline__ void load_weights(const float* w, int64_t n, float4 (&g)[NV]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kThreads) * j);
    g[j] = w != nullptr && i < n ? __ldg(reinterpret_cast<const float4*>(w + i)) : make_float4(1, 1, 1, 1);
  }
}

// Row xr (+= br when kAdd, written back) normalised into o: the double sum of the float
// squares per thread in float4 order, block_sum, scale = 1 / sqrt(mean + eps), o = x * scale
// * weight rounded by r; written to yr and quantised into xq_row where those are not null.
// o[j] past n is left unset. Every thread of the block calls it (block_sum syncs).
template <bool kAdd, int NV>
__device__ __forceinline__ void normalize(float* xr, const float* br, const float4 (&g)[NV], bool weighted,
                                          int64_t n, float eps, float* yr, Round r, uint8_t* xq_row,
                                          double* scratch, float4 (&o)[NV]) {
  const int tid = static_cast<int>(threadIdx.x);
  float4 v[NV];
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kThreads) * j);
    if (i >= n) break;
    v[j] = *reinterpret_cast<const float4*>(xr + i);
    if constexpr (kAdd) {
      const float4 a = *reinterpret_cast<const float4*>(br + i);
      v[j].x = ops::add_rn(v[j].x, a.x), v[j].y = ops::add_rn(v[j].y, a.y), v[j].z = ops::add_rn(v[j].z, a.z),
      v[j].w = ops::add_rn(v[j].w, a.w);
      *reinterpret_cast<float4*>(xr + i) = v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kThreads) * j);
    if (i >= n) break;
    sum += static_cast<double>(ops::mul_rn(v[j].x, v[j].x));
    sum += static_cast<double>(ops::mul_rn(v[j].y, v[j].y));
    sum += static_cast<double>(ops::mul_rn(v[j].z, v[j].z));
    sum += static_cast<double>(ops::mul_rn(v[j].w, v[j].w));
  }
  sum = ops::block_sum(sum, scratch);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int64_t i = 4 * (tid + static_cast<int64_t>(kThreads) * j);
    if (i >= n) break;
    const float4 t = scale_quad(v[j], scale, weighted, g[j], r);
    o[j] = t;
    if (yr != nullptr) *reinterpret_cast<float4*>(yr + i) = t;
    if (xq_row != nullptr) q8_quantize_quad(t, i, n, xq_row);
  }
}

// normalize<false, NV>'s bytes from kThreads / VT threads (a CTA of another kernel playing the norm's
// block: the lean GEMV's norm CTA, gemv_nvfp4_lean.cu): thread t plays threads t + (kThreads / VT) u,
// u < VT -- their float4s, double sums (reduced in block_sum's tree: each played warp's xor tree,
// then the kThreads / 32 warp sums in order), outputs and Q8 blocks (a played warp is a real warp, so
// its 8-lane Q8 groups are too). xr is read from L2 (other CTAs wrote it). ws: the n norm weights (16-byte aligned; the caller stages them in
// shared memory) or null (none). Every thread of the CTA calls it; scratch: kThreads / 32 doubles.
template <int NV, int VT>
__device__ __forceinline__ void normalize_played(const float* xr, const float* ws, int64_t n, float eps, float* yr,
                                                 Round r, uint8_t* xq_row, double* scratch) {
  static_assert(kThreads % (32 * VT) == 0, "whole warps play whole warps");
  constexpr int kReal = kThreads / VT;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  float4 v[VT][NV];
  double sum[VT];
#pragma unroll
  for (int u = 0; u < VT; ++u) {
    sum[u] = 0.0;
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int64_t i = 4 * (tid + kReal * u + static_cast<int64_t>(kThreads) * j);
      if (i >= n) break;
      v[u][j] = __ldcg(reinterpret_cast<const float4*>(xr + i));  // written by other CTAs: from L2
    }
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int64_t i = 4 * (tid + kReal * u + static_cast<int64_t>(kThreads) * j);
      if (i >= n) break;
      sum[u] += static_cast<double>(ops::mul_rn(v[u][j].x, v[u][j].x));
      sum[u] += static_cast<double>(ops::mul_rn(v[u][j].y, v[u][j].y));
      sum[u] += static_cast<double>(ops::mul_rn(v[u][j].z, v[u][j].z));
      sum[u] += static_cast<double>(ops::mul_rn(v[u][j].w, v[u][j].w));
    }
  }
#pragma unroll
  for (int u = 0; u < VT; ++u) {
    const double wsum = ops::warp_sum(sum[u]);
    if (lane == 0) scratch[warp + (kReal / 32) * u] = wsum;
  }
  __syncthreads();
  const double total = ops::warp_sum(lane < kThreads / 32 ? scratch[lane] : 0.0);
  const float mean = static_cast<float>(total / static_cast<double>(n));
  const float scale = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
#pragma unroll
  for (int u = 0; u < VT; ++u) {
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int64_t i = 4 * (tid + kReal * u + static_cast<int64_t>(kThreads) * j);
      if (i >= n) break;
      const float4 t = ws != nullptr ? scale_quad(v[u][j], scale, true, *reinterpret_cast<const float4*>(ws + i), r)
                                     : scale_quad(v[u][j], scale, false, make_float4(1, 1, 1, 1), r);
      if (yr != nullptr) *reinterpret_cast<float4*>(yr + i) = t;
      if (xq_row != nullptr) q8_quantize_quad(t, i, n, xq_row);
    }
  }
}

}  // namespace ft::cuda::norm_row
