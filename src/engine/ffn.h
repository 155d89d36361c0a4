// Dense gated FFN (README §C.6): y = W_down · (silu(W_gate·x) ⊙ (W_up·x)), each projection
// scaled by its NVFP4 `.scale`. gate|up run as one fused Linear, output rows [0, n_ff) the
// gate and [n_ff, 2 n_ff) the up projection.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/exec.h"
#include "engine/linear.h"
#include "engine/vec_math.h"

namespace ft::engine {

// silu(x) = x / (1 + e^-x), rounded as llama.cpp's CPU backend rounds it: engine/vec_math.h.

// h[t][i] = round(silu(gu[t][i]) * gu[t][n_ff + i]) for n_tok rows.
void swiglu(const Exec& ex, const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h,
            int64_t ldh);

struct FfnScratch {
  float* gate_up = nullptr;  // [n_tok][2 n_ff]
  float* h = nullptr;        // [n_tok][n_ff]
};

// out[t] = ffn(x[t]) for n_tok rows (out rows n_embd, ldo apart).
void ffn_swiglu(const Exec& ex, const Linear& gate_up, const Linear& down, const float* x,
                int64_t ldx, int64_t n_tok, float* out, int64_t ldo, const FfnScratch& s);

}  // namespace ft::engine
