// Host twin of the integer GEMV path (gemv.h with xq): plain scalar code with the kernel's
// block math -- integer sums of weight codes times activation codes per scale block, block
// scales applied in fp32 in the same association -- so the GPU result may differ from it only
// by fp32 summation order. Activations come from quantize_act_q8_row_ref (act_q8.h).
#pragma once

#include <cstdint>

#include "cuda/round.h"
#include "format/ggml_type.h"

namespace ft::cuda {

// sum_k W[k] * X[k] of one weight row (k elements of `type`, one of gemv_q8_supported) and
// one activation row in the act_q8 layout.
float gemv_q8_dot_ref(GgmlType type, const uint8_t* wrow, int64_t k, const void* xq_row);

// Dense twin of gemv(): Y[t][r] = round(dot * s_r) for rows r < rows and tokens t < n_tok,
// activation rows act_q8_row_bytes(k) apart from xq; accumulate adds to Y.
void gemv_q8_ref(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t k, int64_t rows, const void* xq,
                 int64_t n_tok, float* y, int64_t ldy, const float* row_scale, float scale, Round round,
                 bool accumulate = false);

// The activation value the integer path sees for element i of a quantised row: d * q.
float act_q8_value(const void* xq_row, int64_t k, int64_t i);

}  // namespace ft::cuda
