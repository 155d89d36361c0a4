// The shared layer loop of pre-norm decoder-only transformers (llama, qwen3, qwen3moe):
//
//   x = token_embd[tokens]
//   per layer: x += Wo · attention(rope(norm_qk(W_qkv · rmsnorm(x))))
//              x += ffn(rmsnorm(x))        (dense SwiGLU or routed experts)
//   logits = W_out · rmsnorm(x)
//
// Each step is a block that a later arch (gemma4, qwen35) can reuse or replace.
#pragma once

#include <cstdint>

#include "engine/state.h"
#include "model/model.h"

namespace ft::model {

// x[t] = token_embd[tokens[t]] as fp32 rows. Throws on an id outside the vocabulary.
void embed(const Model& m, const int32_t* tokens, int64_t n_tok, float* x);

// x += attention block of layer il for n_tok tokens at positions pos0.. (uses st.rope).
void attention_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0);

// x += FFN block of layer il (dense or MoE).
void ffn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// Pieces of the blocks above that other architectures' blocks share (qwen35_blocks.cpp).
// x[i] += y[i] for n values: the residual add.
void residual_add(float* x, const float* y, int64_t n);
// st.s.h = rmsnorm(x) with layer il's attn_norm, then st.s.qkv = W_qkv · h (row stride
// L.qkv.rows()).
void attn_norm_qkv(const Model& m, int64_t il, engine::State& st, int64_t n_tok);
// Layer il's per-head q/k RMSNorms (where it has them) on q and k rows of stride ld.
void qk_norms(const Model& m, int64_t il, engine::State& st, int64_t n_tok, float* q, float* k, int64_t ld);
// RoPE on q and k, K/V of positions pos0.. into the cache, attention into st.s.attn (rows
// of n_head * head_dim_v).
void rope_store_attend(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0, float* q,
                       float* k, float* v, int64_t ld);
// Layer il's routed experts on st.s.h into st.s.branch (router logits fp32 in every dtype).
void routed_experts(const Model& m, int64_t il, engine::State& st, int64_t n_tok);

// logits for the last row (or all rows) of st.s.x.
void output_head(const Model& m, engine::State& st, int64_t n_tok, float* logits, bool all_logits);

// The whole forward pass built from the blocks above.
void decoder_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok,
                     int64_t pos0, float* logits, bool all_logits);

// Several sequences in one forward (engine/batch_runner.h): the rows of the batch are split
// into sequences, each with its own positions, RoPE table and KV cells in a shared paged
// cache. Linear layers and experts run once over all rows; attention per sequence.
struct BatchSeqs {
  const engine::AttnSeq* seqs = nullptr;   // row ranges, positions, cells
  const engine::RopeCache* ropes = nullptr;  // per sequence, built for its positions
  int64_t n = 0;
  engine::KvCache* kv = nullptr;
};

// attention_block over the sequences of b (KV written to and read from b.kv).
void attention_block_seqs(const Model& m, int64_t il, engine::State& st, int64_t n_tok,
                          const BatchSeqs& b);

// decoder_forward over the sequences of b: logits gets one row per sequence, after its last
// token. Only for architectures whose forward is decoder_forward.
void decoder_forward_seqs(const Model& m, engine::State& st, const int32_t* tokens,
                          int64_t n_tok, const BatchSeqs& b, float* logits);

}  // namespace ft::model
