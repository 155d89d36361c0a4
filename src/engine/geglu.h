// GELU (tanh approximation) and GeGLU as ggml-cpu computes them (gemma4's FFNs and
// per-layer-input gate):
//
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
//
// ggml-cpu evaluates it through a 65536-entry fp16 table: for -10 < x < 10 the input is
// rounded to fp16 and the fp16-rounded gelu of that value is returned; x <= -10 gives 0 and
// x >= 10 gives x. We do the same, so llama.cpp's F32 twin and our fp32 run agree to the bit
// here (the exact tanh differs from the table by up to ~1e-3 relative).
//
//   geglu: h[i] = gelu(g[i]) * u[i]     (gate rows [0, n_ff), up rows [n_ff, 2 n_ff))
#pragma once

#include <cstdint>

#include "engine/exec.h"

namespace ft::engine {

// The activation of a gated FFN: silu (SwiGLU, llama/qwen) or tanh-GELU (GeGLU, gemma).
enum class Glu { kSilu, kGelu };

// tanh-GELU in fp32, the scalar formula (the table's entries).
float gelu_tanh_f32(float x);
// gelu(x) through ggml-cpu's fp16 table semantics (see above).
float gelu(float x);

// h[t][i] = round(gelu(gu[t][i]) * gu[t][n_ff + i]) for n_tok rows.
void geglu(const Exec& ex, const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h,
           int64_t ldh);

// x[t][i] = round(gelu(x[t][i]) * m[t][i]) in place for n_tok rows of n (the gemma4
// per-layer input gate: gelu of the gate projection times the layer's input slice).
void gelu_mul(const Exec& ex, float* x, int64_t ldx, const float* m, int64_t ldm, int64_t n,
              int64_t n_tok);

}  // namespace ft::engine
