// Device pieces of the norm fold (norm_fold.h): the RMSNorm of a decode layer's residual row made
// by the launches on either side of it instead of a one-CTA launch of its own. CUDA only.
//
// Producer (the launch writing the residual row y, n values): the warp that completes a 32-row
// block (a ticket counted by rows) writes Q8(y * w) -- the norm weight, not yet 1 / rms -- with
// the block's raw scale amax / 127 (not rounded to fp16), and the block's sum of squares
// sum(double(y * y)) over its 32 lanes (a fixed xor tree).
// Consumer (the GEMV reading that Q8 row): 1 / rms from the blocks' sums (lane l adds blocks l,
// l + 32, ... in order, then the same xor tree, in every warp alike), and each block's scale made
// fp16(raw * 1 / rms): the scale act_q8 would have rounded, of the normalised row.
// Q8's codes do not depend on a row scale (q = round(v * 127 / amax)), so the codes are those of
// the normalised row up to fp32 rounding of (y * s) * w against y * w.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/q8_tail.cuh"

namespace ft::cuda::norm_fold {

// The consumer's partials a lane at most (8: rows up to 8192 = kNormFoldMaxN). A consumer holding
// P < 8 a lane (32 P * 32 >= n) sums the same values: the entries past the row are zeros.
inline constexpr int kMaxPartsPerLane = 8;

// The calling lane's norm weight of 32-row block blk (lane i: w[32 blk + i]). The weights are never
// written by a decode step, so the GEMV producers load it before their PDL wait, not in the tail: a
// norm weight read after the sums is a DRAM miss (each layer's 16 KB are evicted by the ~120 MB of
// weights streamed between two reads of it) at the very end of the producer -- on the critical path.
__device__ __forceinline__ float weight_of(const float* w, int blk) {
  return __ldg(w + 32 * static_cast<int64_t>(blk) + (static_cast<int>(threadIdx.x) & 31));
}

// The completing warp: lane i holds y[32 blk + i] (final) and wv = weight_of(w, blk), its norm weight.
__device__ __forceinline__ void block_warp(float y, float wv, int blk, int64_t n, uint8_t* xq_row, double* part) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  double sq = static_cast<double>(__fmul_rn(y, y));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xFFFFFFFFu, sq, o);
  q8_quantize_warp</*RAW=*/true>(__fmul_rn(y, wv), blk, n, xq_row);
  if (lane == 0) part[blk] = sq;
}

// The ticket of a producer: `rows` rows of 32-row block blk are stored by this warp or CTA (the
// caller has synced the storing threads with __syncwarp / __syncthreads); true for the caller that
// completes the block, whose counter it re-arms (every lane of the calling warp gets the same answer).
// Lane 0 counts with an acq_rel atomic: its release carries the CTA's synced stores, its acquire the
// other CTAs' (cumulative), and __syncwarp passes that on to the lanes that read the rows -- no
// __threadfence by the storers or the reader, as the SwiGLU tail has (gemv_mma.cu).
__device__ __forceinline__ bool block_done(unsigned* count, int blk, int rows) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  unsigned old = 0;
  if (lane == 0)
    asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(count + blk), "r"(static_cast<unsigned>(rows))
                 : "memory");
  old = __shfl_sync(0xFFFFFFFFu, old, 0);
  __syncwarp();
  const bool last = old + static_cast<unsigned>(rows) == 32u;
  if (last && lane == 0) count[blk] = 0u;
  return last;
}

// Consumer, step 1 (before the loads of the row, so they share a round trip): lane l's sums of
// blocks l, l + 32, ... (n_blk of them; at most kMaxPartsPerLane a lane).
template <int P>
__device__ __forceinline__ void load_parts(const double* part, int n_blk, double (&pv)[P]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int b = lane + 32 * j;
    pv[j] = b < n_blk ? __ldcg(part + b) : 0.0;
  }
}

// Consumer, step 2: 1 / rms of the row (n values), the same bits in every lane and warp.
template <int P>
__device__ __forceinline__ float inv_rms(const double (&pv)[P], int64_t n, float eps) {
  double s = pv[0];
#pragma unroll
  for (int j = 1; j < P; ++j) s += pv[j];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  const float mean = static_cast<float>(s / static_cast<double>(n));
  return __frcp_rn(__fsqrt_rn(__fadd_rn(mean, eps)));
}

// A block's scale of the normalised row from its raw scale.
__device__ __forceinline__ float fix_scale(float raw, float inv) {
  return __half2float(__float2half_rn(__fmul_rn(raw, inv)));
}

}  // namespace ft::cuda::norm_fold
