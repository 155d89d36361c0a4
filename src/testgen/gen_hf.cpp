#include "testgen/gen_hf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fp16.h"
#include "format/gguf.h"
#include "hf/hf_tokenizer.h"
#include "hf/nvfp4_pack.h"
#include "hf/safetensors_writer.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace ft::testgen {
namespace fs = std::filesystem;
using hf::Dtype;
using hf::StOut;
using nlohmann::ordered_json;

namespace {

const char* kQwenTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  if (!f || !f.write(s.data(), static_cast<std::streamsize>(s.size()))) fail("{}: cannot write", p.string());
}

// GGUF row d <- HF row: the inverse of the converter's permute (hf/convert.cpp).
int64_t hf_row_of_gguf_row(int64_t d, int64_t rows, int64_t n_heads) {
  const int64_t hd = rows / n_heads;
  const int64_t h = d / hd, r = d % hd, i = r / 2, j = r % 2;
  return h * hd + j * (hd / 2) + i;
}

std::vector<float> tensor_floats(const gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  quant::dequantize_row_ref(t.type, t.data, v.data(), t.n_elements());
  return v;
}

std::vector<uint8_t> bf16_bytes(const float* x, int64_t n) {
  std::vector<uint8_t> b(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f32_to_bf16(x[i]);
    std::memcpy(&b[static_cast<size_t>(2 * i)], &h, 2);
  }
  return b;
}

std::vector<uint8_t> f32_bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

struct Emitter {
  const HfFixture& f;
  std::vector<StOut> out;

  // A projection [rows, k] (GGUF row order) under HF base name `base`.
  void linear(const std::string& base, const float* w, int64_t rows, int64_t k, int64_t perm_heads,
              bool quantise, bool unit_scale) {
    std::vector<float> hfw(static_cast<size_t>(rows * k));
    for (int64_t d = 0; d < rows; ++d) {
      const int64_t s = perm_heads ? hf_row_of_gguf_row(d, rows, perm_heads) : d;
      std::memcpy(&hfw[static_cast<size_t>(s * k)], w + d * k, static_cast<size_t>(k) * 4);
    }
    if (!quantise || f.format == HfFormat::kBF16) {
      out.push_back({base + ".weight", Dtype::kBF16, {rows, k}, bf16_bytes(hfw.data(), rows * k)});
      return;
    }
    // Row-wise quantisation with one per-tensor scale commutes with the row permutation.
    const float s2 = unit_scale ? 1.0f : quant::nvfp4_tensor_scale(hfw.data(), rows * k);
    const std::vector<uint8_t> blocks = quant::quantize_rows_ref(GgmlType::NVFP4, hfw.data(), rows, k, s2);
    std::vector<uint8_t> packed(static_cast<size_t>(rows * k / 2)), scale(static_cast<size_t>(rows * k / 16));
    hf::nvfp4_unpack_to_modelopt(blocks.data(), rows, k, packed.data(), scale.data());
    const bool ct = f.format == HfFormat::kCompressed;
    out.push_back({base + (ct ? ".weight_packed" : ".weight"), Dtype::kU8, {rows, k / 2}, packed});
    out.push_back({base + ".weight_scale", Dtype::kF8E4M3, {rows, k / 16}, scale});
    if (!unit_scale) {
      out.push_back(ct ? StOut{base + ".weight_global_scale", Dtype::kF32, {1}, f32_bytes(1.0f / s2)}
                       : StOut{base + ".weight_scale_2", Dtype::kF32, {}, f32_bytes(s2)});
      out.push_back(ct ? StOut{base + ".input_global_scale", Dtype::kF32, {1}, f32_bytes(1.0f / 0.05f)}
                       : StOut{base + ".input_scale", Dtype::kF32, {}, f32_bytes(0.05f)});
    }
  }
  void floats(const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
    out.push_back({name, Dtype::kBF16, std::move(shape), bf16_bytes(v.data(), static_cast<int64_t>(v.size()))});
  }
};

ordered_json tokenizer_json(const gguf::File& g, bool pairs, const char* regex) {
  const auto tokens = *g.get_string_array("tokenizer.ggml.tokens");
  const auto types = *g.get_int_array("tokenizer.ggml.token_type");
  const auto merges = *g.get_string_array("tokenizer.ggml.merges");
  ordered_json added = ordered_json::array(), vocab = ordered_json::object(), m = ordered_json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 3)
      added.push_back({{"id", i}, {"content", tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
    else
      vocab[tokens[i]] = i;
  }
  for (const auto& s : merges) {
    const size_t sp = s.find(' ');
    if (pairs)
      m.push_back({s.substr(0, sp), s.substr(sp + 1)});
    else
      m.push_back(s);
  }
  ordered_json split = {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  ordered_json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, bl}}};
  j["post_processor"] = bl;
  j["decoder"] = bl;
  j["model"] = {{"type", "BPE"},          {"dropout", nullptr},       {"unk_token", nullptr},
                {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false},   {"vocab", vocab},
                {"merges", m}};
  return j;
}

}  // namespace

HfFixture hf_fixture(Arch arch, HfFormat format, uint64_t seed) {
  HfFixture f;
  f.model = preset("tiny", arch);
  f.model.seed = seed;
  f.format = format;
  return f;
}

HfFixtureResult generate_hf(const HfFixture& fx, const std::string& dir, const std::string& source_gguf) {
  ModelSpec spec = fx.model;
  if (spec.arch != Arch::kLlama && spec.arch != Arch::kQwen3 && spec.arch != Arch::kQwen3Moe)
    fail("HF fixtures are made for llama, qwen3 and qwen3moe, not {}", arch_name(spec.arch));
  spec.bpe_vocab = true;
  spec.rope_freqs = false;
  for (auto& t : spec.role_type) t = GgmlType::BF16;
  generate_model(spec, source_gguf);
  const auto g = gguf::File::open(source_gguf);
  const bool llama = spec.arch == Arch::kLlama, moe = spec.arch == Arch::kQwen3Moe;
  const int64_t n_vocab = static_cast<int64_t>(g->get_string_array("tokenizer.ggml.tokens")->size());
  const int64_t E = spec.n_expert;

  Emitter em{fx, {}};
  auto T = [&](const std::string& n) -> const gguf::TensorInfo& {
    const gguf::TensorInfo* t = g->find_tensor(n);
    if (!t) fail("{}: generator model lacks {}", source_gguf, n);
    return *t;
  };
  auto blk = [](int64_t il, const char* s) { return "blk." + std::to_string(il) + "." + s; };
  em.floats("model.embed_tokens.weight", tensor_floats(T("token_embd.weight")), {n_vocab, spec.n_embd});
  for (int64_t il = 0; il < spec.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    em.floats(p + "input_layernorm.weight", tensor_floats(T(blk(il, "attn_norm.weight"))), {spec.n_embd});
    const struct {
      const char* g;
      const char* h;
      int64_t perm;
    } attn[] = {{"attn_q.weight", "self_attn.q_proj", llama ? spec.n_head : 0},
                {"attn_k.weight", "self_attn.k_proj", llama ? spec.n_head_kv : 0},
                {"attn_v.weight", "self_attn.v_proj", 0},
                {"attn_output.weight", "self_attn.o_proj", 0}};
    for (const auto& a : attn) {
      const auto& t = T(blk(il, a.g));
      const auto w = tensor_floats(t);
      em.linear(p + a.h, w.data(), t.ne[1], t.ne[0], a.perm, true,
                fx.unit_scale_v0 && il == 0 && std::strcmp(a.h, "self_attn.v_proj") == 0);
    }
    if (!llama) {
      em.floats(p + "self_attn.q_norm.weight", tensor_floats(T(blk(il, "attn_q_norm.weight"))), {spec.head_dim});
      em.floats(p + "self_attn.k_norm.weight", tensor_floats(T(blk(il, "attn_k_norm.weight"))), {spec.head_dim});
    }
    em.floats(p + "post_attention_layernorm.weight", tensor_floats(T(blk(il, "ffn_norm.weight"))), {spec.n_embd});
    if (moe) {
      em.floats(p + "mlp.gate.weight", tensor_floats(T(blk(il, "ffn_gate_inp.weight"))), {E, spec.n_embd});
      for (const char* role : {"gate", "up", "down"}) {
        const auto& t = T(blk(il, (std::string("ffn_") + role + "_exps.weight").c_str()));
        const auto w = tensor_floats(t);
        const int64_t rows = t.ne[1], k = t.ne[0];
        for (int64_t e = 0; e < E; ++e)
          em.linear(p + "mlp.experts." + std::to_string(e) + "." + role + "_proj", w.data() + e * rows * k, rows, k,
                    0, true, false);
      }
    } else {
      for (const char* role : {"gate", "up", "down"}) {
        const auto& t = T(blk(il, (std::string("ffn_") + role + ".weight").c_str()));
        const auto w = tensor_floats(t);
        em.linear(p + "mlp." + role + "_proj", w.data(), t.ne[1], t.ne[0], 0, true, false);
      }
    }
  }
  em.floats("model.norm.weight", tensor_floats(T("output_norm.weight")), {spec.n_embd});
  if (const gguf::TensorInfo* o = g->find_tensor("output.weight")) em.floats("lm_head.weight", tensor_floats(*o), {n_vocab, spec.n_embd});

  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path d(dir);
  if (fx.sharded) {
    const size_t half = em.out.size() / 2;
    const std::vector<StOut> a(em.out.begin(), em.out.begin() + static_cast<std::ptrdiff_t>(half));
    const std::vector<StOut> b(em.out.begin() + static_cast<std::ptrdiff_t>(half), em.out.end());
    const char* n1 = "model-00001-of-00002.safetensors";
    const char* n2 = "model-00002-of-00002.safetensors";
    hf::write_safetensors((d / n1).string(), a);
    hf::write_safetensors((d / n2).string(), b);
    ordered_json wm = ordered_json::object();
    for (const auto& t : a) wm[t.name] = n1;
    for (const auto& t : b) wm[t.name] = n2;
    write_text(d / "model.safetensors.index.json", ordered_json{{"metadata", {{"total_size", 0}}}, {"weight_map", wm}}.dump(2));
  } else {
    hf::write_safetensors((d / "model.safetensors").string(), em.out);
  }

  const int64_t bos = static_cast<int64_t>(*g->get_uint("tokenizer.ggml.bos_token_id"));
  const int64_t eos = static_cast<int64_t>(*g->get_uint("tokenizer.ggml.eos_token_id"));
  ordered_json cfg;
  cfg["architectures"] = {llama ? "LlamaForCausalLM" : moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  cfg["model_type"] = llama ? "llama" : moe ? "qwen3_moe" : "qwen3";
  cfg["attention_bias"] = false;
  cfg["bos_token_id"] = bos;
  cfg["eos_token_id"] = eos;
  cfg["head_dim"] = spec.head_dim;
  cfg["hidden_act"] = "silu";
  cfg["hidden_size"] = spec.n_embd;
  cfg["intermediate_size"] = spec.n_ff;
  cfg["max_position_embeddings"] = spec.n_ctx_train;
  if (moe) {
    cfg["decoder_sparse_step"] = 1;
    cfg["mlp_only_layers"] = ordered_json::array();
    cfg["moe_intermediate_size"] = spec.n_ff_exp;
    cfg["norm_topk_prob"] = true;
    cfg["num_experts"] = E;
    cfg["num_experts_per_tok"] = spec.n_expert_used;
  }
  cfg["num_attention_heads"] = spec.n_head;
  cfg["num_hidden_layers"] = spec.n_layer;
  cfg["num_key_value_heads"] = spec.n_head_kv;
  cfg["rms_norm_eps"] = spec.rms_eps;
  if (fx.llama3_rope && llama)
    cfg["rope_scaling"] = {{"factor", 8.0},
                           {"high_freq_factor", 4.0},
                           {"low_freq_factor", 1.0},
                           {"original_max_position_embeddings", 64},
                           {"rope_type", "llama3"}};
  else
    cfg["rope_scaling"] = nullptr;
  cfg["rope_theta"] = spec.rope_base;
  cfg["tie_word_embeddings"] = g->find_tensor("output.weight") == nullptr;
  cfg["torch_dtype"] = "bfloat16";
  cfg["vocab_size"] = n_vocab;
  if (fx.format == HfFormat::kCompressed)
    cfg["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "nvfp4-pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"format", "nvfp4-pack-quantized"},
            {"targets", {"Linear"}},
            {"weights", {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}}}}}}},
        {"ignore", {"lm_head"}}};
  write_text(d / "config.json", cfg.dump(2));
  if (fx.format == HfFormat::kModelOpt)
    write_text(d / "hf_quant_config.json",
               ordered_json{{"producer", {{"name", "modelopt"}, {"version", "0.29.0"}}},
                            {"quantization",
                             {{"quant_algo", "NVFP4"},
                              {"kv_cache_quant_algo", nullptr},
                              {"group_size", 16},
                              {"exclude_modules", {"lm_head"}}}}}
                   .dump(2));
  write_text(d / "tokenizer.json",
             tokenizer_json(*g, fx.merges_as_pairs, llama ? hf::kLlama3Regex : hf::kQwen2Regex).dump(2));
  const auto tokens = *g->get_string_array("tokenizer.ggml.tokens");
  ordered_json tc;
  tc["add_prefix_space"] = false;
  tc["bos_token"] = nullptr;
  tc["chat_template"] = kQwenTemplate;
  tc["clean_up_tokenization_spaces"] = false;
  tc["eos_token"] = tokens[static_cast<size_t>(eos)];
  tc["errors"] = "replace";
  tc["model_max_length"] = spec.n_ctx_train;
  tc["pad_token"] = tokens[static_cast<size_t>(*g->get_uint("tokenizer.ggml.padding_token_id"))];
  tc["split_special_tokens"] = false;
  tc["tokenizer_class"] = "Qwen2Tokenizer";
  tc["unk_token"] = nullptr;
  write_text(d / "tokenizer_config.json", tc.dump(2));
  write_text(d / "generation_config.json", ordered_json{{"bos_token_id", bos}, {"eos_token_id", eos}}.dump(2));

  HfFixtureResult r;
  r.n_vocab = n_vocab;
  r.n_hf_tensors = static_cast<int64_t>(em.out.size());
  return r;
}

}  // namespace ft::testgen
