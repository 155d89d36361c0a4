// Row helpers of the GPU forward pass (MoE prefill gathers tokens into expert order and
// combines the experts' outputs back). Row indices are read on the device. All rows are
// fp32, `cols` wide, rows `ld*` floats apart; one block per output row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// y row i = x row idx[i] / idx_div, i < n (idx_div = n_used turns slot ids into token rows).
void gather_rows(const float* x, int64_t ldx, const int32_t* idx, int64_t idx_div, int64_t n, int64_t cols,
                 float* y, int64_t ldy, cudaStream_t s);

// y = a + b (fp32, no rounding: decoder.cpp's add_rows); y may alias a or b.
void add_rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, int64_t cols, float* y,
              int64_t ldy, cudaStream_t s);

// y = round(x); y may alias x.
void copy_rows(const float* x, int64_t ldx, int64_t n, int64_t cols, float* y, int64_t ldy, Round r,
               cudaStream_t s);

// MoE combine, the twin of the CPU experts' combine (engine/moe.cpp):
//   out[t] = round( (((y_0 * w_0) + y_1 * w_1) + ...) ),  y_k = yd row slot_of[t*n_used + k]
// with w_k = weights[t*n_used + k], products rounded before each add, in rank order.
// slot_of == nullptr: slot t*n_used + k is row t*n_used + k of yd (decode, no regrouping).
void moe_combine(const float* yd, int64_t ldyd, const int32_t* slot_of, const float* weights, int n_used,
                 int64_t n_tok, int64_t cols, float* out, int64_t ldo, Round r, cudaStream_t s);

}  // namespace ft::cuda
