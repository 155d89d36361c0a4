// Integer decoders of the q8 GEMV path (gemv_q8.cu), host- and device-callable so that a
// CPU test (tests/cuda/gemv_formats_test.cpp) checks them against quant::dequantize_row_ref.
//
// Every weight type becomes int8 codes that dp4a multiplies with the int8 activations
// (cuda/act_q8.h); block scales stay fp32:
//   NVFP4/MXFP4: 2*E2M1(code) in {-12..12} (doubling makes the values integers; the
//                "half" scales ue4m3_half / e8m0_half undo it exactly), through byte_perm
//                table lookups: 3 permutes per 4 codes;
//   Q8_0: the codes themselves; Q4_K: nibbles (0..15) with the minimum term applied per
//   sub-block from the activation block sums; Q6_K: 6-bit codes 0..63 with the -32 offset
//   applied per 16 elements from the activation half-block sums.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/gemv_formats.cuh"

namespace ft::cuda::q8_detail {

using gemv_detail::half_bits_to_float;
using gemv_detail::e8m0_half;

// __byte_perm(x, y, s): byte n of the result is byte (s >> 4n) & 7 of y:x.
FT_HD inline uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
#endif
}

// Sum of the 4 signed byte products of a and b, plus c.
FT_HD inline int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int n = 0; n < 4; ++n)
    c += static_cast<int>(static_cast<int8_t>(a >> (8 * n))) * static_cast<int>(static_cast<int8_t>(b >> (8 * n)));
  return c;
#endif
}

// Low 32 bits of (hi:lo) >> (sh & 31).
FT_HD inline uint32_t funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
#ifdef __CUDA_ARCH__
  return __funnelshift_r(lo, hi, sh);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (sh & 31));
#endif
}

// 2*E2M1 of the 8 nibbles of w: lo = codes of nibbles 0..3 (bits 0..15), hi = nibbles 4..7,
// one int8 each, in nibble order (byte 0 low nibble, byte 0 high nibble, byte 1 low, ...).
// Tables: bytes 0..7 of kPos are 2*E2M1 of codes 0..7, of kNeg of codes 8..15; each code's
// sign bit (nibble bit 3) picks kPos or kNeg in the third permute.
inline constexpr uint32_t kPos0 = 0x03020100u, kPos1 = 0x0C080604u;
inline constexpr uint32_t kNeg0 = 0xFDFEFF00u, kNeg1 = 0xF4F8FAFCu;
FT_HD inline void e2m1x8_i8(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t pick = ((w >> 1) & 0x44444444u) | 0x32103210u;
  lo = byte_perm(byte_perm(kPos0, kPos1, w), byte_perm(kNeg0, kNeg1, w), pick);
  const uint32_t w2 = w >> 16, pick2 = pick >> 16;
  hi = byte_perm(byte_perm(kPos0, kPos1, w2), byte_perm(kNeg0, kNeg1, w2), pick2);
}

// PTX prmt.b32 in its default mode: byte n of the result is byte (s >> 4n) & 7 of b:a, or,
// when bit 3 of that selector nibble is set, that byte's sign bit replicated (0x00 / 0xFF).
// Only the low 16 bits of s are read. CUDA's __byte_perm masks bit 3 (an extra LOP per call
// in the SASS), hence the inline PTX.
FT_HD inline uint32_t prmt_sign(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#else
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t sel = (s >> (4 * n)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(v >> (8 * (sel & 7))) & 0xFFu;
    if (sel & 8) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * n);
  }
  return r;
#endif
}

// 2*E2M1 of the 8 nibbles of w split by sign, 4 permutes and no masking: with the magnitude
// table {0,1,2,3,4,6,8,12} in two registers (every byte's msb clear), prmt_sign(table, w)
// yields the magnitude of each non-negative code and 0 for each negative one (bit 3 set:
// the sign of a table byte, 0); w ^ 0x8888... swaps the two roles. Then
//   e2m1x8_i8(w) = p - n bytewise, so dot = dp4a(p, x) - dp4a(n, x)  (exact integers).
// p_lo / n_lo: nibbles 0..3 (bits 0..15), p_hi / n_hi: nibbles 4..7, in e2m1x8_i8's order.
inline constexpr uint32_t kMag0 = 0x03020100u, kMag1 = 0x0C080604u;
// The table as two words the kernels pass in (e2m1_table(), made once per kernel). Meant to
// keep kMag0 in a register: as a literal, the SASS re-creates it from a uniform register
// before every PRMT (IMAD.U32 R, RZ, RZ, UR4: 86 per step of the R 4 slab kernel, H200 run
// 8). Run 9's SASS shows that e2m1_table() does NOT achieve it: ptxas folds the mov (kMag1
// becomes the PRMT immediate, kMag0 is still re-created, 84 per step). Holding it needs a
// value ptxas cannot re-create: a load from memory -- the mma kernels' table in shared memory
// (gemv_mma.cuh), the lean kernels' from global memory (gemv_nvfp4_lean.cu; H200 session 21:
// 313 K of these copies in the slab kernel's expert pair launch, 25 K in the lean one, whose
// uniform load ptxas still copies in places; bench/sass_mix.py).
struct E2m1Table {
  uint32_t t0, t1;
};
FT_HD inline void e2m1x8_pn(uint32_t w, const E2m1Table& t, uint32_t& p_lo, uint32_t& p_hi, uint32_t& n_lo,
                            uint32_t& n_hi) {
  const uint32_t wn = w ^ 0x88888888u;
  p_lo = prmt_sign(t.t0, t.t1, w);
  p_hi = prmt_sign(t.t0, t.t1, w >> 16);
  n_lo = prmt_sign(t.t0, t.t1, wn);
  n_hi = prmt_sign(t.t0, t.t1, wn >> 16);
}
FT_HD inline void e2m1x8_pn(uint32_t w, uint32_t& p_lo, uint32_t& p_hi, uint32_t& n_lo, uint32_t& n_hi) {
  e2m1x8_pn(w, E2m1Table{kMag0, kMag1}, p_lo, p_hi, n_lo, n_hi);
}
// kMag0 / kMag1 through asm volatile moves: opaque to NVVM, but not to ptxas (see above).
FT_HD inline E2m1Table e2m1_table() {
#ifdef __CUDA_ARCH__
  E2m1Table t;
  asm volatile("mov.b32 %0, %1;" : "=r"(t.t0) : "r"(kMag0));
  asm volatile("mov.b32 %0, %1;" : "=r"(t.t1) : "r"(kMag1));
  return t;
#else
  return {kMag0, kMag1};
#endif
}

// Activation bytes reordered to meet e2m1x8_i8's nibble order: a = 4 bytes from the low
// half of the block, b = the 4 bytes `half` elements later (NVFP4 sub-blocks: 8 later,
// MXFP4 blocks: 16). lo pairs with x_lohi_0(a, b), hi with x_lohi_1(a, b).
FT_HD inline uint32_t x_pair_0(uint32_t a, uint32_t b) { return byte_perm(a, b, 0x5140u); }
FT_HD inline uint32_t x_pair_1(uint32_t a, uint32_t b) { return byte_perm(a, b, 0x7362u); }

// The 4 UE4M3 sub-block scales of an NVFP4 block (word s, byte i = sub-block i) as their
// full values 2 * ue4m3_half(byte), the NVFP4 integer path's one scale decoder (gemv_nvfp4,
// gemv_q8); callers multiply by 0.5 * x.d, so the product is ue4m3_half * x.d exactly.
// Like ue4m3_half the sign bit is ignored except that 0x7F (NaN) decodes to 0 and 0xFF to
// 480. sm_89+: cvt.rn.f16x2.e4m3x2 decodes two bytes per instruction (UE4M3 = E4M3 with the
// sign clear; exact in fp16); older GPUs and the host: (b & 0x7F) << 7 read as fp16 is
// ue4m3(b) * 2^-8, subnormals included.
FT_HD inline void nvfp4_scales_raw(uint32_t s, float (&sw)[4]) {
  const uint32_t m = s & 0x7F7F7F7Fu;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h01, h23;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      " cvt.rn.f16x2.e4m3x2 %1, hi;\n}"
      : "=r"(h01), "=r"(h23)
      : "r"(m));
  sw[0] = half_bits_to_float(static_cast<unsigned short>(h01 & 0xFFFFu));
  sw[1] = half_bits_to_float(static_cast<unsigned short>(h01 >> 16));
  sw[2] = half_bits_to_float(static_cast<unsigned short>(h23 & 0xFFFFu));
  sw[3] = half_bits_to_float(static_cast<unsigned short>(h23 >> 16));
#else
  for (int i = 0; i < 4; ++i)
    sw[i] = half_bits_to_float(static_cast<unsigned short>(((m >> (8 * i)) & 0x7Fu) << 7)) * 256.0f;
#endif
}
// Nonzero when a byte of the scale word is 0x7F or 0xFF (the NaN codes nvfp4_scales_raw
// leaves wrong); kernels OR it over a block's rows and fix up rarely, once.
FT_HD inline uint32_t nvfp4_scales_nan(uint32_t s) {
  const uint32_t v = (s & 0x7F7F7F7Fu) ^ 0x7F7F7F7Fu;  // a masked 0x7F byte becomes 0
  return (v - 0x01010101u) & ~v & 0x80808080u;
}
FT_HD inline void nvfp4_scales_fix(uint32_t s, float (&sw)[4]) {
  for (int i = 0; i < 4; ++i) {
    const uint32_t b = (s >> (8 * i)) & 0xFFu;
    if (b == 0x7Fu) sw[i] = 0.0f;
    if (b == 0xFFu) sw[i] = 480.0f;
  }
}
// Two UE4M3 scales (bytes 0 and 1 of s; the upper bytes are ignored) as nvfp4_scales
// decodes them, NaN codes included: one cvt.rn.f16x2.e4m3x2 on sm_89+ (the mma GEMV,
// gemv_mma.cu, needs two sub-blocks' scales per lane and group, not four).
// CHK false: without the NaN codes' fix-up -- exact only where no byte is 0x7F or 0xFF, which the
// caller knows (Params::scales_clean: the weights were scanned at upload, nvfp4_scan.h). The
// fix-up's test and branch cost ~6 instructions and a BSSY / BSYNC pair a word, 4 words a 4096-weight
// step of the tensor-core GEMV: H100 session 44 call 2, Llama-8B tg128 alternating (a probe without
// it): 470.35 against 463.56 tok/s (+1.5%, every one of 6 rounds).
template <bool CHK = true>
FT_HD inline void nvfp4_scales2(uint32_t s, float& a, float& b) {
  const uint32_t m = s & 0x7F7Fu;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h;
  asm("{\n .reg .b16 lo;\n cvt.u16.u32 lo, %1;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(h) : "r"(m));
  a = half_bits_to_float(static_cast<unsigned short>(h & 0xFFFFu));
  b = half_bits_to_float(static_cast<unsigned short>(h >> 16));
#else
  a = half_bits_to_float(static_cast<unsigned short>((m & 0x7Fu) << 7)) * 256.0f;
  b = half_bits_to_float(static_cast<unsigned short>(((m >> 8) & 0x7Fu) << 7)) * 256.0f;
#endif
  if constexpr (CHK) {
    if (nvfp4_scales_nan(s & 0xFFFFu)) {  // a byte 0x7F / 0xFF: rare
      const uint32_t b0 = s & 0xFFu, b1 = (s >> 8) & 0xFFu;
      if (b0 == 0x7Fu) a = 0.0f;
      if (b0 == 0xFFu) a = 480.0f;
      if (b1 == 0x7Fu) b = 0.0f;
      if (b1 == 0xFFu) b = 480.0f;
    }
  }
}

FT_HD inline void nvfp4_scales(uint32_t s, float (&sw)[4]) {
  nvfp4_scales_raw(s, sw);
  if (nvfp4_scales_nan(s)) nvfp4_scales_fix(s, sw);
}

// Q4_K 6-bit scale and minimum of sub-block j (0..7) from the 12 scale bytes.
FT_HD inline void q4k_scale_min(const uint8_t* sc, int j, int& s, int& m) {
  if (j < 4) {
    s = sc[j] & 63, m = sc[j + 4] & 63;
  } else {
    s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

// Q6_K codes 0..63 of 4 elements: low nibbles (shift 0) or high (4) of ql, bits 2qq..2qq+1
// of qh.
FT_HD inline uint32_t q6k_codes(uint32_t ql, int lshift, uint32_t qh, int hshift) {
  return ((ql >> lshift) & 0x0F0F0F0Fu) | (((qh >> hshift) & 0x03030303u) << 4);
}

// ---- activation block quantiser (act_q8.h), shared by the kernel and the host twin ------

FT_HD inline int round_half_even(float v) {
#ifdef __CUDA_ARCH__
  return __float2int_rn(v);
#else
  return static_cast<int>(__builtin_nearbyintf(v));
#endif
}

// d and the inverse scale of a block with maximum magnitude amax.
FT_HD inline void act_q8_scales(float amax, float& d, float& id) {
  const float raw = amax / 127.0f;
  d = __half2float(__float2half_rn(raw));
  id = amax != 0.0f ? 127.0f / amax : 0.0f;
}

}  // namespace ft::cuda::q8_detail
