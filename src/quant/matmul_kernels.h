// Internals shared by the matmul kernel families: the per-ISA entry points and the
// epilogue (scale, then rounding) every family applies identically.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "quant/matmul.h"

namespace ft::quant::detail {

// Every type with a reference decoder; fast decoders for the common types, the
// reference decoder into an L1/L2 buffer for the rest.
void matmul_avx2(const MatmulArgs& a, int64_t r0, int64_t r1);
void matmul_avx512(const MatmulArgs& a, int64_t r0, int64_t r1);

// The q8 route's integer kernels (AVX2; AVX-512 CPUs run them too) for the types where
// matmul_q8_avx2_has(); a.act_quant is taken to be kQ8.
bool matmul_q8_avx2_has(GgmlType t);
void matmul_q8_avx2(const MatmulArgs& a, int64_t r0, int64_t r1);
// The q8 route for Q4_1 / Q5_1 (Q8_1 activations), scalar on every ISA (matmul_q8_1.cpp).
void matmul_q8_1(const MatmulArgs& a, int64_t r0, int64_t r1);
// The q8 route for F32/F16/BF16 weights where llama.cpp takes one dot product per row and
// token (ggml_takes_vec_dot): its vec_dot summation orders (matmul_vec_dot.cpp).
bool ggml_takes_vec_dot(const MatmulArgs& a);
void matmul_vec_dot(const MatmulArgs& a, int64_t r0, int64_t r1);

// Q4_K/Q5_K packed 6-bit scales and mins (12 bytes, gguf-format.md §3.4) unpacked with
// word operations: out[0..7] = scales, out[8..15] = mins. Bytes 0-3 hold sc[0..3] in bits
// 0-5 and the top bits of sc[4..7] in bits 6-7; bytes 4-7 likewise for the mins; bytes
// 8-11 hold the low nibbles of sc[4..7] (low) and m[4..7] (high).
inline void k4_unpack_scales(const uint8_t* s12, uint8_t out[16]) {
  uint32_t a, b, c;
  std::memcpy(&a, s12, 4);
  std::memcpy(&b, s12 + 4, 4);
  std::memcpy(&c, s12 + 8, 4);
  const uint32_t w[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4), b & 0x3f3f3f3fu,
                         ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4)};
  std::memcpy(out, w, 16);
}

// The scale meets the fp32 accumulator before any rounding (see matmul.h).
inline float matmul_finish(const MatmulArgs& a, int64_t r, float acc) {
  const float s = a.row_scale != nullptr ? a.row_scale[r] * a.scale : a.scale;
  const float v = acc * s;
  switch (a.round) {
    case Round::kNone:
      return v;
    case Round::kBF16:
      return bf16_to_f32(f32_to_bf16(v));
    case Round::kF16:
      return f16_to_f32(f32_to_f16(v));
  }
  return v;
}

}  // namespace ft::quant::detail
