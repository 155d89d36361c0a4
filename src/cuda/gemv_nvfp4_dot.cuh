// The NVFP4 block dot product of the integer GEMV path, shared by the slab and packed kernels
// (gemv_nvfp4.cu): one staged 36-byte block of R
// rows times the act_q8 activations of up to NT tokens, the math of gemv_q8_ref's dot_nvfp4.
// CUDA translation units only.
#pragma once

#include <cstdint>

#include "cuda/gemv_kernel.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"

namespace ft::cuda::gemv_detail {

// The slab / packed / lean kernels' shapes (gemv_nvfp4.cu, gemv_nvfp4_lean.cu): a 36-byte NVFP4
// block, a slab of 32 blocks a row (one a lane), a packed item staged as up to
// kNvfp4PackBlocksPerLane blocks a lane plus a partial sum each.
inline constexpr int kBlockBytes = 36;
inline constexpr int kSlabBlocks = 32;
inline constexpr int kSlabBytes = kSlabBlocks * kBlockBytes;  // 1152 = 72 x 16
inline constexpr int kPackStage = 32 * kNvfp4PackBlocksPerLane * kBlockBytes;         // staged bytes a packed item
inline constexpr int kPackWarpBytes = kPackStage + 32 * kNvfp4PackBlocksPerLane * 4;  // + per-block partial sums

// Activation rows in shared memory: row t at t * xs_row holds the codes with 16-byte chunk
// q = 4c + s (block c, sub-block s) at chunk 4c + (s ^ ((c >> 1) & 3)), then the scales as in
// act_q8. Lanes read chunk 4c + s for consecutive c: each group of 8 lanes (one LDS.128
// phase) then covers the 8 bank groups once.
FT_HD inline int xs_chunk(int c, int s) { return 4 * c + (s ^ ((c >> 1) & 3)); }

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int VB>
struct VecOf;
template <>
struct VecOf<16> {
  using T = uint4;
};
template <>
struct VecOf<4> {
  using T = uint32_t;
};

// Weights are read once: no L1 allocation, so the activations stay there.
template <int VB>
__device__ __forceinline__ typename VecOf<VB>::T ld_w(const uint8_t* p) {
  if constexpr (VB == 16) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  } else {
    uint32_t v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
  }
}

// Copies activation rows [0, xs_rows) of p.xq into xs (swizzled: xs_chunk) (all threads of the CTA; ends in
// __syncthreads).
__device__ __forceinline__ void stage_x(uint8_t* xs, const Params& p, int xs_rows, int xs_row) {
  const int per_row = xs_row / 16, k16 = static_cast<int>(p.k / 16);
  const int n = xs_rows * per_row;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    const int t = i / per_row, j = i - t * per_row;
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p.xq + t * p.xq_row) + j);
    const int d = j < k16 ? xs_chunk(j >> 2, j & 3) : j;
    *reinterpret_cast<uint4*>(xs + t * xs_row + 16 * d) = v;
  }
  __syncthreads();
}
// acc[r][t] += block c of R staged rows (row r's block at sb + r * rstride, 4-aligned) times
// the activations of token t (row x0 + t * xq_row: act_q8 layout in global memory, or the
// swizzled shared copy when XS), t < n_tok.
//
// PN (the default): weights decoded by e2m1x8_pn into positive and negative magnitudes,
// 4 permutes + 3 shifts/xors per 8 weights and 2 dp4a per 4 (the byte_perm decoder needed
// 3 permutes, each with a masked selector, plus 3 ALU ops per 4 weights, and the slab kernel
// measured 5.0 lane instructions per weight, ncu, benches/h200.md). !PN: that decoder, kept
// for the benchmark's comparison. Both give the same integer sums, so the same floats.
// c: the block's column (32-bit: cheaper activation addressing than 64-bit).
// tab: e2m1_table(), made once per kernel. The UE4M3 NaN codes are tested once per block
// over all R rows (one branch, almost never taken) rather than per row.
// block_dot_wx: the same sums with the block's 9 words supplied by word(r, i) (word 0 the
// scales, words 1 + 2s and 2 + 2s sub-block s's codes) and token t's activations by xd(t) (the
// 16-byte {d, sums} x 2 of blocks 2c, 2c + 1) and xc(t, s) (sub-block s's 16 code bytes):
// block_dot_words reads the activations from global or shared memory, block_dot the words from a
// stage, the lean kernels (gemv_nvfp4_lean.cu) may hold the activations in registers; one body,
// so one arithmetic.
template <int NT, int R, bool PN, class Word, class XD, class XC>
__device__ __forceinline__ void block_dot_wx(float (&acc)[R][NT], const Word& word, const XD& xd, const XC& xc,
                                             int n_tok, const q8_detail::E2m1Table& tab) {
  using namespace q8_detail;
  float sw[R][4];
  uint32_t sword[R], nan = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    sword[r] = word(r, 0);
    nvfp4_scales_raw(sword[r], sw[r]);
    nan |= nvfp4_scales_nan(sword[r]);
  }
  if (nan != 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) nvfp4_scales_fix(sword[r], sw[r]);
  }
  // Activation scales of blocks 2c and 2c + 1: one 16-byte load ({d, sums} x 2), times the
  // 0.5 that turns nvfp4_scales' full ue4m3 into ue4m3_half.
  float dx[NT][2];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    dx[t][0] = dx[t][1] = 0.0f;
    if (NT == 1 || t < n_tok) {  // one token: no branch (n_tok is 1)
      const uint4 d = xd(t);
      dx[t][0] = __uint_as_float(d.x) * 0.5f;
      dx[t][1] = __uint_as_float(d.z) * 0.5f;
    }
  }
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    // Sub-block s: bytes 4 + 8s .. 4 + 8s + 7; low nibble of byte j = element 16s + j,
    // high = 16s + j + 8. The decoders yield them interleaved, x_pair_* matches the order.
    uint32_t wp[R][4], wn[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t q0 = word(r, 1 + 2 * s), q1 = word(r, 2 + 2 * s);
      if constexpr (PN) {
        e2m1x8_pn(q0, tab, wp[r][0], wp[r][1], wn[r][0], wn[r][1]);
        e2m1x8_pn(q1, tab, wp[r][2], wp[r][3], wn[r][2], wn[r][3]);
      } else {
        e2m1x8_i8(q0, wp[r][0], wp[r][1]);
        e2m1x8_i8(q1, wp[r][2], wp[r][3]);
      }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (NT > 1 && t >= n_tok) break;
      const uint4 v = xc(t, s);
      const uint32_t a0 = x_pair_0(v.x, v.z), a1 = x_pair_1(v.x, v.z);
      const uint32_t a2 = x_pair_0(v.y, v.w), a3 = x_pair_1(v.y, v.w);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        int is = dp4a(wp[r][0], a0, 0);
        is = dp4a(wp[r][1], a1, is);
        is = dp4a(wp[r][2], a2, is);
        is = dp4a(wp[r][3], a3, is);
        if constexpr (PN) {
          int in = dp4a(wn[r][0], a0, 0);
          in = dp4a(wn[r][1], a1, in);
          in = dp4a(wn[r][2], a2, in);
          in = dp4a(wn[r][3], a3, in);
          is -= in;
        }
        acc[r][t] = fmaf(static_cast<float>(is), sw[r][s] * dx[t][s >> 1], acc[r][t]);
      }
    }
  }
}

// block_dot_wx with token t's activations at x0 + t * xq_row: act_q8 layout in global memory, or
// the swizzled shared copy when XS.
template <int NT, int R, bool XS, bool PN, class Word>
__device__ __forceinline__ void block_dot_words(float (&acc)[R][NT], const Word& word, const uint8_t* x0,
                                                int64_t xq_row, int64_t k, int c, int n_tok,
                                                const q8_detail::E2m1Table& tab) {
  block_dot_wx<NT, R, PN>(
      acc, word,
      [&](int t) {
        const uint4* dp = reinterpret_cast<const uint4*>(x0 + t * xq_row + k) + c;
        return XS ? *dp : __ldg(dp);
      },
      [&](int t, int s) {
        return XS ? *reinterpret_cast<const uint4*>(x0 + t * xq_row + 16 * xs_chunk(c, s))
                  : __ldg(reinterpret_cast<const uint4*>(x0 + t * xq_row + 64 * c + 16 * s));
      },
      n_tok, tab);
}

template <int NT, int R, bool XS, bool PN = true>
__device__ __forceinline__ void block_dot(float (&acc)[R][NT], const uint8_t* sb, int rstride, const uint8_t* x0,
                                          int64_t xq_row, int64_t k, int c, int n_tok,
                                          const q8_detail::E2m1Table& tab) {
  block_dot_words<NT, R, XS, PN>(
      acc, [&](int r, int i) { return lds32(sb + r * rstride + 4 * i); }, x0, xq_row, k, c, n_tok, tab);
}

// The scale of a slot: scale times the expert's bank entry (gemv.h).
__device__ __forceinline__ float slot_scale(const Params& p, int64_t slot, int col_add = 0) {
  float s = p.scale;
  if (p.ids != nullptr && p.bank != nullptr) s *= p.bank[static_cast<int64_t>(p.ids[slot]) * 4 + p.bank_col + col_add];
  return s;
}

}  // namespace ft::cuda::gemv_detail
