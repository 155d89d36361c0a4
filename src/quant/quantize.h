// Reference (scalar, deterministic) quantisers: float rows -> ggml block bytes.
// Used by the test-model generator and tests; never on a hot path.
//
// Rules follow ggml's *_ref quantisers (ggml-quants.c) so that files look like
// llama-quantize output; they are written from the algorithms, not copied. Any
// consumer must compare against the *decoded* values (dequantize_row_ref), never
// against the float input, so small rounding-rule differences are harmless.
//
// NVFP4 follows shared/spec/nvfp4-scales.md §6 (ModelOpt recipe with a
// second-level scale s2):
//   block scale  = E4M3 code, round-to-nearest-even, of min(amax16 / (6*s2), 448)
//   element code = nearest E2M1 of x / (E4M3(code) * s2), **ties to even code**
//                  (ModelOpt's rule; ggml's own quantiser rounds ties toward the
//                  lower code index). Zero is code 0, never 8 (-0).
// With s2 == 1 this is a plain one-level NVFP4 quantiser (what token_embd gets,
// since llama.cpp has no token_embd.scale).
#pragma once

#include <cstdint>
#include <vector>

#include "format/ggml_type.h"

namespace ft::quant {

// True when quantize_row_ref supports `t` (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K,
// MXFP4, NVFP4).
bool has_ref_quant(GgmlType t);

// Quantises n elements (a multiple of t's block size, else ft::Error) into
// row_bytes(t, n) bytes at dst. `nvfp4_s2` is only used for NVFP4 (the
// second-level scale the caller stores as <name>.scale; 1.0f = none).
void quantize_row_ref(GgmlType t, const float* src, void* dst, int64_t n, float nvfp4_s2 = 1.0f);

// Convenience: a whole tensor of `rows` rows of `n` elements.
std::vector<uint8_t> quantize_rows_ref(GgmlType t, const float* src, int64_t rows, int64_t n,
                                       float nvfp4_s2 = 1.0f);

// ModelOpt per-tensor second-level scale: f32(amax / (6*448)); 1.0 when amax == 0.
float nvfp4_tensor_scale(const float* x, int64_t n);

// E4M3 helpers (positive codes only, 0x00..0x7E).
uint8_t e4m3_encode_rne(float v);  // v >= 0; clamps to 448; never returns 0x7F
float e4m3_value(uint8_t code);    // true E4M3 value (not halved)
// E2M1 code (sign in bit 3) nearest to v, ties to even code, |v| > 6 clips to 6.
uint8_t e2m1_encode_rne(float v);

}  // namespace ft::quant
