#include "testgen/gen_gemma4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "testgen/gemma4_vocab.h"
#include "testgen/rng.h"
#include "testgen/tensor_gen.h"

namespace ft::testgen {
namespace {

template <typename T>
std::vector<T> per_layer(const std::vector<int64_t>& v, int64_t n_layer, int64_t fallback) {
  std::vector<T> out;
  for (int64_t il = 0; il < n_layer; ++il) out.push_back(static_cast<T>(v.empty() ? fallback : v[il]));
  return out;
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

uint32_t file_type(const ModelSpec& s) {
  for (GgmlType t : s.role_type)
    if (t == GgmlType::NVFP4) return 39;  // MOSTLY_NVFP4
  for (GgmlType t : s.role_type)
    if (t == GgmlType::MXFP4) return 38;
  return s.type(Role::kAttn) == GgmlType::BF16 ? 32 : 0;
}

}  // namespace

GenerateResult generate_gemma4(const ModelSpec& spec, const std::string& path, const std::string& twin_path,
                               const std::string& noscale_path, bool progress) {
  const auto& g = spec.g4;
  const Gemma4Vocab vocab = g.n_merges > 0 ? build_gemma4_vocab(g.n_merges) : Gemma4Vocab{};
  const int64_t n_vocab = g.n_merges > 0 ? static_cast<int64_t>(vocab.tokens.size()) : spec.n_vocab;
  const int64_t L = spec.n_layer, n_embd = spec.n_embd, n_pl = g.n_embd_per_layer;
  const bool moe = spec.n_expert > 0;
  for (const auto* v : {&g.n_head_kv, &g.n_ff})
    if (!v->empty() && static_cast<int64_t>(v->size()) != L)
      fail("testgen: gemma4 per-layer lists (n_head_kv, n_ff) need {} entries (n_layer)", L);
  std::vector<bool> swa = g.swa_pattern;
  if (swa.empty())
    for (int64_t il = 0; il < L; ++il) swa.push_back(il % 2 == 0);
  const auto n_kv = per_layer<int64_t>(g.n_head_kv, L, spec.n_head_kv);
  const auto n_ff = per_layer<int64_t>(g.n_ff, L, spec.n_ff);
  if (static_cast<int64_t>(swa.size()) != L || g.head_dim_swa % 2 != 0 || g.n_shared_kv < 0 ||
      (g.n_shared_kv > 0 && L - g.n_shared_kv < 2))
    fail("testgen: invalid gemma4 spec (swa_pattern size, head_dim_swa or n_shared_kv)");
  const int64_t kv_from = L - g.n_shared_kv;

  gguf::Writer w;
  w.set_string("general.architecture", "gemma4");
  w.set_string("general.name", spec.name);
  w.set_u32("general.file_type", file_type(spec));
  w.set_u32("general.quantization_version", 2);
  auto key = [](const char* k) { return std::string("gemma4.") + k; };
  w.set_u32(key("context_length"), static_cast<uint32_t>(spec.n_ctx_train));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(n_embd));
  w.set_u32(key("block_count"), static_cast<uint32_t>(L));
  if (g.n_ff.empty())
    w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(spec.n_ff));
  else
    w.set_u32_array(key("feed_forward_length"), per_layer<uint32_t>(g.n_ff, L, 0));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(spec.n_head));
  w.set_u32_array(key("attention.head_count_kv"), per_layer<uint32_t>(n_kv, L, 0));
  w.set_u32(key("attention.key_length"), static_cast<uint32_t>(spec.head_dim));
  w.set_u32(key("attention.value_length"), static_cast<uint32_t>(spec.head_dim));
  w.set_u32(key("attention.key_length_swa"), static_cast<uint32_t>(g.head_dim_swa));
  w.set_u32(key("attention.value_length_swa"), static_cast<uint32_t>(g.head_dim_swa));
  w.set_u32(key("attention.sliding_window"), static_cast<uint32_t>(g.n_swa));
  w.set_bool_array(key("attention.sliding_window_pattern"), swa);
  if (g.n_shared_kv > 0) w.set_u32(key("attention.shared_kv_layers"), static_cast<uint32_t>(g.n_shared_kv));
  w.set_f32(key("attention.layer_norm_rms_epsilon"), spec.rms_eps);
  w.set_u32(key("embedding_length_per_layer_input"), static_cast<uint32_t>(n_pl));
  w.set_f32(key("rope.freq_base"), spec.rope_base);
  w.set_f32(key("rope.freq_base_swa"), 10000.0f);
  w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(spec.head_dim));
  w.set_u32(key("rope.dimension_count_swa"), static_cast<uint32_t>(g.head_dim_swa));
  if (g.write_softcap) w.set_f32(key("final_logit_softcapping"), g.softcap);
  if (moe) {
    w.set_u32(key("expert_count"), static_cast<uint32_t>(spec.n_expert));
    w.set_u32(key("expert_used_count"), static_cast<uint32_t>(spec.n_expert_used));
    w.set_u32(key("expert_feed_forward_length"), static_cast<uint32_t>(spec.n_ff_exp));
  }
  if (g.n_merges > 0) {
    w.set_string("tokenizer.ggml.model", "gemma4");
    w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", vocab.token_types);
    w.set_string_array("tokenizer.ggml.merges", vocab.merges);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos_id));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos_id));
    w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(vocab.unk_id));
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.pad_id));
    w.set_bool("tokenizer.ggml.add_bos_token", true);
  } else {
    w.set_string("tokenizer.ggml.model", "none");
    w.set_u32(key("vocab_size"), static_cast<uint32_t>(n_vocab));
  }

  // ---- weights (statistics: see gen_gemma4.h) ----
  const uint64_t seed = spec.seed;
  Rng frng(Rng::mix(seed, hash_name("gemma4-spread")));
  auto spread = [&] { return spec.scale_spread ? std::pow(10.0f, frng.uniform(-1.0f, 1.0f)) : 1.0f; };
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  const float E = spec.resid_scale;
  // Tied output: logits = token_embd . normed(x), so the current token's own embedding in x
  // wins every step (greedy decoding repeats it) unless the branches dominate the residual
  // (same boost as model_gen.cpp; without it the tied MoE config gave < 6 distinct tokens in 32).
  const float tied_boost = spec.tied_output ? 3.5f * std::sqrt(static_cast<float>(n_embd)) : 1.0f;
  const float r_branch = tied_boost * spec.branch_rel * E / std::sqrt(static_cast<float>(L));

  TensorGen b(spec, progress, /*omit_unit_scales=*/false);
  // x = token_embd * sqrt(n_embd) has RMS E.
  b.weight("token_embd.weight", n_embd, n_vocab, 1, Role::kEmbd, E * inv_sqrt(n_embd), {}, false);
  if (n_pl > 0) {
    // Per-layer inputs: the projection is RMS-normed, the token rows scaled by sqrt(n_pl).
    b.weight("per_layer_token_embd.weight", n_pl * L, n_vocab, 1, Role::kEmbd, inv_sqrt(n_pl), {}, false);
    b.weight("per_layer_model_proj.weight", n_embd, n_pl * L, 1, Role::kEmbd, inv_sqrt(n_embd), {}, false);
    b.f32("per_layer_proj_norm.weight", {n_pl}, uniform_vec(seed, "per_layer_proj_norm", n_pl, 0.8f, 1.2f));
  }
  // Tied: token_embd rows have RMS E / sqrt(n_embd), so the norm sets the logits' std.
  b.f32("output_norm.weight", {n_embd},
        uniform_vec(seed, "output_norm", n_embd, 0.8f, 1.2f, spec.tied_output ? spec.logit_std / E : 1.0f));
  if (!spec.tied_output)
    b.weight("output.weight", n_embd, n_vocab, 1, Role::kOutput, spec.logit_std * inv_sqrt(n_embd), {}, true);
  {
    // Proportional rope: a quarter of the global head's pairs rotate, the rest get 1e30.
    std::vector<float> ff(static_cast<size_t>(spec.head_dim / 2), 1e30f);
    std::fill_n(ff.begin(), std::max<int64_t>(1, spec.head_dim / 8), 1.0f);
    b.f32("rope_freqs.weight", {spec.head_dim / 2}, ff);
  }
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t hd = swa[il] ? g.head_dim_swa : spec.head_dim;
    const int64_t q_dim = spec.n_head * hd, kv_dim = n_kv[il] * hd;
    const bool own_kv = il < kv_from;
    b.f32(p + "attn_norm.weight", {n_embd}, uniform_vec(seed, p + "attn_norm", n_embd, 0.8f, 1.2f));
    b.weight(p + "attn_q.weight", n_embd, q_dim, 1, Role::kAttn, inv_sqrt(n_embd), {spread()}, true);
    if (own_kv) {
      b.weight(p + "attn_k.weight", n_embd, kv_dim, 1, Role::kAttn, inv_sqrt(n_embd), {spread()}, true);
      if (!contains(g.v_from_k, il))
        b.weight(p + "attn_v.weight", n_embd, kv_dim, 1, Role::kAttn, inv_sqrt(n_embd), {spread()}, true);
    }
    b.weight(p + "attn_output.weight", q_dim, n_embd, 1, Role::kAttn, inv_sqrt(q_dim), {spread()}, true);
    // Q and K are RMS-normed per head and the attention scale is 1: norm weights ~0.5 give
    // scores of std ~0.25 sqrt(hd) (2..3), neither flat nor one-hot.
    b.f32(p + "attn_q_norm.weight", {hd}, uniform_vec(seed, p + "attn_q_norm", hd, 0.3f, 0.7f));
    if (own_kv) b.f32(p + "attn_k_norm.weight", {hd}, uniform_vec(seed, p + "attn_k_norm", hd, 0.3f, 0.7f));
    b.f32(p + "post_attention_norm.weight", {n_embd}, uniform_vec(seed, p + "post_attention_norm", n_embd, 0.8f, 1.2f, r_branch));
    if (contains(g.out_scale, il)) b.f32(p + "layer_output_scale.weight", {1}, uniform_vec(seed, p + "out_scale", 1, 0.6f, 0.9f));

    b.f32(p + "ffn_norm.weight", {n_embd}, uniform_vec(seed, p + "ffn_norm", n_embd, 0.8f, 1.2f));
    b.weight(p + "ffn_gate.weight", n_embd, n_ff[il], 1, Role::kMlp, inv_sqrt(n_embd), {spread()}, true);
    b.weight(p + "ffn_up.weight", n_embd, n_ff[il], 1, Role::kMlp, inv_sqrt(n_embd), {spread()}, true);
    b.weight(p + "ffn_down.weight", n_ff[il], n_embd, 1, Role::kMlp, inv_sqrt(n_ff[il]), {spread()}, true);
    b.f32(p + "post_ffw_norm.weight", {n_embd}, uniform_vec(seed, p + "post_ffw_norm", n_embd, 0.8f, 1.2f, r_branch));
    if (moe) {
      const int64_t ne_ = spec.n_expert, nf = spec.n_ff_exp;
      b.weight(p + "ffn_gate_inp.weight", n_embd, ne_, 1, Role::kRouter, spec.router_std * inv_sqrt(n_embd), {}, false);
      // The router input is rmsnorm(x) / sqrt(n_embd) * scale: scale ~sqrt(n_embd) keeps it at RMS ~1.
      b.f32(p + "ffn_gate_inp.scale", {n_embd},
            uniform_vec(seed, p + "router_scale", n_embd, 0.5f, 1.5f, std::sqrt(static_cast<float>(n_embd))));
      for (const char* nm : {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"})
        b.f32(p + nm + ".weight", {n_embd}, uniform_vec(seed, p + nm, n_embd, 0.8f, 1.2f));
      std::vector<float> f_gate(static_cast<size_t>(ne_)), f_up(f_gate.size()), f_down(f_gate.size()), pes(f_gate.size());
      for (size_t e = 0; e < f_gate.size(); ++e) {
        f_gate[e] = spread();
        f_up[e] = spread();
        f_down[e] = spread();
        // per_expert_scale: the experts' relative weights survive post_ffw_norm_2, so a scale
        // applied twice or not at all changes the output.
        pes[e] = std::pow(10.0f, frng.uniform(-0.8f, 0.8f));
      }
      const bool merged = g.merged_gate_up && spec.type(Role::kExperts) != GgmlType::NVFP4;
      if (merged) {
        b.weight(p + "ffn_gate_up_exps.weight", n_embd, 2 * nf, ne_, Role::kExperts, inv_sqrt(n_embd), f_gate, false);
      } else {
        b.weight(p + "ffn_gate_exps.weight", n_embd, nf, ne_, Role::kExperts, inv_sqrt(n_embd), f_gate, true);
        b.weight(p + "ffn_up_exps.weight", n_embd, nf, ne_, Role::kExperts, inv_sqrt(n_embd), f_up, true);
      }
      b.weight(p + "ffn_down_exps.weight", nf, n_embd, ne_, Role::kExperts, inv_sqrt(nf), f_down, true).pes = pes;
    }
    if (n_pl > 0) {
      // gelu(W_inp_gate x) with x of RMS ~E: gate outputs of RMS ~1.
      b.weight(p + "inp_gate.weight", n_embd, n_pl, 1, Role::kEmbd, inv_sqrt(n_embd) / E, {}, false);
      b.weight(p + "proj.weight", n_pl, n_embd, 1, Role::kEmbd, inv_sqrt(n_pl), {}, false);
      b.f32(p + "post_norm.weight", {n_embd}, uniform_vec(seed, p + "post_norm", n_embd, 0.8f, 1.2f, 0.5f * r_branch));
    }
  }

  // ---- the three files ----
  GenerateResult res;
  res.n_vocab = n_vocab;
  res.eos_id = g.n_merges > 0 ? vocab.eos_id : -1;
  write_model_files(w, b.tensors(), path, twin_path, noscale_path, res);
  return res;
}

}  // namespace ft::testgen
