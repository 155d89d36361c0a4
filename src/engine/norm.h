// RMSNorm (README §C.3): y[i] = x[i] * 1/sqrt(mean(x^2) + eps) * w[i].
// The sum of squares is accumulated in double and the scale computed in fp32, as ggml-cpu
// does; the output is rounded to the activation dtype.
#pragma once

#include <cstdint>

#include "engine/exec.h"

namespace ft::engine {

// One row of n elements; w may be nullptr (norm without weight). y may alias x.
void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* y, ActType act);

// n_rows rows of n elements, x rows ldx apart, y rows ldy apart; rows split over threads.
void rmsnorm(const Exec& ex, const float* x, int64_t ldx, const float* w, int64_t n, float eps,
             int64_t n_rows, float* y, int64_t ldy);

// Per-head norm in place: n_tok rows (ld apart) of n_head heads of `hd` elements, sharing w {hd}.
void rmsnorm_heads(const Exec& ex, float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t hd,
                   const float* w, float eps);

}  // namespace ft::engine
