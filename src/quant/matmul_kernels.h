// Internals shared by the matmul kernel families: the per-ISA entry points and the
// epilogue (scale, then rounding) every family applies identically.
#pragma once

#include <cstdint>

#include "core/fp16.h"
#include "quant/matmul.h"

namespace ft::quant::detail {

// Every type with a reference decoder; fast decoders for the common types, the
// reference decoder into an L1/L2 buffer for the rest.
void matmul_avx2(const MatmulArgs& a, int64_t r0, int64_t r1);
void matmul_avx512(const MatmulArgs& a, int64_t r0, int64_t r1);

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
