#include "testgen/model_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "testgen/bpe_vocab.h"
#include "testgen/gen_qwen35.h"
#include "testgen/gen_gemma4.h"
#include "testgen/rng.h"
#include "testgen/tensor_gen.h"

namespace ft::testgen {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen3: return "qwen3";
    case Arch::kQwen3Moe: return "qwen3moe";
    case Arch::kQwen35: return "qwen35";
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kGemma4: return "gemma4";
  }
  return "?";
}

Arch parse_arch(std::string_view s) {
  if (s == "llama") return Arch::kLlama;
  if (s == "qwen3") return Arch::kQwen3;
  if (s == "qwen3moe") return Arch::kQwen3Moe;
  if (s == "qwen35") return Arch::kQwen35;
  if (s == "qwen35moe") return Arch::kQwen35Moe;
  if (s == "gemma4") return Arch::kGemma4;
  fail("unknown test-model architecture '{}' (expected llama, qwen3, qwen3moe, gemma4, qwen35 or qwen35moe)", s);
}

std::string_view role_name(Role r) {
  static constexpr std::string_view kNames[kRoleCount] = {"embd", "output", "attn", "mlp", "experts", "router"};
  return kNames[static_cast<int>(r)];
}

Role parse_role(std::string_view s) {
  if (s == "embd" || s == "embedding" || s == "token_embd") return Role::kEmbd;
  if (s == "output") return Role::kOutput;
  if (s == "attn" || s == "attention") return Role::kAttn;
  if (s == "mlp" || s == "ffn") return Role::kMlp;
  if (s == "experts" || s == "exps") return Role::kExperts;
  if (s == "router" || s == "gate_inp") return Role::kRouter;
  fail("unknown weight role '{}' (expected embd, output, attn, mlp, experts or router)", s);
}

ModelSpec preset(std::string_view name, Arch arch) {
  ModelSpec s;
  s.arch = arch;
  if (name != "tiny" && name != "default") fail("unknown preset '{}' (expected tiny or default)", name);
  if (name == "default" && arch != Arch::kQwen3Moe) fail("preset 'default' is a qwen3moe model (got --arch {})", arch_name(arch));
  switch (arch) {
    case Arch::kLlama:
      s.head_dim = 32;
      s.rms_eps = 1e-5f;
      s.rope_base = 500000.0f;
      s.rope_freqs = true;
      s.n_expert = s.n_expert_used = 0;
      s.n_ff = 256;
      break;
    case Arch::kQwen3:
      s.n_expert = s.n_expert_used = 0;
      s.n_ff = 256;
      break;
    case Arch::kQwen3Moe:
      s.n_ff = 128;
      break;
    case Arch::kGemma4:  // spec gemma4.md §6 config A (MoE); n_expert = 0 makes it dense
      s.head_dim = 128;
      s.g4.head_dim_swa = 64;
      s.g4.n_head_kv = {2, 1, 2, 1};
      s.n_layer = 4;
      s.n_ff = 128;
      s.g4.v_from_k = {1};
      s.g4.out_scale = {0, 2};
      break;
    case Arch::kQwen35:  // spec qwen35.md §5
      s.n_layer = 4;
      s.rope_base = 1e7f;
      s.n_expert = s.n_expert_used = 0;
      s.n_ff = 256;
      break;
    case Arch::kQwen35Moe:  // spec qwen35moe.md §5
      s.n_layer = 4;
      s.rope_base = 1e7f;
      s.n_ff = 128;
      break;
  }
  if (name == "default") {
    s.n_embd = 256;
    s.n_layer = 4;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 256;
    s.n_ff = 512;
    s.n_ctx_train = 4096;
    s.bpe_vocab = true;
    s.n_merges = 400;
    s.set_type(Role::kEmbd, GgmlType::BF16);
    s.set_type(Role::kOutput, GgmlType::BF16);
    s.set_type(Role::kAttn, GgmlType::NVFP4);
    s.set_type(Role::kExperts, GgmlType::NVFP4);
    s.name = "ft-default-qwen3moe";
  }
  return s;
}

int64_t count_params(const ModelSpec& s) {
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  const int64_t vocab = s.bpe_vocab ? 256 + s.n_merges + 3 : s.n_vocab;
  const int64_t attn = s.n_embd * (2 * q_dim + 2 * kv_dim);
  const int64_t ffn = s.n_expert > 0 ? s.n_expert * 3 * s.n_embd * s.n_ff_exp + s.n_embd * s.n_expert : 3 * s.n_embd * s.n_ff;
  return vocab * s.n_embd * (s.tied_output ? 1 : 2) + s.n_layer * (attn + ffn);
}

namespace {

float pow10(float e) { return std::pow(10.0f, e); }

void validate(const ModelSpec& s) {
  auto need = [](bool ok, const char* what) {
    if (!ok) fail("testgen: invalid model spec: {}", what);
  };
  need(s.n_embd > 0 && s.n_layer > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0, "dims must be positive");
  need(s.n_head % s.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
  need(s.head_dim % 2 == 0, "head_dim must be even");
  need(s.arch != Arch::kQwen3Moe || (s.n_expert > 0 && s.n_expert_used > 0), "qwen3moe needs n_expert > 0 and n_expert_used > 0");
  need(s.n_expert_used <= s.n_expert, "n_expert_used must be <= n_expert");
  need(s.arch != Arch::kQwen35Moe || (s.n_expert > 0 && s.n_expert_used > 0), "qwen35moe needs n_expert > 0 and n_expert_used > 0");
  need(s.arch != Arch::kQwen35 || s.n_expert == 0, "qwen35 is dense (n_expert must be 0)");
  need(s.arch != Arch::kQwen3 || s.n_expert == 0, "qwen3 is dense (n_expert must be 0)");
}

uint32_t file_type_of(const ModelSpec& s) {
  for (int r = 0; r < kRoleCount; ++r)
    if (s.role_type[r] == GgmlType::NVFP4) return 39;  // MOSTLY_NVFP4
  for (int r = 0; r < kRoleCount; ++r)
    if (s.role_type[r] == GgmlType::MXFP4) return 38;  // MOSTLY_MXFP4_MOE
  switch (s.type(Role::kAttn)) {
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 15;
    case GgmlType::Q6_K: return 18;
    case GgmlType::BF16: return 32;
    default: return 0;
  }
}

const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

GenerateResult generate_model(const ModelSpec& spec, const std::string& path, const std::string& twin_path,
                              const std::string& noscale_path, bool progress) {
  validate(spec);
  if (spec.arch == Arch::kGemma4) return generate_gemma4(spec, path, twin_path, noscale_path, progress);
  const std::string A(arch_name(spec.arch));
  const bool moe = spec.n_expert > 0;
  const int64_t n_embd = spec.n_embd, hd = spec.head_dim;
  const int64_t q_dim = spec.n_head * hd, kv_dim = spec.n_head_kv * hd;

  BpeVocab vocab;
  int64_t n_vocab = spec.n_vocab;
  if (spec.bpe_vocab) {
    vocab = build_byte_bpe_vocab(spec.n_merges);
    n_vocab = static_cast<int64_t>(vocab.tokens.size());
  }

  gguf::Writer w;
  w.set_string("general.architecture", A);
  w.set_string("general.name", spec.name);
  w.set_u32("general.file_type", file_type_of(spec));
  w.set_u32("general.quantization_version", 2);
  auto key = [&](const char* k) { return A + "." + k; };
  w.set_u32(key("context_length"), static_cast<uint32_t>(spec.n_ctx_train));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(n_embd));
  w.set_u32(key("block_count"), static_cast<uint32_t>(spec.n_layer));
  const int64_t ff_key = spec.arch == Arch::kLlama && moe ? spec.n_ff_exp : spec.n_ff;
  w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(ff_key));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(spec.n_head));
  w.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(spec.n_head_kv));
  w.set_u32(key("attention.key_length"), static_cast<uint32_t>(hd));
  w.set_u32(key("attention.value_length"), static_cast<uint32_t>(hd));
  w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(hd));
  w.set_f32(key("attention.layer_norm_rms_epsilon"), spec.rms_eps);
  w.set_f32(key("rope.freq_base"), spec.rope_base);
  if (moe) {
    w.set_u32(key("expert_count"), static_cast<uint32_t>(spec.n_expert));
    w.set_u32(key("expert_used_count"), static_cast<uint32_t>(spec.n_expert_used));
    if (spec.arch == Arch::kQwen3Moe) w.set_u32(key("expert_feed_forward_length"), static_cast<uint32_t>(spec.n_ff_exp));
  }
  if (is_qwen35(spec.arch)) write_qwen35_keys(spec, w);
  if (spec.bpe_vocab) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", vocab.token_types);
    w.set_string_array("tokenizer.ggml.merges", vocab.merges);
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos_id));
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos_id));
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(vocab.pad_id));
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_string("tokenizer.chat_template", kChatTemplate);
  } else {
    w.set_string("tokenizer.ggml.model", "none");
    w.set_u32(key("vocab_size"), static_cast<uint32_t>(n_vocab));
  }

  // ---- weights ----------------------------------------------------------------
  const uint64_t seed = spec.seed;
  Rng frng(Rng::mix(seed, hash_name("spread-factors")));
  auto spread = [&](float lo, float hi) { return spec.scale_spread ? pow10(frng.uniform(lo, hi)) : 1.0f; };
  const float E = spec.resid_scale;
  // Tied output: logits = token_embd . normed(x), so the last token's own embedding
  // (self-similarity ~ n_embd vs ~sqrt(n_embd) for other rows) wins every step and greedy
  // decoding repeats one token unless the branches dominate the residual. Measured on the
  // tiny configs (3 archs x 3 seeds, distinct tokens in 32): boost 5.7 -> 1..4,
  // 3.5*sqrt(n_embd) = 40 -> 15..26.
  const float tied_boost = spec.tied_output ? 3.5f * std::sqrt(static_cast<float>(n_embd)) : 1.0f;
  const float r_branch = tied_boost * spec.branch_rel * E / std::sqrt(static_cast<float>(spec.n_layer));
  const float sd_in = 1.0f / std::sqrt(static_cast<float>(n_embd));  // input projections: outputs of RMS ~1

  TensorGen b(spec, progress, /*omit_unit_scales=*/true);
  b.weight("token_embd.weight", n_embd, n_vocab, 1, Role::kEmbd, E, {}, false);
  if (spec.arch == Arch::kLlama && spec.rope_freqs) {
    std::vector<float> ff(static_cast<size_t>(hd / 2));
    for (size_t i = 0; i < ff.size(); ++i) {
      const float t = ff.size() > 1 ? static_cast<float>(i) / static_cast<float>(ff.size() - 1) : 0.0f;
      ff[i] = t < 1.0f / 3 ? 1.0f : t > 2.0f / 3 ? 8.0f : 1.0f + 7.0f * (t - 1.0f / 3) * 3.0f;
    }
    b.f32("rope_freqs.weight", {hd / 2}, ff);
  }
  {
    const float a_out = spec.tied_output ? 1.0f : spread(-1.0f, 1.0f);
    // Tied: logits = E_rows . normed; scale the final norm so that their std is logit_std.
    const float norm_mul = spec.tied_output ? spec.logit_std / (E * std::sqrt(static_cast<float>(n_embd))) : 1.0f / a_out;
    b.f32("output_norm.weight", {n_embd}, uniform_vec(seed, "output_norm", n_embd, 0.8f, 1.2f, norm_mul));
    if (!spec.tied_output)
      b.weight("output.weight", n_embd, n_vocab, 1, Role::kOutput, spec.logit_std * sd_in, {a_out}, true);
  }
  const LayerStats qwen35_stats{spread, r_branch, sd_in};
  for (int64_t il = 0; il < spec.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    if (is_qwen35(spec.arch)) {
      add_qwen35_layer(spec, il, b, qwen35_stats);
      continue;
    }
    b.f32(p + "attn_norm.weight", {n_embd}, uniform_vec(seed, p + "attn_norm", n_embd, 0.8f, 1.2f));
    const float a_q = spread(-1, 1), a_k = spec.arch == Arch::kLlama ? 1.0f / a_q : spread(-1, 1);
    const float a_v = spread(-1, 1.5f);
    b.weight(p + "attn_q.weight", n_embd, q_dim, 1, Role::kAttn, sd_in, {a_q}, true);
    b.weight(p + "attn_k.weight", n_embd, kv_dim, 1, Role::kAttn, sd_in, {a_k}, true);
    b.weight(p + "attn_v.weight", n_embd, kv_dim, 1, Role::kAttn, sd_in, {a_v}, true);
    b.weight(p + "attn_output.weight", q_dim, n_embd, 1, Role::kAttn,
                 r_branch / std::sqrt(static_cast<float>(q_dim)), {1.0f / a_v}, true);
    if (spec.arch != Arch::kLlama) {
      b.f32(p + "attn_q_norm.weight", {hd}, uniform_vec(seed, p + "attn_q_norm", hd, 0.5f, 1.5f));
      b.f32(p + "attn_k_norm.weight", {hd}, uniform_vec(seed, p + "attn_k_norm", hd, 0.5f, 1.5f));
    }
    b.f32(p + "ffn_norm.weight", {n_embd}, uniform_vec(seed, p + "ffn_norm", n_embd, 0.8f, 1.2f));
    // silu(g)*u of unit-RMS g, u has RMS ~0.6.
    if (!moe) {
      const float a_up = spread(-1, 1.5f), a_gate = spread(-0.5f, 0.5f);
      b.weight(p + "ffn_gate.weight", n_embd, spec.n_ff, 1, Role::kMlp, sd_in, {a_gate}, true);
      b.weight(p + "ffn_up.weight", n_embd, spec.n_ff, 1, Role::kMlp, sd_in, {a_up}, true);
      b.weight(p + "ffn_down.weight", spec.n_ff, n_embd, 1, Role::kMlp,
                   r_branch / (0.6f * std::sqrt(static_cast<float>(spec.n_ff))), {1.0f / a_up}, true);
    } else {
      const int64_t ne_ = spec.n_expert, nf = spec.n_ff_exp;
      auto tie = [&](std::vector<float>& m) { std::copy(m.begin(), m.begin() + n_embd, m.begin() + n_embd); };
      b.weight(p + "ffn_gate_inp.weight", n_embd, ne_, 1, Role::kRouter, spec.router_std * sd_in, {}, false,
                   spec.router_tie && ne_ >= 2 ? std::function<void(std::vector<float>&)>(tie) : nullptr);
      std::vector<float> f_up(static_cast<size_t>(ne_)), f_down(f_up.size()), f_gate(f_up.size());
      for (size_t e = 0; e < f_up.size(); ++e) {
        f_up[e] = spread(-1.5f, 1.5f);
        f_down[e] = 1.0f / f_up[e];
        f_gate[e] = spread(-0.5f, 0.5f);
      }
      b.weight(p + "ffn_gate_exps.weight", n_embd, nf, ne_, Role::kExperts, sd_in, f_gate, true);
      b.weight(p + "ffn_up_exps.weight", n_embd, nf, ne_, Role::kExperts, sd_in, f_up, true);
      b.weight(p + "ffn_down_exps.weight", nf, n_embd, ne_, Role::kExperts,
                   r_branch / (0.6f * std::sqrt(static_cast<float>(nf))), f_down, true);
    }
  }

  // ---- write the three files ------------------------------------------------------
  GenerateResult res;
  res.n_vocab = n_vocab;
  res.eos_id = vocab.eos_id;
  write_model_files(w, b.tensors(), path, twin_path, noscale_path, res);
  return res;
}

}  // namespace ft::testgen
