#include "model/gemma4_forward.h"

#include <cmath>
#include <cstring>

#include "engine/attention.h"
#include "engine/geglu.h"
#include "engine/norm.h"
#include "model/decoder.h"
#include "quant/dequant.h"

namespace ft::model {

using engine::Exec;

namespace {

void add_rows(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale_rows(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// out = W_down · (gelu(W_gate · h) ⊙ (W_up · h)) for n_tok rows of s.h.
void geglu_mlp(const Layer& L, engine::State& st, int64_t n_tok, float* out) {
  auto& s = st.s;
  const int64_t n_embd = L.ffn_down.rows(), n_ff = L.ffn_down.k();
  engine::linear(st.ex, L.ffn_gate_up, s.h.data(), n_embd, n_tok, s.ffn_gu.data(), 2 * n_ff);
  engine::geglu(st.ex, s.ffn_gu.data(), 2 * n_ff, n_ff, n_tok, s.ffn_h.data(), n_ff);
  engine::linear(st.ex, L.ffn_down, s.ffn_h.data(), n_ff, n_tok, out, n_embd);
}

}  // namespace

void gemma4_per_layer_inputs(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok) {
  const HParams& hp = m.hp;
  auto& s = st.s;
  const int64_t n_embd = hp.n_embd, n_pl = hp.n_embd_per_layer, W = n_pl * hp.n_layer;
  float* P = s.per_layer.data();
  // Projection of the scaled embeddings, one RMS-normed slice of n_pl per layer.
  engine::linear(st.ex, m.per_layer_model_proj, s.x.data(), n_embd, n_tok, P, W);
  scale_rows(P, n_tok * W, 1.0f / std::sqrt(static_cast<float>(n_embd)));
  engine::rmsnorm(st.ex, P, n_pl, m.per_layer_proj_norm.f32(), n_pl, hp.rms_eps, n_tok * hp.n_layer, P, n_pl);
  // Plus the token's own per-layer embedding row, scaled by sqrt(n_pl); the sum by 1/sqrt(2).
  const Tensor& te = m.per_layer_token_embd;
  const float t_scale = std::sqrt(static_cast<float>(n_pl)), mix = 1.0f / std::sqrt(2.0f);
  float* row = s.pl_gate.data();  // W floats of scratch (sized for this)
  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* src = te.data + tokens[t] * te.row_bytes();
    if (te.type == GgmlType::F32)
      std::memcpy(row, src, sizeof(float) * W);
    else
      quant::dequantize_row_ref(te.type, src, row, W);
    float* p = P + t * W;
    for (int64_t i = 0; i < W; ++i) p[i] = engine::round_act(st.ex.act, (p[i] + row[i] * t_scale) * mix);
  }
}

void gemma4_attention(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim(il);
  const int64_t nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, ld = q_dim + 2 * kv_dim;
  const bool own_kv = hp.kv_src(il) == il;
  const engine::RopeCache& rope = hp.window(il) > 0 ? st.rope_swa : st.rope;

  engine::rmsnorm(ex, s.x.data(), n_embd, L.attn_norm.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
  engine::linear(ex, L.qkv, s.h.data(), n_embd, n_tok, s.qkv.data(), ld);
  float* q = s.qkv.data();
  float* k = q + q_dim;
  float* v = k + kv_dim;
  engine::rmsnorm_heads(ex, q, ld, n_tok, nh, hd, L.attn_q_norm.f32(), hp.rms_eps);
  engine::rope_apply(ex, rope, q, ld, n_tok, nh, hd);
  if (own_kv) {
    if (L.v_from_k)  // V is the raw K projection, normed separately (without weight)
      for (int64_t t = 0; t < n_tok; ++t) std::memcpy(v + t * ld, k + t * ld, sizeof(float) * kv_dim);
    engine::rmsnorm_heads(ex, k, ld, n_tok, nkv, hd, L.attn_k_norm.f32(), hp.rms_eps);
    engine::rmsnorm_heads(ex, v, ld, n_tok, nkv, hd, nullptr, hp.rms_eps);
    engine::rope_apply(ex, rope, k, ld, n_tok, nkv, hd);
    st.kv.store(il, pos0, n_tok, k, ld, v, ld);
  }

  const engine::AttnShape shape{nh, nkv, hd, hd, hp.attn_scale, hp.window(il)};
  engine::attention(ex, shape, st.kv, hp.kv_src(il), q, ld, n_tok, pos0, s.attn.data(), q_dim, st.attn);
  engine::linear(ex, L.wo, s.attn.data(), q_dim, n_tok, s.branch.data(), n_embd);
  engine::rmsnorm(ex, s.branch.data(), n_embd, L.post_attn_norm.f32(), n_embd, hp.rms_eps, n_tok,
                  s.branch.data(), n_embd);
  add_rows(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void gemma4_ffn(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd;
  float* x = s.x.data();
  float* f = s.branch.data();
  engine::rmsnorm(ex, x, n_embd, L.ffn_norm.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
  geglu_mlp(L, st, n_tok, f);
  if (L.is_moe()) {
    engine::rmsnorm(ex, f, n_embd, L.post_ffw_norm_1.f32(), n_embd, hp.rms_eps, n_tok, f, n_embd);
    // Router input: the unweighted norm of x, / sqrt(n_embd), times ffn_gate_inp.scale (in
    // ggml's order); its logits stay fp32 as in decoder.cpp's ffn_block.
    engine::rmsnorm(ex, x, n_embd, nullptr, n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
    const float inv = 1.0f / std::sqrt(static_cast<float>(n_embd));
    const float* rs = L.router_in_scale.f32();
    for (int64_t t = 0; t < n_tok; ++t) {
      float* h = s.h.data() + t * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) h[i] = engine::round_act(ex.act, h[i] * inv * rs[i]);
    }
    const Exec ex32{ex.pool, engine::ActType::kF32, ex.act_quant};
    const int64_t n_expert = hp.n_expert;
    const int n_used = static_cast<int>(hp.n_expert_used[il]);
    engine::linear(ex32, L.router, s.h.data(), n_embd, n_tok, s.router.data(), n_expert);
    // Plain softmax routing: no per-expert scale here, ffn_down_exps.scale carries it.
    for (int64_t t = 0; t < n_tok; ++t)
      engine::moe_route(s.router.data() + t * n_expert, n_expert, n_used, s.probs.data(), s.order.data(),
                        s.moe_ids.data() + t * n_used, s.moe_w.data() + t * n_used);
    float* e = s.branch2.data();
    engine::rmsnorm(ex, x, n_embd, L.pre_ffw_norm_2.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
    L.moe->forward(ex, s.h.data(), n_embd, n_tok, s.moe_ids.data(), s.moe_w.data(), n_used, e, n_embd);
    engine::rmsnorm(ex, e, n_embd, L.post_ffw_norm_2.f32(), n_embd, hp.rms_eps, n_tok, e, n_embd);
    add_rows(f, e, n_tok * n_embd);
  }
  engine::rmsnorm(ex, f, n_embd, L.post_ffw_norm.f32(), n_embd, hp.rms_eps, n_tok, f, n_embd);
  add_rows(x, f, n_tok * n_embd);
}

void gemma4_layer_end(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd, n_pl = hp.n_embd_per_layer;
  if (n_pl > 0) {
    float* g = s.pl_gate.data();
    engine::linear(ex, L.pl_inp_gate, s.x.data(), n_embd, n_tok, g, n_pl);
    engine::gelu_mul(ex, g, n_pl, s.per_layer.data() + il * n_pl, hp.n_layer * n_pl, n_pl, n_tok);
    engine::linear(ex, L.pl_proj, g, n_pl, n_tok, s.branch.data(), n_embd);
    engine::rmsnorm(ex, s.branch.data(), n_embd, L.pl_post_norm.f32(), n_embd, hp.rms_eps, n_tok,
                    s.branch.data(), n_embd);
    add_rows(s.x.data(), s.branch.data(), n_tok * n_embd);
  }
  if (L.out_scale != 1.0f) scale_rows(s.x.data(), n_tok * n_embd, L.out_scale);
}

void softcap_logits(float* logits, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) logits[i] = std::tanh(logits[i] * inv) * cap;
}

void gemma4_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok, int64_t pos0,
                    float* logits, bool all_logits) {
  const HParams& hp = m.hp;
  float* x = st.s.x.data();
  embed(m, tokens, n_tok, x);
  scale_rows(x, n_tok * hp.n_embd, std::sqrt(static_cast<float>(hp.n_embd)));  // fp32, not rounded
  if (hp.n_embd_per_layer > 0) gemma4_per_layer_inputs(m, st, tokens, n_tok);
  // Global layers: proportional rope through rope_freqs; sliding layers: their own base and
  // n_rot, no factors.
  st.rope.build(hp.rope, m.rope_freqs ? m.rope_freqs.f32() : nullptr, pos0, n_tok);
  st.rope_swa.build(hp.rope_swa, nullptr, pos0, n_tok);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    gemma4_attention(m, il, st, n_tok, pos0);
    gemma4_ffn(m, il, st, n_tok);
    gemma4_layer_end(m, il, st, n_tok);
  }
  if (!logits) return;
  output_head(m, st, n_tok, logits, all_logits);
  if (hp.final_logit_softcap > 0.0f)
    softcap_logits(logits, (all_logits ? n_tok : 1) * m.output.rows(), hp.final_logit_softcap);
}

}  // namespace ft::model
