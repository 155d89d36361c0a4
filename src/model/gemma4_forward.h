// The gemma4 layer loop (shared/spec/arch/gemma4.md §3), built from the engine blocks:
//
//   x = token_embd[tok] * sqrt(n_embd)                    (fp32)
//   PL = per-layer inputs of x and tok                    (n_embd_per_layer > 0)
//   per layer: x += rmsnorm(Wo · attn(q, k, v); post_attention_norm)
//                   q, k: per-head norm + NEOX rope (sliding or global), v: unweighted norm,
//                   V = K without attn_v, sliding layers see their last n_swa keys,
//                   KV-shared layers read an earlier layer's cache
//              f = geglu_mlp(rmsnorm(x; ffn_norm))
//              MoE: f = rmsnorm(f; post_ffw_norm_1)
//                     + rmsnorm(experts(rmsnorm(x; pre_ffw_norm_2), router(x)); post_ffw_norm_2)
//              x += rmsnorm(f; post_ffw_norm)
//              x += rmsnorm(W_proj · (gelu(W_inp_gate · x) ⊙ PL[il]); post_norm)   (PLE)
//              x *= layer_output_scale
//   logits = cap · tanh(W_out · rmsnorm(x; output_norm) / cap)
#pragma once

#include <cstdint>

#include "engine/state.h"
#include "model/model.h"

namespace ft::model {

// st.s.per_layer[t] = per-layer inputs of the n_tok tokens (x holds the scaled embeddings).
void gemma4_per_layer_inputs(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok);

// x += the attention half of layer il (post-normed branch).
void gemma4_attention(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0);

// x += the FFN half of layer il (dense MLP, plus the experts in a MoE layer).
void gemma4_ffn(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// x += the per-layer-input branch of layer il; then x *= layer_output_scale.
void gemma4_layer_end(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// logits = cap * tanh(logits / cap) over `rows` rows of n_vocab (as ggml: scale, tanh, scale).
void softcap_logits(float* logits, int64_t n, float cap);

void gemma4_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok,
                    int64_t pos0, float* logits, bool all_logits);

}  // namespace ft::model
