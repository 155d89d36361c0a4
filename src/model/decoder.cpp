#include "model/decoder.h"

#include <cstring>

#include "core/error.h"
#include "engine/attention.h"
#include "engine/ffn.h"
#include "engine/norm.h"
#include "quant/dequant.h"

namespace ft::model {

using engine::Exec;

void embed(const Model& m, const int32_t* tokens, int64_t n_tok, float* x) {
  const Tensor& te = m.token_embd;
  const int64_t n_embd = te.ne[0];
  for (int64_t t = 0; t < n_tok; ++t) {
    if (tokens[t] < 0 || tokens[t] >= te.ne[1])
      fail("token id {} is out of range [0, {})", tokens[t], te.ne[1]);
    const uint8_t* row = te.data + tokens[t] * te.row_bytes();
    if (te.type == GgmlType::F32)
      std::memcpy(x + t * n_embd, row, sizeof(float) * n_embd);
    else
      quant::dequantize_row_ref(te.type, row, x + t * n_embd, n_embd);
  }
}

void residual_add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void attn_norm_qkv(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  engine::rmsnorm(st.ex, s.x.data(), hp.n_embd, L.attn_norm.f32(), hp.n_embd, hp.rms_eps, n_tok, s.h.data(),
                  hp.n_embd);
  engine::linear(st.ex, L.qkv, s.h.data(), hp.n_embd, n_tok, s.qkv.data(), L.qkv.rows());
}

void qk_norms(const Model& m, int64_t il, engine::State& st, int64_t n_tok, float* q, float* k, int64_t ld) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  const int64_t hd = hp.head_dim_k;
  if (L.attn_q_norm) engine::rmsnorm_heads(st.ex, q, ld, n_tok, hp.n_head[il], hd, L.attn_q_norm.f32(), hp.rms_eps);
  if (L.attn_k_norm)
    engine::rmsnorm_heads(st.ex, k, ld, n_tok, hp.n_head_kv[il], hd, L.attn_k_norm.f32(), hp.rms_eps);
}

void rope_store_attend(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0, float* q,
                       float* k, float* v, int64_t ld) {
  const HParams& hp = m.hp;
  const Exec& ex = st.ex;
  const int64_t hd = hp.head_dim_k, nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  engine::rope_apply(ex, st.rope, q, ld, n_tok, nh, hd);
  engine::rope_apply(ex, st.rope, k, ld, n_tok, nkv, hd);
  st.kv.store(il, pos0, n_tok, k, ld, v, ld);
  const engine::AttnShape shape{nh, nkv, hd, hp.head_dim_v, hp.attn_scale};
  engine::attention(ex, shape, st.kv, il, q, ld, n_tok, pos0, st.s.attn.data(), nh * hp.head_dim_v, st.attn);
}

void routed_experts(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const int64_t n_embd = hp.n_embd, n_expert = hp.n_expert;
  const int n_used = static_cast<int>(hp.n_expert_used[il]);
  // Router logits stay fp32 in every dtype: routing decisions should not move with the
  // activation rounding (llama.cpp's router logits are fp32 too).
  const Exec ex32{st.ex.pool, engine::ActType::kF32, st.ex.act_quant};  // llama.cpp: Q8 input too
  engine::linear(ex32, L.router, s.h.data(), n_embd, n_tok, s.router.data(), n_expert);
  for (int64_t t = 0; t < n_tok; ++t)
    engine::moe_route(s.router.data() + t * n_expert, n_expert, n_used, s.probs.data(), s.order.data(),
                      s.moe_ids.data() + t * n_used, s.moe_w.data() + t * n_used);
  L.moe->forward(st.ex, s.h.data(), n_embd, n_tok, s.moe_ids.data(), s.moe_w.data(), n_used, s.branch.data(),
                 n_embd);
}

void attention_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t q_dim = hp.n_head[il] * hd, kv_dim = hp.n_head_kv[il] * hd, ld = L.qkv.rows();
  attn_norm_qkv(m, il, st, n_tok);
  float* q = s.qkv.data();
  float* k = q + q_dim;
  float* v = k + kv_dim;
  qk_norms(m, il, st, n_tok, q, k, ld);
  rope_store_attend(m, il, st, n_tok, pos0, q, k, v, ld);
  const int64_t o_dim = hp.n_head[il] * hp.head_dim_v;
  engine::linear(st.ex, L.wo, s.attn.data(), o_dim, n_tok, s.branch.data(), n_embd);
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void attention_block_seqs(const Model& m, int64_t il, engine::State& st, int64_t n_tok,
                          const BatchSeqs& b) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, ld = L.qkv.rows();
  attn_norm_qkv(m, il, st, n_tok);
  float* q = s.qkv.data();
  float* k = q + q_dim;
  float* v = k + kv_dim;
  qk_norms(m, il, st, n_tok, q, k, ld);
  for (int64_t i = 0; i < b.n; ++i) {
    const engine::AttnSeq& sq = b.seqs[i];
    const int64_t off = sq.row0 * ld;
    engine::rope_apply(ex, b.ropes[i], q + off, ld, sq.n_tok, nh, hd);
    engine::rope_apply(ex, b.ropes[i], k + off, ld, sq.n_tok, nkv, hd);
    b.kv->store_cells(il, sq.cells + sq.pos0, sq.n_tok, k + off, ld, v + off, ld);
  }
  const engine::AttnShape shape{nh, nkv, hd, hp.head_dim_v, hp.attn_scale};
  const int64_t o_dim = nh * hp.head_dim_v;
  engine::attention_seqs(ex, shape, *b.kv, il, q, ld, b.seqs, b.n, s.attn.data(), o_dim, st.attn);
  engine::linear(ex, L.wo, s.attn.data(), o_dim, n_tok, s.branch.data(), n_embd);
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void ffn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd;
  engine::rmsnorm(ex, s.x.data(), n_embd, L.ffn_norm.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(),
                  n_embd);
  if (!L.is_moe()) {
    engine::ffn_swiglu(ex, L.ffn_gate_up, L.ffn_down, s.h.data(), n_embd, n_tok, s.branch.data(),
                       n_embd, {s.ffn_gu.data(), s.ffn_h.data()});
  } else {
    routed_experts(m, il, st, n_tok);
  }
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void output_head(const Model& m, engine::State& st, int64_t n_tok, float* logits, bool all_logits) {
  const HParams& hp = m.hp;
  auto& s = st.s;
  const int64_t n_embd = hp.n_embd;
  // Only the rows whose logits are wanted go through the norm and the head (as llama.cpp's
  // inp_out_ids); the head output stays fp32 whatever the activation dtype.
  const int64_t first = all_logits ? 0 : n_tok - 1, rows = n_tok - first;
  engine::rmsnorm(st.ex, s.x.data() + first * n_embd, n_embd, m.output_norm.f32(), n_embd,
                  hp.rms_eps, rows, s.h.data(), n_embd);
  const Exec ex32{st.ex.pool, engine::ActType::kF32, st.ex.act_quant};  // llama.cpp: Q8 input too
  engine::linear(ex32, m.output, s.h.data(), n_embd, rows, logits, m.output.rows());
}

void decoder_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok,
                     int64_t pos0, float* logits, bool all_logits) {
  embed(m, tokens, n_tok, st.s.x.data());
  st.rope.build(m.hp.rope, m.rope_freqs ? m.rope_freqs.f32() : nullptr, pos0, n_tok);
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    attention_block(m, il, st, n_tok, pos0);
    ffn_block(m, il, st, n_tok);
  }
  if (logits) output_head(m, st, n_tok, logits, all_logits);
}

void decoder_forward_seqs(const Model& m, engine::State& st, const int32_t* tokens,
                          int64_t n_tok, const BatchSeqs& b, float* logits) {
  embed(m, tokens, n_tok, st.s.x.data());
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    attention_block_seqs(m, il, st, n_tok, b);
    ffn_block(m, il, st, n_tok);
  }
  // The head over each sequence's last row only (rows gathered in order, then one matmul).
  const int64_t n_embd = m.hp.n_embd;
  auto& s = st.s;
  for (int64_t i = 0; i < b.n; ++i) {
    const int64_t r = b.seqs[i].row0 + b.seqs[i].n_tok - 1;
    engine::rmsnorm(st.ex, s.x.data() + r * n_embd, n_embd, m.output_norm.f32(), n_embd, m.hp.rms_eps,
                    1, s.h.data() + i * n_embd, n_embd);
  }
  const Exec ex32{st.ex.pool, engine::ActType::kF32, st.ex.act_quant};  // as output_head
  engine::linear(ex32, m.output, s.h.data(), n_embd, b.n, logits, m.output.rows());
}

}  // namespace ft::model
