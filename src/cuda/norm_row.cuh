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
// float, then rounded by r -- the element epilogue of every RMSNorm body (norm.cu's kernels and normalize),
// so their outputs are the same bits by construction.
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

}  // namespace ft::cuda::norm_row
