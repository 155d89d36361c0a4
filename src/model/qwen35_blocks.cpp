#include "model/qwen35_blocks.h"

#include <cmath>
#include <cstring>

#include "engine/attention.h"
#include "engine/deltanet.h"
#include "engine/ffn.h"
#include "engine/norm.h"
#include "model/decoder.h"

namespace ft::model {

using engine::Exec;

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void gated_attention_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok, int64_t pos0) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, ld = L.qkv.rows();

  attn_norm_qkv(m, il, st, n_tok);
  // Row layout [q_0 g_0 q_1 g_1 ... | k | v]: the gates go to attn_gate, the queries close
  // up to [q_0 q_1 ...] in place (each moves left, so ascending order never overwrites).
  for (int64_t t = 0; t < n_tok; ++t) {
    float* row = s.qkv.data() + t * ld;
    float* gate = s.attn_gate.data() + t * q_dim;
    for (int64_t h = 0; h < nh; ++h) {
      std::memcpy(gate + h * hd, row + (2 * h + 1) * hd, sizeof(float) * hd);
      std::memmove(row + h * hd, row + 2 * h * hd, sizeof(float) * hd);
    }
  }
  float* q = s.qkv.data();
  float* k = q + 2 * q_dim;
  float* v = k + kv_dim;
  qk_norms(m, il, st, n_tok, q, k, ld);
  rope_store_attend(m, il, st, n_tok, pos0, q, k, v, ld);  // rows of q_dim (head_dim_v == head_dim_k)
  for (int64_t i = 0; i < n_tok * q_dim; ++i)
    s.attn[i] = engine::round_act(ex.act, s.attn[i] * sigmoid(s.attn_gate[i]));
  engine::linear(ex, L.wo, s.attn.data(), q_dim, n_tok, s.branch.data(), n_embd);
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void gdn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  auto& dn = st.dn;
  const Exec& ex = st.ex;
  const engine::DeltaNetShape& sh = m.gdn_shape;
  const int64_t n_embd = hp.n_embd, ld = sh.in_dim(), value_dim = sh.value_dim();

  engine::rmsnorm(ex, s.x.data(), n_embd, L.attn_norm.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
  engine::linear(ex, L.gdn_in, s.h.data(), n_embd, n_tok, dn.in.data(), ld);
  engine::deltanet(ex, sh, L.gdn, dn.conv(il), dn.ssm(il), dn.in.data(), ld, n_tok, dn.out.data(), value_dim,
                   dn.y.data());
  engine::linear(ex, L.gdn_out, dn.out.data(), value_dim, n_tok, s.branch.data(), n_embd);
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void moe_shared_ffn_block(const Model& m, int64_t il, engine::State& st, int64_t n_tok) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[il];
  auto& s = st.s;
  const Exec& ex = st.ex;
  const int64_t n_embd = hp.n_embd;
  engine::rmsnorm(ex, s.x.data(), n_embd, L.ffn_norm.f32(), n_embd, hp.rms_eps, n_tok, s.h.data(), n_embd);
  routed_experts(m, il, st, n_tok);

  // The shared-expert gate logits stay fp32 in every dtype, as the router's.
  const Exec ex32{ex.pool, engine::ActType::kF32, ex.act_quant};

  engine::ffn_swiglu(ex, L.ffn_gate_up_shexp, L.ffn_down_shexp, s.h.data(), n_embd, n_tok, s.shexp.data(), n_embd,
                     {s.ffn_gu.data(), s.ffn_h.data()});
  float* gate = s.router.data();  // one logit per token; the router logits are used up
  engine::linear(ex32, L.ffn_gate_inp_shexp, s.h.data(), n_embd, n_tok, gate, 1);
  for (int64_t t = 0; t < n_tok; ++t) {
    const float g = sigmoid(gate[t]);
    float* b = s.branch.data() + t * n_embd;
    const float* sh = s.shexp.data() + t * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) b[i] += engine::round_act(ex.act, sh[i] * g);
  }
  residual_add(s.x.data(), s.branch.data(), n_tok * n_embd);
}

void qwen35_forward(const Model& m, engine::State& st, const int32_t* tokens, int64_t n_tok, int64_t pos0,
                    float* logits, bool all_logits) {
  // Position 0 is a new sequence: its conv window and delta-rule state start at zero
  // (the KV cache needs no reset, positions overwrite it).
  if (pos0 == 0) st.dn.reset();
  embed(m, tokens, n_tok, st.s.x.data());
  st.rope.build(m.hp.rope, m.rope_pair_div.data(), pos0, n_tok);
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    if (m.hp.is_recurrent(il))
      gdn_block(m, il, st, n_tok);
    else
      gated_attention_block(m, il, st, n_tok, pos0);
    if (m.layers[il].is_moe())
      moe_shared_ffn_block(m, il, st, n_tok);
    else
      ffn_block(m, il, st, n_tok);
  }
  if (logits) output_head(m, st, n_tok, logits, all_logits);
}

}  // namespace ft::model
