// Quantisation of a row segment to the integer GEMV's Q8 layout (act_q8.h) as the tail of the
// kernel that produced it (rmsnorm, swiglu): the same per-block arithmetic as
// quantize_act_q8's kernel, on the values the block has just written, so the bytes are
// identical and one launch per GEMV input disappears (3 of ~18 launches per MoE layer).
#pragma once

#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/gemv_q8_formats.cuh"

namespace ft::cuda {

// Blocks of 32 covering [c0, c1) of a row of k values (c0, c1 multiples of 32), y already
// written by this CTA and visible (call after __syncthreads()); xq_row: the token's Q8 row.
__device__ __forceinline__ void q8_quantize_segment(const float* y, int64_t c0, int64_t c1, int64_t k,
                                                    uint8_t* xq_row) {
  using namespace q8_detail;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5, n_warps = static_cast<int>(blockDim.x) >> 5;
  for (int64_t j = c0 / 32 + warp; j < c1 / 32; j += n_warps) {
    const float v = y[32 * j + lane];
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
      sc.d = d;
      sc.s_lo = static_cast<int16_t>(s);
      sc.s_hi = static_cast<int16_t>(s_hi);
      reinterpret_cast<ActQ8Scale*>(xq_row + k)[j] = sc;
    }
  }
}

}  // namespace ft::cuda
