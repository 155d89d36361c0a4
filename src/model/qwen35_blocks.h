// The layer blocks of qwen35 / qwen35moe (shared/spec/arch/qwen35.md §3, qwen35moe.md §3)
// and their forward pass:
//
//   x = token_embd[tokens]
//   per layer: x += gdn_block(rmsnorm(x))            (Gated DeltaNet layers)
//              or x += gated_attention(rmsnorm(x))   (every full_attention_interval-th layer)
//              x += ffn(rmsnorm(x; post_attention_norm))   dense, or routed + gated shared expert
//   logits = W_out · rmsnorm(x)
//
// The Gated DeltaNet state lives in State::dn beside the KV cache; only attention layers
// have KV. A pass at position 0 starts a new sequence and zeroes that state.
#pragma once

#include <cstdint>

#include "engine/state.h"
#include "model/model.h"

namespace ft::model {

// x += Wo · (attention(rope(norm(q)), rope(norm(k)), v) ⊙ sigmoid(gate)), q and gate from attn_q.
void gated_attention_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0);

// x += ssm_out · deltanet(W_in · rmsnorm(x)) (engine/deltanet.h), state in st.dn.
void gdn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// x += moe(h) + sigmoid(<ffn_gate_inp_shexp, h>) · shared_expert(h), h = rmsnorm(x; ffn_norm).
void moe_shared_ffn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// The whole forward pass (both archs: the FFN follows the layer's weights).
void qwen35_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok, int64_t pos0,
                    float* logits, bool all_logits);

}  // namespace ft::model
