// Random-weight GGUF test models for llama, qwen3 and qwen3moe that llama.cpp
// loads (shared/spec/arch/*.md "Tiny test config"), deterministic from a seed.
//
// Besides the model file it can write
//  * the "F32 twin": every weight dequantised (quant::dequantize_row_ref) to F32
//    with its NVFP4 second-level .scale folded into the rows, no .scale tensors —
//    the exact-math reference for llama.cpp;
//  * the "no-scale copy": the model file minus its .scale tensors (must give
//    different logits: proves the scales matter).
//
// Weight statistics (see model_gen.cpp): logits have a spread of order 10, the
// residual branches are scaled ~1/sqrt(n_layer), routers spread tokens over the
// experts. With `scale_spread`, function-preserving magnitude factors (v*a with
// o/a, up*a with down/a per expert, output*a with output_norm/a) make the NVFP4
// second-level scales differ by orders of magnitude between tensors and experts.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "format/ggml_type.h"

namespace ft::testgen {

enum class Arch { kLlama, kQwen3, kQwen3Moe, kGemma4, kQwen35, kQwen35Moe };
std::string_view arch_name(Arch a);
Arch parse_arch(std::string_view s);  // throws ft::Error

// Weight roles whose storage type can be chosen. Norms and rope_freqs are always F32.
enum class Role { kEmbd, kOutput, kAttn, kMlp, kExperts, kRouter };
inline constexpr int kRoleCount = 6;
std::string_view role_name(Role r);
Role parse_role(std::string_view s);  // "embd"/"embedding"/"token_embd", "output", "attn", "mlp", "experts", "router"

struct ModelSpec {
  Arch arch = Arch::kQwen3Moe;
  int64_t n_vocab = 256;  // ignored with bpe_vocab (then = vocab size)
  int64_t n_embd = 128;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 64;
  int64_t n_ff = 256;      // dense FFN width (qwen3moe: feed_forward_length key only)
  int64_t n_expert = 4;    // qwen3moe (llama: >0 makes a Mixtral-style MoE)
  int64_t n_expert_used = 2;
  int64_t n_ff_exp = 64;   // expert width
  int64_t n_ctx_train = 256;
  float rms_eps = 1e-6f;
  float rope_base = 1e6f;
  bool tied_output = false;
  bool rope_freqs = false;  // llama: write rope_freqs.weight {head_dim/2}
  bool bpe_vocab = false;   // byte-level BPE vocab (gpt2/qwen2) instead of model "none"
  int n_merges = 300;
  std::array<GgmlType, kRoleCount> role_type{GgmlType::F32, GgmlType::F32, GgmlType::F32,
                                             GgmlType::F32, GgmlType::F32, GgmlType::F32};
  bool nvfp4_scales = true;  // NVFP4 tensors of roles attn/mlp/experts/output(untied) get .scale
  bool scale_spread = true;  // function-preserving magnitude factors (see above)
  bool router_tie = false;   // MoE: router row 1 = row 0, so experts 0 and 1 always tie exactly
                             // (exercises the top-k tie order of llama.cpp's argsort)
  uint64_t seed = 1;
  // statistics knobs
  float logit_std = 3.0f;     // std of the logits (order-10 spread over the vocab)
  float branch_rel = 1.5f;    // residual-branch RMS relative to the embedding RMS, x 1/sqrt(n_layer)
  float resid_scale = 4.0f;   // RMS of the embeddings / residual stream
  float router_std = 2.5f;    // std of router logits
  std::string name = "ft-testmodel";

  // gemma4 (testgen/gen_gemma4.cpp; head_dim is the global layers', n_expert > 0 makes
  // every layer MoE beside its dense MLP).
  struct Gemma4 {
    int64_t head_dim_swa = 64;
    int64_t n_swa = 8;                  // sliding window
    std::vector<bool> swa_pattern;      // per layer; empty: sliding, global, sliding, ...
    std::vector<int64_t> n_head_kv;     // per layer; empty: n_head_kv everywhere
    std::vector<int64_t> n_ff;          // per layer; empty: n_ff everywhere
    int64_t n_shared_kv = 0;            // the last layers reuse earlier layers' KV
    int64_t n_embd_per_layer = 0;       // per-layer input embeddings (0: none)
    std::vector<int64_t> v_from_k;      // layers written without attn_v (V = K)
    std::vector<int64_t> out_scale;     // layers with a layer_output_scale
    bool merged_gate_up = true;         // ffn_gate_up_exps (the converter's non-NVFP4 form)
    bool write_softcap = true;          // final_logit_softcapping key (else llama.cpp's default 30)
    float softcap = 30.0f;
    int n_merges = 0;                   // > 0: a Gemma-4-style vocab (testgen/gemma4_vocab.h), not "none"
  } g4;

  // qwen35 / qwen35moe (testgen/gen_qwen35.cpp; spec arch/qwen35.md §5).
  struct Qwen35 {
    int64_t full_attn_interval = 2;  // layers 1, 3, ... full attention, the rest Gated DeltaNet
    int64_t rope_dim = 16;           // rope.dimension_count (partial rope); 0: head_dim
    std::array<int32_t, 4> sections{3, 3, 2, 0};
    int64_t d_conv = 4, d_head = 32, n_k_heads = 2, n_v_heads = 4;
    int64_t n_ff_shexp = 128;  // qwen35moe shared expert (spec: 96; NVFP4 rows need multiples of 64)
    bool merged_gate_up_exps = false;  // qwen35moe: ffn_gate_up_exps instead of gate/up
  } q35;

  GgmlType type(Role r) const { return role_type[static_cast<int>(r)]; }
  void set_type(Role r, GgmlType t) { role_type[static_cast<int>(r)] = t; }
};

// Presets: "tiny" (the arch spec's tiny test config), "default" (a few-MB qwen3moe
// with a byte-BPE vocab, the README's default model). Throws on unknown names.
ModelSpec preset(std::string_view name, Arch arch);

// For the tables of test models (tests/oracle, tests/cuda): a preset with a given seed, every
// role in type t, the given roles in type t.
inline ModelSpec preset_seeded(std::string_view name, Arch arch, uint64_t seed) {
  ModelSpec s = preset(name, arch);
  s.seed = seed;
  return s;
}
inline ModelSpec with_all_types(ModelSpec s, GgmlType t) {
  for (auto& r : s.role_type) r = t;
  return s;
}
inline ModelSpec with_types(ModelSpec s, std::initializer_list<Role> roles, GgmlType t) {
  for (Role r : roles) s.set_type(r, t);
  return s;
}

struct GenerateResult {
  int64_t n_tensors = 0;         // in the model file (incl. .scale)
  int64_t n_scale_tensors = 0;
  int64_t file_bytes = 0;
  float min_scale = 0, max_scale = 0;  // over all .scale values (0 when none)
  int64_t n_vocab = 0;
  int32_t eos_id = -1;
};

// Weight parameters of the spec (for progress decisions and reports).
int64_t count_params(const ModelSpec& spec);

// Writes the model (and the twin / no-scale copy when the paths are non-empty).
// `progress`: print one line per tensor to stderr (for big models).
GenerateResult generate_model(const ModelSpec& spec, const std::string& path,
                              const std::string& twin_path = "", const std::string& noscale_path = "",
                              bool progress = false);

}  // namespace ft::testgen
