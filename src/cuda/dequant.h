// Device dequantisation of weight rows of any GEMM type (gemm_decode.cuh) to a dense
// fp32 / bf16 / f16 matrix: the first stage of the dense cuBLAS GEMM route (gemm.cu).
//
//   dst[i][e] = W[i][e] (rounded to `out`, round-to-nearest-even)   i < n_rows, e < k
//
// Row i of W starts at w + i*row_bytes; row i of dst at dst + i*ld elements. k must be a
// multiple of 32 and of the block size; w and row_bytes aligned to gemm_weight_align(type).
// Twin: quant::dequantize_row_ref (tests/cuda/gemm_test.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::cuda {

enum class DequantOut { kF32, kBF16, kF16 };

// tiled: NVFP4 in the tiled layout (nvfp4_tiled.h), w at the first row of a tile and n_rows whole
// tiles; lanes: its lane-major variant; dst rows as above.
void dequant_rows(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t k, int64_t n_rows, void* dst,
                  int64_t ld, DequantOut out, cudaStream_t s, bool tiled = false, bool lanes = false);

}  // namespace ft::cuda
