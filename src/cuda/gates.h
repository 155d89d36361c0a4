// Elementwise gates of the qwen35 blocks (shared/spec/arch/qwen35.md §3.1, §3.2 d,
// qwen35moe.md §3): the CUDA twins of the loops in model/qwen35_blocks.cpp and
// engine/deltanet.cpp. sigmoid(x) = 1 / (1 + exp(-x)) with exp as std::exp (ops::exp_f32);
// silu as engine::silu (ops::silu). Results are rounded to the activation dtype.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// The gated attention's q projection rows [q_0 g_0 q_1 g_1 ... | k | v] (n_head heads of hd,
// then kv_cols columns) split into qkv rows [q_0 q_1 ... | k | v] (ldq) and gate rows
// [g_0 g_1 ...] (ldg). raw must not alias qkv or gate.
void split_q_gate(const float* raw, int64_t ldr, int64_t n_tok, int64_t n_head, int64_t hd, int64_t kv_cols,
                  float* qkv, int64_t ldq, float* gate, int64_t ldg, cudaStream_t s);

enum class GateAct : int { kSigmoid = 0, kSilu = 1 };

// o[t][c] = round(o[t][c] * act(g[t][c])), c < cols.
void gate_mul(float* o, int64_t ldo, const float* g, int64_t ldg, int64_t n_tok, int64_t cols, GateAct act,
              Round r, cudaStream_t s);

// y[t][c] = round(x[t][c] * sigmoid(logit[t])): the shared expert scaled by its gate.
void scale_by_sigmoid(const float* x, int64_t ldx, const float* logit, int64_t n_tok, int64_t cols, float* y,
                      int64_t ldy, Round r, cudaStream_t s);

}  // namespace ft::cuda
