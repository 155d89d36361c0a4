// Weight decoding shared by the GEMM kernels (dequant.cu, gemm_fused.cu): 8 consecutive
// weights of a row as fp32 values, host- and device-callable so that a GPU-less test
// (tests/cuda/gemm_decode_test.cpp) diffs it against quant::dequantize_row_ref.
//
// Built on the block decoders of gemv_formats.cuh (owned by the GEMV): a "unit" is 32
// consecutive elements, a "piece" 8 of them; piece() gives raw q with w = d*q - m.
#pragma once

#include <cstdint>

#include "cuda/gemv_formats.cuh"
#include "format/ggml_type.h"

namespace ft::cuda::gemm_detail {

using namespace gemv_detail;

// Elements [8*pc, 8*pc + 8) of the row that starts at `row` (pc = piece index in the row).
template <class F>
FT_HD inline void decode8(const uint8_t* row, int64_t pc, float* w) {
  float q[8], d, m;
  // piece() addresses units relative to c; pass the unit's block so u stays small.
  const int64_t u = pc >> 2;
  constexpr int kUnitsPerBlock = F::kBlockElems >= 32 ? F::kBlockElems / 32 : 1;
  const int64_t blk = u / kUnitsPerBlock;
  const uint8_t* c = F::kBlockElems >= 32 ? row + blk * F::kBlockBytes : row + u * 32 * F::kBlockBytes;
  const int uu = F::kBlockElems >= 32 ? static_cast<int>(u - blk * kUnitsPerBlock) : 0;
  F::piece(c, uu, static_cast<int>(pc & 3), q, d, m);
  if constexpr (F::kE2M1) {
    // q = E2M1 * 2^-126 and d = half the block scale: w = E2M1 * 2d = (q * 2^63) * (d * 2^64),
    // every factor a power-of-two rescale, so the product is the reference's exact value.
    const float dd = d * 18446744073709551616.0f;  // 2^64
FT_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = (q[i] * 9223372036854775808.0f) * dd;  // 2^63
  } else if constexpr (F::kHasMin) {
FT_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = d * q[i] - m;
  } else {
FT_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = d * q[i];
  }
}

// Calls f(F{}) with the format struct of t; returns false for types without a decoder.
template <class Fn>
inline bool with_format(GgmlType t, Fn&& f) {
  switch (t) {
    case GgmlType::F32: f(FmtF32{}); return true;
    case GgmlType::F16: f(FmtF16{}); return true;
    case GgmlType::BF16: f(FmtBF16{}); return true;
    case GgmlType::Q8_0: f(FmtQ8_0{}); return true;
    case GgmlType::Q4_K: f(FmtQ4_K{}); return true;
    case GgmlType::Q6_K: f(FmtQ6_K{}); return true;
    case GgmlType::MXFP4: f(FmtMXFP4{}); return true;
    case GgmlType::NVFP4: f(FmtNVFP4{}); return true;
    default: return false;
  }
}

}  // namespace ft::cuda::gemm_detail
