// config.json (+ hf_quant_config.json) of a Hugging Face checkpoint -> the hyper-parameters
// the GGUF converter writes for llama / qwen3 / qwen3moe, and the quantization scheme.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ft::hf {

enum class QuantScheme {
  kNone,             // float weights
  kModelOptNvfp4,    // weight (u8 packed), weight_scale (E4M3), weight_scale_2 (f32)
  kCompressedNvfp4,  // weight_packed, weight_scale, weight_global_scale (= 1 / weight_scale_2)
};

struct HfConfig {
  std::string arch;      // GGUF architecture: llama, qwen3, qwen3moe
  std::string hf_arch;   // architectures[0]
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_layer = 0;
  int64_t head_dim = 0;        // 0: config has none (n_embd / n_head)
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;        // moe_intermediate_size
  bool norm_topk_prob = true;
  double rope_theta = 10000.0;
  bool has_rope_theta = false;
  std::string rope_type;       // "", "linear", "yarn", ...
  double rope_factor = 0.0;
  int64_t rope_orig_ctx = 0;
  double rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;  // llama3 rope type
  double rms_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  int64_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;
  QuantScheme quant = QuantScheme::kNone;

  int64_t head_dim_or_default() const { return head_dim ? head_dim : n_embd / n_head; }
};

// Reads DIR/config.json (and DIR/hf_quant_config.json when present). Throws ft::Error
// naming the file and key for unsupported architectures, missing keys and
// quantization configs other than ModelOpt / compressed-tensors NVFP4.
HfConfig read_config(const std::string& dir);

// Reads a JSON file; throws naming the file when it is missing or not JSON.
nlohmann::json read_json(const std::string& path);

// Typed reads of a field of a checkpoint's JSON (`where` names the file and the object, e.g. "DIR/config.json
// quantization_config"): `def` when `o` is not an object or the key is absent or null, else the value must have
// the type -- an ft::Error naming where and the key, where json's value(key, def) throws its own type_error.
std::string json_str(const nlohmann::json& o, const char* key, const std::string& where, const std::string& def = "");
bool json_flag(const nlohmann::json& o, const char* key, const std::string& where, bool def);

}  // namespace ft::hf
