#include "hf/hf_config.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace ft::hf {
namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  return j;
}

std::string json_str(const json& o, const char* key, const std::string& where, const std::string& def) {
  if (!o.is_object()) return def;
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_string()) fail("{}: key {} is {}, expected a string", where, key, it->dump());
  return it->get<std::string>();
}

bool json_flag(const json& o, const char* key, const std::string& where, bool def) {
  if (!o.is_object()) return def;
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return def;
  if (!it->is_boolean()) fail("{}: key {} is {}, expected true/false", where, key, it->dump());
  return it->get<bool>();
}

namespace {

struct Reader {
  const json& j;
  const std::string& path;

  const json* find(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      const auto it = j.find(k);
      if (it != j.end() && !it->is_null()) return &*it;
    }
    return nullptr;
  }
  int64_t integer(std::initializer_list<const char*> keys, std::optional<int64_t> def = std::nullopt) const {
    const json* v = find(keys);
    if (!v) {
      if (def) return *def;
      fail("{}: missing key {}", path, *keys.begin());
    }
    if (!v->is_number_integer()) fail("{}: key {} is {}, expected an integer", path, *keys.begin(), v->dump());
    return v->get<int64_t>();
  }
  double number(std::initializer_list<const char*> keys, double def) const {
    const json* v = find(keys);
    if (!v) return def;
    if (!v->is_number()) fail("{}: key {} is {}, expected a number", path, *keys.begin(), v->dump());
    return v->get<double>();
  }
  bool boolean(const char* key, bool def) const {
    const json* v = find({key});
    if (!v) return def;
    if (!v->is_boolean()) fail("{}: key {} is {}, expected true/false", path, key, v->dump());
    return v->get<bool>();
  }
};

// eos_token_id may be a list (Llama 3.1 instruct): the first entry.
int64_t token_id(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) return (*it)[0].get<int64_t>();
  return -1;
}

QuantScheme read_quant(const std::string& dir, const json& cfg) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  json q = cfg.value("quantization_config", json::object());
  std::string where = cfg_path + " quantization_config";
  std::string algo = json_str(q, "quant_algo", where);
  std::string method = json_str(q, "quant_method", where);
  std::string format = json_str(q, "format", where);
  json groups = q.is_object() ? q.value("config_groups", json::object()) : json::object();
  const fs::path hqc = fs::path(dir) / "hf_quant_config.json";
  if (algo.empty() && fs::exists(hqc)) {
    const json h = read_json(hqc.string());
    const json hq = h.value("quantization", json::object());
    where = hqc.string() + " quantization";
    if (method.empty() && h.contains("producer"))
      method = json_str(h["producer"], "name", hqc.string() + " producer");
    if (hq.is_object()) {
      algo = json_str(hq, "quant_algo", where, algo);
      method = json_str(hq, "quant_method", where, method);
      format = json_str(hq, "format", where, format);
      if (hq.contains("config_groups")) groups = hq["config_groups"];
    }
    if (algo.empty() && hq.is_object() && hq.contains("quantized_layers") && hq["quantized_layers"].is_object()) {
      for (const auto& [k, v] : hq["quantized_layers"].items())
        if (json_str(v, "quant_algo", where + " quantized_layers." + k).ends_with("NVFP4")) algo = "NVFP4";
    }
  }
  if (method == "compressed-tensors") {
    bool nvfp4 = format == "nvfp4-pack-quantized";
    if (format == "mixed-precision" && groups.is_object() && !groups.empty()) {
      nvfp4 = true;
      for (const auto& [k, g] : groups.items())
        if (g.is_object() && json_str(g, "format", where + " config_groups." + k) != "nvfp4-pack-quantized") nvfp4 = false;
    }
    if (!nvfp4)
      fail("{}: compressed-tensors format '{}' is not supported (only nvfp4-pack-quantized)", where, format);
    return QuantScheme::kCompressedNvfp4;
  }
  if (algo == "NVFP4" || algo == "W4A16_NVFP4") return QuantScheme::kModelOptNvfp4;
  if (!algo.empty() || !method.empty())
    fail("{}: quantization quant_method '{}' quant_algo '{}' is not supported (ModelOpt NVFP4, "
         "compressed-tensors nvfp4-pack-quantized)",
         where, method, algo);
  return QuantScheme::kNone;
}

}  // namespace

HfConfig read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(path)) fail("{}: no config.json (is this a Hugging Face checkpoint directory?)", dir);
  json j = read_json(path);
  // Multimodal wrappers keep the language model under text_config.
  if (j.contains("text_config") && j["text_config"].is_object()) {
    json t = j["text_config"];
    for (auto& [k, v] : j.items())
      if (!t.contains(k)) t[k] = v;
    j = t;
  }
  HfConfig c;
  const Reader r{j, path};
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.hf_arch = j["architectures"][0].get<std::string>();
  if (c.hf_arch == "LlamaForCausalLM" || c.hf_arch == "MistralForCausalLM")
    c.arch = "llama";
  else if (c.hf_arch == "Qwen3ForCausalLM")
    c.arch = "qwen3";
  else if (c.hf_arch == "Qwen3MoeForCausalLM")
    c.arch = "qwen3moe";
  else
    fail("{}: architectures[0] '{}' is not supported (LlamaForCausalLM, Qwen3ForCausalLM, "
         "Qwen3MoeForCausalLM)",
         path, c.hf_arch);
  c.n_vocab = r.integer({"vocab_size"});
  c.n_ctx_train = r.integer({"max_position_embeddings"}, 4096);
  c.n_embd = r.integer({"hidden_size"});
  c.n_ff = r.integer({"intermediate_size"}, 0);
  c.n_head = r.integer({"num_attention_heads"});
  c.n_head_kv = r.integer({"num_key_value_heads"}, c.n_head);
  c.n_layer = r.integer({"num_hidden_layers"});
  c.head_dim = r.integer({"head_dim"}, 0);
  c.rms_eps = r.number({"rms_norm_eps"}, 1e-6);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.attention_bias = r.boolean("attention_bias", false);
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_head <= 0 || c.n_layer <= 0 || c.n_head_kv <= 0 ||
      c.n_head % c.n_head_kv != 0)
    fail("{}: bad sizes: vocab_size {}, hidden_size {}, num_attention_heads {}, num_key_value_heads {}, "
         "num_hidden_layers {}",
         path, c.n_vocab, c.n_embd, c.n_head, c.n_head_kv, c.n_layer);
  // Bounds far past any real model (vocabularies ~262 K, widths ~16 K): a size past them is a corrupt file, refused
  // before it sizes a vocabulary or a plan (vocab_size 2^31 - 1 had read_vocab allocate 2^31 strings: bad_alloc).
  const auto bound = [&](const char* key, int64_t v, int64_t hi) {
    if (v < 0 || v > hi) fail("{}: {} {} is out of range (0 to {})", path, key, v, hi);
  };
  bound("vocab_size", c.n_vocab, int64_t{1} << 22);
  bound("hidden_size", c.n_embd, int64_t{1} << 17);
  bound("intermediate_size", c.n_ff, int64_t{1} << 20);
  bound("num_attention_heads", c.n_head, int64_t{1} << 12);
  bound("num_hidden_layers", c.n_layer, int64_t{1} << 12);
  bound("head_dim", c.head_dim, int64_t{1} << 12);
  if (!c.head_dim && c.n_embd % c.n_head != 0)
    fail("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim)", path, c.n_embd,
         c.n_head);
  // RoPE: rope_theta at the top level or in rope_parameters (transformers >= 4.56).
  json rope = j.value("rope_parameters", json::object());
  if (!rope.is_object()) rope = json::object();
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object())
    for (auto& [k, v] : j["rope_scaling"].items()) rope[k] = v;
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) rope["rope_theta"] = j["rope_theta"];
  if (rope.contains("rope_theta") && rope["rope_theta"].is_number()) {
    c.rope_theta = rope["rope_theta"].get<double>();
    c.has_rope_theta = true;
  }
  std::string rt = json_str(rope, "rope_type", path + " rope_scaling", json_str(rope, "type", path + " rope_scaling"));
  if (rt == "default") rt = "";
  c.rope_type = rt;
  if (rope.contains("factor") && rope["factor"].is_number()) c.rope_factor = rope["factor"].get<double>();
  if (rope.contains("original_max_position_embeddings") && rope["original_max_position_embeddings"].is_number_integer())
    c.rope_orig_ctx = rope["original_max_position_embeddings"].get<int64_t>();
  if (rt == "llama3") {
    // Llama 3.1+: per-dimension factors written as rope_freqs.weight (hf/convert.cpp).
    if (c.rope_factor == 0.0) c.rope_factor = 8.0;
    if (!c.rope_orig_ctx) c.rope_orig_ctx = 8192;
    if (rope.contains("low_freq_factor") && rope["low_freq_factor"].is_number())
      c.rope_low_freq_factor = rope["low_freq_factor"].get<double>();
    if (rope.contains("high_freq_factor") && rope["high_freq_factor"].is_number())
      c.rope_high_freq_factor = rope["high_freq_factor"].get<double>();
  }
  if (!rt.empty() && rt != "linear" && rt != "yarn" && !(rt == "llama3" && c.arch == "llama"))
    fail("{}: rope_scaling type '{}' is not supported (linear, yarn; llama3 for llama)", path, rt);
  if (c.arch == "qwen3moe" || j.contains("num_experts") || j.contains("num_local_experts")) {
    c.n_expert = r.integer({"num_experts", "num_local_experts"}, 0);
    c.n_expert_used = r.integer({"num_experts_per_tok"}, 0);
    c.n_ff_exp = r.integer({"moe_intermediate_size"}, c.n_ff);
    c.norm_topk_prob = r.boolean("norm_topk_prob", true);
    bound("num_experts", c.n_expert, int64_t{1} << 16);
    bound("moe_intermediate_size", c.n_ff_exp, int64_t{1} << 20);
    if (c.arch == "llama" && c.n_expert > 0)
      fail("{}: Mixtral-style llama MoE checkpoints are not supported", path);
    if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
      fail("{}: num_experts {} / num_experts_per_tok {} are not a valid MoE", path, c.n_expert, c.n_expert_used);
    // llama.cpp's qwen3moe always renormalises the top-k weights.
    if (!c.norm_topk_prob) fail("{}: norm_topk_prob false is not supported (llama.cpp's qwen3moe renormalises)", path);
    if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() && !j["mlp_only_layers"].empty())
      fail("{}: mlp_only_layers (dense layers in a qwen3moe) are not supported", path);
    if (r.integer({"decoder_sparse_step"}, 1) != 1) fail("{}: decoder_sparse_step != 1 is not supported", path);
  } else if (c.n_ff <= 0) {
    fail("{}: missing key intermediate_size", path);
  }
  c.bos_token_id = token_id(j, "bos_token_id");
  c.eos_token_id = token_id(j, "eos_token_id");
  c.pad_token_id = token_id(j, "pad_token_id");
  c.quant = read_quant(dir, j);
  return c;
}

}  // namespace ft::hf
