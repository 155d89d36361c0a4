// Causal depthwise conv1d + SiLU with a rolling state on the GPU: the CUDA twin of
// engine::conv1d_causal_silu (engine/conv1d.h), the input mixing of a Gated DeltaNet layer.
//
//   win = [state[c] (K-1 previous inputs, oldest first), x[0..n_tok)[c]]
//   y[t][c] = silu( sum_{j<K} w[c][j] * win[t + j] )   (rounded products added in j order)
//   state[c] = the last K-1 entries of win
//
// One thread per channel walks the tokens in order (a decode step or a whole micro-batch).
// d_pos (device, may be nullptr): when *d_pos == 0 the call starts a new sequence and the
// old state is read as zeros -- the reset happens inside captured graphs without a host
// branch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

// Largest kernel width (engine::kMaxConvKernel).
inline constexpr int64_t kConvMaxKernel = 32;

// x: n_tok rows of n_ch inputs (ldx apart); w: [n_ch][k] fp32; state: [n_ch][k-1] fp32,
// updated; y: n_tok rows (ldy apart), fp32.
void conv1d_causal_silu(const float* x, int64_t ldx, int64_t n_tok, int64_t n_ch, const float* w, int64_t k,
                        float* state, float* y, int64_t ldy, const int32_t* d_pos, cudaStream_t s);

}  // namespace ft::cuda
