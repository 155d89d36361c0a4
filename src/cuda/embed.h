// Embedding lookup on the GPU: the CUDA twin of model::embed (quant::dequantize_row_ref of
// the token's row), times the table's scale.
//
//   x[t][i] = dequant(table row tokens[t])[i] * scale      t < n_tok, i < n_embd   (fp32)
//
// scale is the NVFP4 `.scale` of token_embd (1 otherwise; multiplying by 1 is exact). The
// token ids are read on the device, so a decode step can be graph-captured with the sampled
// token fed back. An id outside [0, n_vocab) writes a zero row and sets *bad = 1 (a device
// int the host clears and checks when it syncs); bad may be nullptr.
//
// Types: F32, F16, BF16, Q8_0, Q4_K, Q6_K, MXFP4, NVFP4 (embed_supported). n_embd must be a
// multiple of 8 and of the block size; the table pointer and row_bytes must be aligned to
// the type's scalar fields (4 bytes for F32, 2 for F16/Q8_0/Q4_K/Q6_K). One block per token.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::cuda {

bool embed_supported(GgmlType t);

void embed(GgmlType type, const uint8_t* table, int64_t row_bytes, int64_t n_embd, int64_t n_vocab,
           float scale, const int32_t* tokens, int64_t n_tok, float* x, int64_t ldx, int* bad,
           cudaStream_t s);

}  // namespace ft::cuda
