// Scalar reference dequantisation: the obviously-correct twin of every fast path.
// Bit-exact with ggml's dequantize_row_* (shared/spec/gguf-format.md §3-4).
#pragma once

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::quant {

// True when dequantize_row_ref supports `t`.
bool has_ref_dequant(GgmlType t);

// Decodes n elements (a multiple of t's block size) starting at `src` into dst.
void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n);

// Scalar decoders shared by the kernels.
float ue4m3_half(uint8_t x);       // NVFP4 sub-block scale x 0.5 (ggml_ue4m3_to_fp32)
float e8m0_half(uint8_t e);        // MXFP4 block scale x 0.5 (ggml_e8m0_to_fp32_half)
extern const int8_t kE2M1Doubled[16];  // {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12}
// ue4m3_half(x) for x = 0..255, for kernels that look scales up instead of decoding.
const float* ue4m3_half_table();

}  // namespace ft::quant
