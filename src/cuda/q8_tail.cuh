// Quantisation of a row segment to the integer GEMV's Q8 layout (act_q8.h) as the tail of the
// kernel that produced it (rmsnorm, swiglu, decode attention): the same per-block arithmetic as
// quantize_act_q8's kernel, on the values the block has just written, so the bytes are
// identical and one launch per GEMV input disappears (3 of ~18 launches per MoE layer).
#pragma once

#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/gemv_q8_formats.cuh"

namespace ft::cuda {

// One block of 32 from one value per lane: lane i of the calling warp holds element 32*j + i
// of the row, and all 32 lanes call this together with the same j (no barrier, no reload).
// The arithmetic of quantize_act_q8's kernel, step for step: the same bytes. RAW: the block's scale
// stored as amax / 127 before its fp16 rounding (the norm fold's rows, norm_fold.cuh); the codes alike.
template <bool RAW = false>
__device__ __forceinline__ void q8_quantize_warp(float v, int64_t j, int64_t k, uint8_t* xq_row) {
  using namespace q8_detail;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  float d, id;
  act_q8_scales(amax, d, id);
  const int q = round_half_even(v * id);
  xq_row[32 * j + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
  int s = q;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  const int s_hi = __shfl_sync(0xFFFFFFFFu, s, 16);
  if (lane == 0) {
    ActQ8Scale sc;
    sc.d = RAW ? amax / 127.0f : d;
    sc.s_lo = static_cast<int16_t>(s);
    sc.s_hi = static_cast<int16_t>(s_hi);
    reinterpret_cast<ActQ8Scale*>(xq_row + k)[j] = sc;
  }
}

// Blocks of 32 covering [c0, c1) of a row of k values (c0, c1 multiples of 32), y already
// written by this CTA and visible (call after __syncthreads()); xq_row: the token's Q8 row.
__device__ __forceinline__ void q8_quantize_segment(const float* y, int64_t c0, int64_t c1, int64_t k,
                                                    uint8_t* xq_row) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5, n_warps = static_cast<int>(blockDim.x) >> 5;
  for (int64_t j = c0 / 32 + warp; j < c1 / 32; j += n_warps) q8_quantize_warp(y[32 * j + lane], j, k, xq_row);
}

// The same bytes from registers: the calling lane holds elements [i, i + 4) of the row (i a
// multiple of 4) and the 8 lanes of its 32-element block -- lanes 8m..8m+7 of the warp,
// holding the block's quads in order -- all call this together (k % 32 == 0 makes a block
// either wholly inside the row or wholly past it). No barrier, no reload of y.
__device__ __forceinline__ void q8_quantize_quad(const float4& o, int64_t i, int64_t k, uint8_t* xq_row) {
  using namespace q8_detail;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const unsigned gmask = 0xFFu << (lane & 24);
  float amax = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
#pragma unroll
  for (int m = 4; m > 0; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(gmask, amax, m));
  float d, id;
  act_q8_scales(amax, d, id);
  const int q0 = round_half_even(o.x * id), q1 = round_half_even(o.y * id), q2 = round_half_even(o.z * id),
            q3 = round_half_even(o.w * id);
  *reinterpret_cast<uint32_t*>(xq_row + i) = (static_cast<uint32_t>(q0) & 0xFFu) |
                                             ((static_cast<uint32_t>(q1) & 0xFFu) << 8) |
                                             ((static_cast<uint32_t>(q2) & 0xFFu) << 16) |
                                             ((static_cast<uint32_t>(q3) & 0xFFu) << 24);
  int sq = q0 + q1 + q2 + q3;
#pragma unroll
  for (int m = 2; m > 0; m >>= 1) sq += __shfl_xor_sync(gmask, sq, m);  // sums of the 16-element halves
  const int s_hi = __shfl_down_sync(gmask, sq, 4);
  if ((lane & 7) == 0) {
    ActQ8Scale sc;
    sc.d = d;
    sc.s_lo = static_cast<int16_t>(sq);
    sc.s_hi = static_cast<int16_t>(s_hi);
    reinterpret_cast<ActQ8Scale*>(xq_row + k)[i / 32] = sc;
  }
}

}  // namespace ft::cuda
