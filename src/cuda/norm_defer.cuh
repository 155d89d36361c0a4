// Device halves of the deferred RMSNorm (norm_defer.h), shared by the stand-alone kernels
// (norm_defer.cu) and the tensor-core GEMV (gemv_mma.cu): one body, the same bits.
// CUDA translation units only.
#pragma once

#include <cstdint>

#include "cuda/norm_defer.h"
#include "cuda/ops_math.cuh"
#include "cuda/q8_tail.cuh"

namespace ft::cuda::norm_defer {

// Block j of the row: lane i of the calling warp holds x[32 j + i] (v) and w[32 j + i] (wt; 1
// without weights); all 32 lanes call together. Writes xq's block j and ss[j].
__device__ __forceinline__ void block_pieces(float v, float wt, int64_t j, int64_t n, uint8_t* xq_row, double* ss) {
  q8_quantize_warp(ops::mul_rn(v, wt), j, n, xq_row);
  double d = static_cast<double>(ops::mul_rn(v, v));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xFFFFFFFFu, d, o);
  if ((threadIdx.x & 31) == 0) ss[j] = d;
}

// The partials lane l adds: ss[l + 32 i], i < kNormDeferLanes (0 past the row's blocks). Plain
// loads: ss comes from an earlier launch.
__device__ __forceinline__ void load_partials(const double* ss, int64_t n, double (&r)[kNormDeferLanes]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t nb = n / 32;
#pragma unroll
  for (int i = 0; i < kNormDeferLanes; ++i) r[i] = lane + 32 * i < nb ? ss[lane + 32 * i] : 0.0;
}

// The norm's scale from the loaded partials (every lane of the warp calls; every lane gets it).
__device__ __forceinline__ float scale_of(const double (&r)[kNormDeferLanes], int64_t n, float eps) {
  double s = r[0];
#pragma unroll
  for (int i = 1; i < kNormDeferLanes; ++i) s += r[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  const float mean = static_cast<float>(s / static_cast<double>(n));
  return ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
}

}  // namespace ft::cuda::norm_defer
