// ft-testmodel: writes a small random-weight GGUF (llama / qwen3 / qwen3moe) that
// llama.cpp loads, plus optionally its F32 twin and a copy without .scale tensors.
//   ft-testmodel --arch qwen3moe --preset tiny --nvfp4 attn,experts,output --seed 1
//                --out m.gguf --twin m.f32.gguf
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "testgen/model_gen.h"

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find(',', i);
    const std::string part = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!part.empty()) out.push_back(part);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

ft::GgmlType parse_type(const std::string& s) {
  auto t = ft::ggml_type_from_name(s);
  if (!t) ft::fail("unknown tensor type '{}' (expected f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, mxfp4, nvfp4)", s);
  return *t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a random-weight GGUF test model (llama, qwen3, qwen3moe)"};
  std::string arch = "qwen3moe", preset = "tiny", out, twin, noscale, base_type, nvfp4;
  std::vector<std::string> sets;
  uint64_t seed = 1;
  bool no_scales = false, no_spread = false, tied = false, bpe = false, no_rope_freqs = false, progress = false;
  int64_t n_vocab = -1, n_embd = -1, n_layer = -1, n_head = -1, n_head_kv = -1, head_dim = -1, n_ff = -1,
          n_expert = -1, n_expert_used = -1, n_ff_exp = -1, n_ctx = -1;
  app.add_option("--arch", arch, "llama | qwen3 | qwen3moe");
  app.add_option("--preset", preset, "tiny | default (default = a few-MB qwen3moe with a byte-BPE vocab)");
  app.add_option("--out,-o", out, "output GGUF")->required();
  app.add_option("--twin", twin, "also write the F32 twin (dequantised, .scale folded in)");
  app.add_option("--noscale", noscale, "also write a copy without the .scale tensors");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--type", base_type, "storage type of every weight role (f32 bf16 f16 q8_0 q4_0 q4_k q6_k mxfp4 nvfp4)");
  app.add_option("--set", sets, "role=type, e.g. --set experts=mxfp4 (roles: embd output attn mlp experts router)");
  app.add_option("--nvfp4", nvfp4, "comma list of roles stored as NVFP4, e.g. attn,mlp,experts,output,embd");
  app.add_flag("--no-scales", no_scales, "NVFP4 without second-level .scale tensors (s2 = 1)");
  app.add_flag("--no-spread", no_spread, "no function-preserving magnitude factors (scales then differ little)");
  app.add_flag("--tied", tied, "no output.weight (tied to token_embd)");
  app.add_flag("--bpe", bpe, "byte-level BPE vocab (gpt2/qwen2) instead of tokenizer model 'none'");
  app.add_flag("--no-rope-freqs", no_rope_freqs, "llama: no rope_freqs.weight");
  app.add_flag("--progress", progress, "print each tensor as it is generated (automatic above 20M parameters)");
  bool router_tie = false;
  app.add_flag("--router-tie", router_tie, "MoE: experts 0 and 1 get identical router rows (exact ties)");
  app.add_option("--n-vocab", n_vocab);
  app.add_option("--n-embd", n_embd);
  app.add_option("--n-layer", n_layer);
  app.add_option("--n-head", n_head);
  app.add_option("--n-head-kv", n_head_kv);
  app.add_option("--head-dim", head_dim);
  app.add_option("--n-ff", n_ff);
  app.add_option("--n-expert", n_expert);
  app.add_option("--n-expert-used", n_expert_used);
  app.add_option("--n-ff-exp", n_ff_exp);
  app.add_option("--ctx", n_ctx, "context_length key");
  CLI11_PARSE(app, argc, argv);

  try {
    auto spec = ft::testgen::preset(preset, ft::testgen::parse_arch(arch));
    spec.seed = seed;
    if (!base_type.empty())
      for (int r = 0; r < ft::testgen::kRoleCount; ++r) spec.role_type[r] = parse_type(base_type);
    for (const auto& s : sets) {
      const auto eq = s.find('=');
      if (eq == std::string::npos) ft::fail("--set expects role=type, got '{}'", s);
      spec.set_type(ft::testgen::parse_role(s.substr(0, eq)), parse_type(s.substr(eq + 1)));
    }
    for (const auto& r : split_list(nvfp4)) spec.set_type(ft::testgen::parse_role(r), ft::GgmlType::NVFP4);
    if (no_scales) spec.nvfp4_scales = false;
    if (no_spread) spec.scale_spread = false;
    if (tied) spec.tied_output = true;
    if (bpe) spec.bpe_vocab = true;
    if (no_rope_freqs) spec.rope_freqs = false;
    if (router_tie) spec.router_tie = true;
    auto set_if = [](int64_t v, int64_t& dst) {
      if (v >= 0) dst = v;
    };
    set_if(n_vocab, spec.n_vocab);
    set_if(n_embd, spec.n_embd);
    set_if(n_layer, spec.n_layer);
    set_if(n_head, spec.n_head);
    set_if(n_head_kv, spec.n_head_kv);
    set_if(head_dim, spec.head_dim);
    set_if(n_ff, spec.n_ff);
    set_if(n_expert, spec.n_expert);
    set_if(n_expert_used, spec.n_expert_used);
    set_if(n_ff_exp, spec.n_ff_exp);
    set_if(n_ctx, spec.n_ctx_train);
    const int64_t n_params = ft::testgen::count_params(spec);
    if (n_params > 20'000'000) progress = true;
    if (progress) std::fprintf(stderr, "ft-testmodel: %lld parameters\n", static_cast<long long>(n_params));
    const auto r = ft::testgen::generate_model(spec, out, twin, noscale, progress);
    fmt::print("{}: {} tensors ({} .scale, range {:.3g} .. {:.3g}), {} bytes, vocab {}\n", out, r.n_tensors,
               r.n_scale_tensors, r.min_scale, r.max_scale, r.file_bytes, r.n_vocab);
    if (!twin.empty()) fmt::print("{}: F32 twin\n", twin);
    if (!noscale.empty()) fmt::print("{}: copy without .scale tensors\n", noscale);
  } catch (const ft::Error& e) {
    std::fprintf(stderr, "ft-testmodel: %s\n", e.what());
    return 2;
  }
  return 0;
}
