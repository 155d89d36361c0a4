// Causal depthwise 1-D convolution with a rolling state, then SiLU: the input mixing of a
// Gated DeltaNet layer (shared/spec/arch/qwen35.md §3.2 b). Per channel c, over the window
// [state[c] (the K-1 previous inputs, oldest first), x[0..n_tok) of this call]:
//
//   y[t][c] = silu( sum_{j<K} w[c][j] * win[t + j] )     (j = K-1 multiplies the newest input)
//
// and the state keeps the last K-1 inputs, so a prompt split into any batches (or decoded
// one token at a time) gives the same y. The sum is fp32 in j order, as ggml's ssm_conv.
#pragma once

#include <cstdint>

#include "engine/exec.h"

namespace ft::engine {

// Largest kernel width this block handles (Qwen3.5 uses 4; ggml's CUDA kernel stops at 15).
inline constexpr int64_t kMaxConvKernel = 32;

// x: n_tok rows of n_ch inputs (ldx apart); w: [n_ch][k] fp32; state: [n_ch][k-1] fp32,
// updated; y: n_tok rows of n_ch outputs (ldy apart), fp32. Channels split over threads.
void conv1d_causal_silu(const Exec& ex, const float* x, int64_t ldx, int64_t n_tok, int64_t n_ch,
                        const float* w, int64_t k, float* state, float* y, int64_t ldy);

}  // namespace ft::engine
