#include "model/check_scales.h"

#include <array>
#include <string_view>

#include "core/error.h"

namespace ft::model {
namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// The part of a tensor base name after "blk.N." (or the whole name for global tensors).
std::string_view role_of(std::string_view base) {
  if (base.rfind("blk.", 0) == 0) {
    const size_t dot = base.find('.', 4);
    if (dot != std::string_view::npos) return base.substr(dot + 1);
  }
  return base;
}

// Roles for which llama.cpp's generic pass loads a `.scale` (src/llama-model.cpp).
constexpr std::array<std::string_view, 19> kDenseRoles = {
    "attn_q",         "attn_k",         "attn_v",          "attn_output",   "attn_qkv",
    "attn_gate",      "ffn_gate",       "ffn_up",          "ffn_down",      "ffn_gate_shexp",
    "ffn_up_shexp",   "ffn_down_shexp", "ssm_in",          "ssm_out",       "ssm_alpha",
    "ssm_beta",       "nextn.eh_proj",  "nextn.shared_head_head", "output"};
constexpr std::array<std::string_view, 3> kExpertRoles = {"ffn_gate_exps", "ffn_up_exps",
                                                          "ffn_down_exps"};

bool is_dense_role(std::string_view r) {
  for (auto x : kDenseRoles)
    if (x == r) return true;
  return false;
}
bool is_expert_role(std::string_view r) {
  for (auto x : kExpertRoles)
    if (x == r) return true;
  return false;
}

// Scale tensors an architecture defines itself (not NVFP4 second-level scales).
bool arch_owned(std::string_view arch, std::string_view role) {
  if (arch == "gemma4") return role == "ffn_gate_inp" || role == "ffn_down_exps";
  return false;
}

}  // namespace

ScaleVerdict check_scales_verdict(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture").value_or("");
  for (const auto& t : f.tensors()) {
    std::string_view name = t.name;
    std::string_view suffix;
    if (ends_with(name, ".input_scale"))
      suffix = ".input_scale";
    else if (ends_with(name, ".scale"))
      suffix = ".scale";
    else
      continue;
    const std::string base(name.substr(0, name.size() - suffix.size()));
    const std::string_view role = role_of(base);
    const gguf::TensorInfo* w = f.find_tensor(base + ".weight");
    auto bad = [&](std::string msg) { return ScaleVerdict{false, "tensor '" + t.name + "': " + msg}; };

    if (suffix == ".scale" && arch_owned(arch, role)) continue;
    if (role == "ffn_gate_up_exps")
      return bad("per-expert scales on a merged ffn_gate_up_exps tensor are not supported "
                 "(llama.cpp does not load them either); write separate ffn_gate_exps/ffn_up_exps");
    if (!is_dense_role(role) && !is_expert_role(role))
      return bad(fmt::format("no scale is defined for '{}' tensors (llama.cpp would refuse the file)",
                             role));
    if (!w) {
      if (role == "output" && f.find_tensor("token_embd.weight"))
        return bad("output is tied to token_embd (no output.weight), so it cannot carry a scale");
      return bad(fmt::format("scale without a weight: '{}.weight' is missing", base));
    }
    if (w->type != GgmlType::NVFP4)
      return bad(fmt::format("second-level scales are accepted only next to an NVFP4 weight, "
                             "but '{}' is {}", w->name, type_name(w->type)));
    if (t.type != GgmlType::F32)
      return bad(fmt::format("scale tensors must be f32, got {}", type_name(t.type)));
    const int64_t want = is_expert_role(role) ? w->ne[2] : 1;
    if (t.n_elements() != want || t.n_dims > 1)
      return bad(fmt::format("expected shape [{}] ({}), got {}", want,
                             is_expert_role(role) ? "one value per expert" : "one value per tensor",
                             t.shape_string()));
  }
  return {};
}

void check_scales(const gguf::File& f) {
  const auto v = check_scales_verdict(f);
  if (!v.ok) fail("{}: {}", f.path(), v.message);
}

}  // namespace ft::model
