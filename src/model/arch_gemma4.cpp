// Arch `gemma4` (shared/spec/arch/gemma4.md): Gemma-4 E2B/E4B (per-layer input embeddings,
// KV shared by the last layers), 31B (dense) and 26B-A4B (MoE beside the dense MLP).
// Sliding-window and global layers alternate by a bool pattern and differ in head dim,
// KV head count, rope (global: proportional rope through rope_freqs) and window. Attention
// scale 1 (Q/K norms), V normed without a weight, GeGLU (tanh GELU), post-norms on every
// branch, final logit softcapping (30 when the key is absent). Forward: model/gemma4_forward.
#include <fmt/format.h>

#include "core/error.h"
#include "model/gemma4_forward.h"
#include "model/model.h"
#include "quant/dequant.h"

namespace ft::model {
namespace {

std::string blk(int64_t il, const char* role) { return fmt::format("blk.{}.{}", il, role); }

// gemma4.attention.sliding_window_pattern: one bool per layer, true = sliding window.
std::vector<bool> read_swa_pattern(const gguf::File& f, int64_t n_layer) {
  const std::string key = "gemma4.attention.sliding_window_pattern";
  const gguf::Value* v = f.find(key);
  if (!v) fail("{}: missing metadata key {} (gemma4 needs one bool per layer)", f.path(), key);
  if (!v->is_array() || v->elem_type != gguf::ValueType::BOOL ||
      static_cast<int64_t>(v->arr.size()) != n_layer)
    fail("{}: metadata key {} must be an array of {} bools (block_count), got {}", f.path(), key,
         n_layer, v->to_string());
  std::vector<bool> swa;
  for (const auto& e : v->arr) swa.push_back(e.b);
  return swa;
}

// Completes the generic hyper-parameters with gemma4's per-layer layout (spec §1).
void read_gemma4_hparams(const gguf::File& f, HParams& hp) {
  const std::string& path = f.path();
  auto req = [&](const char* k) { return static_cast<int64_t>(f.require_uint(std::string("gemma4.") + k)); };
  const int64_t n_layer = hp.n_layer;
  if (hp.head_dim_k != hp.head_dim_v)
    fail("{}: gemma4 needs attention.key_length == value_length, got {} and {}", path, hp.head_dim_k,
         hp.head_dim_v);
  const int64_t hd_swa = req("attention.key_length_swa");
  if (req("attention.value_length_swa") != hd_swa)
    fail("{}: gemma4 needs attention.key_length_swa == value_length_swa", path);
  const int64_t n_swa = req("attention.sliding_window");
  if (n_swa <= 0) fail("{}: gemma4.attention.sliding_window must be > 0", path);
  const std::vector<bool> swa = read_swa_pattern(f, n_layer);
  hp.n_embd_per_layer = req("embedding_length_per_layer_input");
  hp.final_logit_softcap = static_cast<float>(checked_float(
      f, "gemma4.final_logit_softcapping", f.get_float("gemma4.final_logit_softcapping").value_or(30.0), 0.0, 1e6, false));
  hp.attn_scale = 1.0f;  // the Q/K norms take the place of 1/sqrt(head_dim)

  hp.rope.type = RopeType::kNeox;
  hp.rope_swa = hp.rope;
  hp.rope_swa.freq_base = static_cast<float>(checked_float(
      f, "gemma4.rope.freq_base_swa", f.get_float("gemma4.rope.freq_base_swa").value_or(10000.0), 0.0, 1e12, true));
  hp.rope_swa.freq_scale = 1.0f;
  // llama.cpp falls back to the global n_rot (the whole global head) when the key is
  // absent, which cannot rotate a smaller sliding head: refuse rather than guess.
  hp.rope_swa.n_rot = static_cast<int>(f.get_int("gemma4.rope.dimension_count_swa").value_or(hp.rope.n_rot));
  if (hp.rope_swa.n_rot <= 0 || hp.rope_swa.n_rot % 2 != 0 || hp.rope_swa.n_rot > hd_swa)
    fail("{}: gemma4.rope.dimension_count_swa {} must be even and <= key_length_swa {}", path,
         hp.rope_swa.n_rot, hd_swa);

  const int64_t n_shared = f.get_int("gemma4.attention.shared_kv_layers").value_or(0);
  const int64_t kv_from = n_layer - n_shared;
  if (n_shared < 0 || (n_shared > 0 && kv_from < 2))
    fail("{}: gemma4.attention.shared_kv_layers {} leaves {} layer(s) with their own KV (need >= 2)",
         path, n_shared, kv_from);
  hp.head_dim_l.resize(n_layer);
  hp.n_swa_l.resize(n_layer);
  hp.kv_src_l.resize(n_layer);
  for (int64_t il = 0; il < n_layer; ++il) {
    hp.head_dim_l[il] = swa[il] ? hd_swa : hp.head_dim_k;
    hp.n_swa_l[il] = swa[il] ? n_swa : 0;
    // A KV-shared layer reads the last own-KV layer of its own kind.
    const int64_t src = il < kv_from ? il : kv_from - (swa[il] ? 2 : 1);
    if (swa[src] != swa[il] || hp.n_head_kv[src] != hp.n_head_kv[il])
      fail("{}: gemma4 layer {} shares the KV of layer {}, which is not a {} layer with {} KV heads",
           path, il, src, swa[il] ? "sliding" : "global", hp.n_head_kv[il]);
    hp.kv_src_l[il] = src;
  }

  if (hp.n_expert > 0) {
    const auto ff = read_per_layer(f, "gemma4.expert_feed_forward_length", n_layer, std::nullopt);
    for (int64_t x : ff)
      if (x != ff[0] || x <= 0)
        fail("{}: gemma4.expert_feed_forward_length must be one positive width for all layers", path);
    hp.n_ff_exp = ff[0];
  }
}

void load_layer_attention(TensorLoader& tl, Model& m, int64_t il) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim(il);
  const int64_t q_dim = hp.n_head[il] * hd, kv_dim = hp.n_head_kv[il] * hd;
  const bool own_kv = hp.kv_src(il) == il;
  L.attn_norm = tl.get_f32(blk(il, "attn_norm.weight"), {n_embd});
  if (tl.has(blk(il, "attn_qkv.weight"))) {
    L.qkv.add(tl.get_scaled(blk(il, "attn_qkv"), {n_embd, q_dim + 2 * kv_dim}));
  } else {
    L.qkv.add(tl.get_scaled(blk(il, "attn_q"), {n_embd, q_dim}));
    // A KV-shared layer may still carry K/V projections; llama.cpp loads and ignores them.
    const ScaledTensor k = tl.get_scaled(blk(il, "attn_k"), {n_embd, kv_dim}, own_kv);
    const ScaledTensor v = tl.get_scaled(blk(il, "attn_v"), {n_embd, kv_dim}, false);
    if (own_kv) {
      L.qkv.add(k);
      if (v) L.qkv.add(v);
      L.v_from_k = !v;
    }
  }
  L.attn_q_norm = tl.get_f32(blk(il, "attn_q_norm.weight"), {hd});
  L.attn_k_norm = tl.get_f32(blk(il, "attn_k_norm.weight"), {hd}, own_kv);
  L.wo.add(tl.get_scaled(blk(il, "attn_output"), {q_dim, n_embd}));
  L.post_attn_norm = tl.get_f32(blk(il, "post_attention_norm.weight"), {n_embd});
  if (const Tensor s = tl.get_f32(blk(il, "layer_output_scale.weight"), {1}, false)) L.out_scale = s.f32()[0];
}

void load_layer_ffn(TensorLoader& tl, Model& m, int64_t il) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff[il];
  // The dense MLP exists in every layer (in MoE layers it is the always-on shared expert).
  L.ffn_norm = tl.get_f32(blk(il, "ffn_norm.weight"), {n_embd});
  L.ffn_gate_up.add(tl.get_scaled(blk(il, "ffn_gate"), {n_embd, n_ff}));
  L.ffn_gate_up.add(tl.get_scaled(blk(il, "ffn_up"), {n_embd, n_ff}));
  L.ffn_down.add(tl.get_scaled(blk(il, "ffn_down"), {n_ff, n_embd}));
  L.post_ffw_norm = tl.get_f32(blk(il, "post_ffw_norm.weight"), {n_embd});
  if (!tl.has(blk(il, "ffn_gate_inp.weight"))) return;

  const int64_t E = hp.n_expert, n_ff_exp = hp.n_ff_exp;
  if (E <= 0) fail("{}: layer {} has ffn_gate_inp.weight but gemma4.expert_count is 0", tl.file().path(), il);
  L.router.add(tl.get_weight(blk(il, "ffn_gate_inp.weight"), {n_embd, E}), 1.0f);
  // Not an NVFP4 scale: the router input scale (HF router.scale), check_scales whitelists it.
  L.router_in_scale = tl.get_f32(blk(il, "ffn_gate_inp.scale"), {n_embd});
  L.pre_ffw_norm_2 = tl.get_f32(blk(il, "pre_ffw_norm_2.weight"), {n_embd});
  L.post_ffw_norm_1 = tl.get_f32(blk(il, "post_ffw_norm_1.weight"), {n_embd});
  L.post_ffw_norm_2 = tl.get_f32(blk(il, "post_ffw_norm_2.weight"), {n_embd});
  engine::ExpertWeights& ew = L.experts;
  ew.n_expert = E;
  ew.n_embd = n_embd;
  ew.n_ff = n_ff_exp;
  ew.glu = engine::Glu::kGelu;
  if (tl.has(blk(il, "ffn_gate_up_exps.weight"))) {
    ew.gate_up = tl.get_experts(blk(il, "ffn_gate_up_exps"), {n_embd, 2 * n_ff_exp, E});
  } else {
    ew.gate = tl.get_experts(blk(il, "ffn_gate_exps"), {n_embd, n_ff_exp, E});
    ew.up = tl.get_experts(blk(il, "ffn_up_exps"), {n_embd, n_ff_exp, E});
  }
  // ffn_down_exps.scale is the router's per_expert_scale (folded with the NVFP4 scale_2 by
  // the converter): applied once, on the down output before the routing weight, by the
  // experts backend. The router itself never applies a per-expert scale.
  ew.down = tl.get_experts(blk(il, "ffn_down_exps"), {n_ff_exp, n_embd, E});
}

void load_gemma4(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  read_gemma4_hparams(tl.file(), hp);
  load_embeddings_and_head(tl, m);
  const int64_t n_pl = hp.n_embd_per_layer, n_layer = hp.n_layer;
  bool any_global = false;
  for (int64_t il = 0; il < n_layer; ++il) any_global |= hp.window(il) == 0;
  // Proportional rope of the global layers: factors 1 for the rotated pairs, 1e30 (angle
  // ~0, identity) for the rest.
  m.rope_freqs = tl.get_f32("rope_freqs.weight", {hp.head_dim_k / 2}, any_global);
  if (n_pl > 0) {
    m.per_layer_token_embd = tl.get("per_layer_token_embd.weight", {n_pl * n_layer, hp.n_vocab});
    if (m.per_layer_token_embd.type != GgmlType::F32 && !quant::has_ref_dequant(m.per_layer_token_embd.type))
      fail("{}: per_layer_token_embd.weight has type {}, which cannot be dequantised", tl.file().path(),
           type_name(m.per_layer_token_embd.type));
    m.per_layer_model_proj.add(tl.get_weight("per_layer_model_proj.weight", {hp.n_embd, n_pl * n_layer}), 1.0f);
    m.per_layer_proj_norm = tl.get_f32("per_layer_proj_norm.weight", {n_pl});
  }
  for (int64_t il = 0; il < n_layer; ++il) {
    load_layer_attention(tl, m, il);
    load_layer_ffn(tl, m, il);
    if (n_pl > 0) {
      Layer& L = m.layers[il];
      L.pl_inp_gate.add(tl.get_weight(blk(il, "inp_gate.weight"), {hp.n_embd, n_pl}), 1.0f);
      L.pl_proj.add(tl.get_weight(blk(il, "proj.weight"), {n_pl, hp.n_embd}), 1.0f);
      L.pl_post_norm = tl.get_f32(blk(il, "post_norm.weight"), {hp.n_embd});
    }
  }
}

}  // namespace

extern const Arch kArchGemma4 = {"gemma4", load_gemma4, gemma4_forward};

}  // namespace ft::model
