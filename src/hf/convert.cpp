#include "hf/convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fp16.h"
#include "core/mapped_file.h"
#include "hf/nvfp4_pack.h"
#include "quant/quantize.h"

namespace ft::hf {
namespace fs = std::filesystem;

OutType parse_outtype(const std::string& s) {
  if (s == "auto") return OutType::kAuto;
  if (s == "f32") return OutType::kF32;
  if (s == "f16") return OutType::kF16;
  if (s == "bf16") return OutType::kBF16;
  if (s == "nvfp4") return OutType::kNvfp4;
  fail("--outtype '{}' is not one of auto, f32, f16, bf16, nvfp4", s);
}

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

namespace {

// llama's q/k rows: HF orders each head's rotary pairs as (first halves | second halves),
// GGUF interleaves them (convert_hf_to_gguf.py LlamaModel.permute). Output row d <- source row.
int64_t permuted_row(int64_t d, int64_t rows, int n_heads) {
  if (n_heads <= 0) return d;
  const int64_t hd = rows / n_heads;
  const int64_t h = d / hd, r = d % hd, i = r / 2, j = r % 2;
  return h * hd + j * (hd / 2) + i;
}

void store_row(const float* x, int64_t n, GgmlType type, uint8_t* dst) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default:
      fail("internal: store_row to {}", type_name(type));
  }
}

// Rows and row length of a checkpoint tensor as a matrix (1-D: one element per row, so
// that a bias can be permuted like the weight rows).
std::pair<int64_t, int64_t> rows_cols(const StTensor& t) {
  if (t.shape.size() <= 1) return {t.numel(), 1};
  return {t.numel() / t.shape.back(), t.shape.back()};
}

std::string blk(int64_t il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

bool trivially_one(float s) { return std::fabs(s - 1.0f) < 1e-6f; }

// The checkpoint bytes of a float tensor when they already are its GGUF bytes: one source
// (not stacked experts), stored in the output type, rows not permuted, and aligned for its
// element type (the kernels read weights as float / uint16 arrays). Otherwise nullptr.
const uint8_t* same_bytes_as_stored(const std::vector<const StTensor*>& src, GgmlType type, int perm_heads) {
  if (src.size() != 1 || perm_heads > 0) return nullptr;
  const StTensor& t = *src[0];
  const bool same_type = (t.dtype == Dtype::kBF16 && type == GgmlType::BF16) ||
                         (t.dtype == Dtype::kF16 && type == GgmlType::F16) ||
                         (t.dtype == Dtype::kF32 && type == GgmlType::F32);
  if (!same_type || reinterpret_cast<uintptr_t>(t.data) % static_cast<uintptr_t>(dtype_size(t.dtype)) != 0)
    return nullptr;
  return t.data;
}

}  // namespace

Conversion::~Conversion() = default;

std::unique_ptr<Conversion> Conversion::plan(const std::string& dir, OutType out) {
  std::unique_ptr<Conversion> c(new Conversion());
  c->dir_ = dir;
  c->out_ = out;
  c->build();
  return c;
}

const StTensor* Conversion::take_opt(const std::string& name) {
  const StTensor* t = ckpt_->find(name);
  if (t) used_.push_back(name);
  return t;
}

const StTensor& Conversion::take(const std::string& name) {
  const StTensor* t = take_opt(name);
  if (!t) fail("{}: missing tensor {} (architecture {})", dir_, name, cfg_.hf_arch);
  return *t;
}

GgmlType Conversion::float_type(const StTensor& t) const {
  switch (out_) {
    case OutType::kF32: return GgmlType::F32;
    case OutType::kF16: return GgmlType::F16;
    case OutType::kBF16: return GgmlType::BF16;
    default: break;
  }
  if (t.dtype == Dtype::kBF16) return GgmlType::BF16;
  if (t.dtype == Dtype::kF16) return GgmlType::F16;
  return GgmlType::F32;
}

void Conversion::add(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                     std::function<void(uint8_t*)> fill, const uint8_t* same_bytes) {
  uint64_t nbytes = static_cast<uint64_t>(row_bytes(type, ne[0]));
  for (size_t i = 1; i < ne.size(); ++i) nbytes *= static_cast<uint64_t>(ne[i]);
  data_bytes_ += nbytes;
  ++n_tensors_;
  std::function<void(uint8_t*, uint64_t)> f = [this, fill = std::move(fill)](uint8_t* dst, uint64_t n) {
    fill(dst);
    done_bytes_ += n;
    if (progress_) progress_(done_bytes_, data_bytes_);
  };
  fills_.emplace_back(nbytes, f);
  names_.push_back(name);
  same_bytes_.push_back(same_bytes);
  w_.add_tensor_stream(name, type, ne, std::move(f));
}

void Conversion::add_f32_values(const std::string& name, std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  add(name, GgmlType::F32, {n}, [v = std::move(v)](uint8_t* dst) { std::memcpy(dst, v.data(), v.size() * 4); });
}

void Conversion::add_float(const std::string& name, const std::vector<const StTensor*>& src, GgmlType type,
                           int perm_heads) {
  const StTensor& t0 = *src[0];
  for (const StTensor* t : src) {
    if (!is_float(t->dtype))
      fail("{}: tensor {} has dtype {}, expected BF16, F16 or F32", *t->file, t->name, dtype_name(t->dtype));
    if (t->shape != t0.shape)
      fail("{}: tensor {} has shape {}, expected {} like {}", *t->file, t->name, t->shape_string(),
           t0.shape_string(), t0.name);
  }
  std::vector<int64_t> ne(t0.shape.rbegin(), t0.shape.rend());
  if (ne.empty()) ne.push_back(1);
  if (src.size() > 1) ne.push_back(static_cast<int64_t>(src.size()));
  if (ne.size() > 4) fail("{}: tensor {} has {} dimensions", *t0.file, t0.name, t0.shape.size());
  const auto [rows, cols] = rows_cols(t0);
  const int64_t esz = row_bytes(type, cols);
  add(
      name, type, ne,
      [src, type, perm_heads, rows = rows, cols = cols, esz](uint8_t* dst) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (const StTensor* t : src)
          for (int64_t r = 0; r < rows; ++r) {
            to_f32(*t, permuted_row(r, rows, perm_heads) * cols, cols, row.data());
            store_row(row.data(), cols, type, dst);
            dst += esz;
          }
      },
      same_bytes_as_stored(src, type, perm_heads));
}

void Conversion::add_bias(const std::string& gguf_name, const std::string& hf_name, int perm_heads) {
  if (const StTensor* b = take_opt(hf_name)) add_float(gguf_name, {b}, GgmlType::F32, perm_heads);
}

// One projection (hf_bases.size() == 1) or the stacked experts of one role.
void Conversion::add_linear(const std::string& gguf_base, const std::vector<std::string>& hf_bases,
                            bool quantisable, int perm_heads) {
  const bool ct = cfg_.quant == QuantScheme::kCompressedNvfp4;
  const char* w_suffix = ct ? ".weight_packed" : ".weight";
  const bool experts = hf_bases.size() > 1;
  const bool nvfp4 = cfg_.quant != QuantScheme::kNone && ckpt_->find(hf_bases[0] + w_suffix) &&
                     ckpt_->find(hf_bases[0] + ".weight_scale") &&
                     ckpt_->find(hf_bases[0] + ".weight_scale")->shape.size() >= 2;
  const size_t E = hf_bases.size();
  if (nvfp4) {
    // ModelOpt NVFP4 (compressed-tensors renamed): repack losslessly, scales beside.
    std::vector<const StTensor*> w(E), s(E);
    std::vector<float> s2(E, 1.0f), in_s(E, 1.0f);
    bool any_in = false;
    int64_t out = 0, k = 0;
    for (size_t e = 0; e < E; ++e) {
      const std::string& b = hf_bases[e];
      w[e] = &take(b + w_suffix);
      s[e] = &take(b + ".weight_scale");
      const StTensor& W = *w[e];
      const StTensor& S = *s[e];
      if (W.dtype != Dtype::kU8 && W.dtype != Dtype::kI8)
        fail("{}: tensor {} has dtype {}, expected U8 (two packed E2M1 codes per byte)", *W.file, W.name,
             dtype_name(W.dtype));
      if (S.dtype != Dtype::kF8E4M3 && S.dtype != Dtype::kU8)
        fail("{}: tensor {} has dtype {}, expected F8_E4M3", *S.file, S.name, dtype_name(S.dtype));
      if (W.shape.size() != 2 || S.shape.size() != 2 || S.shape[0] != W.shape[0] ||
          S.shape[1] * 8 != W.shape[1])
        fail("{}: NVFP4 tensor {} has shape {} with weight_scale {}, expected [out, in/2] and [out, in/16]",
             *W.file, W.name, W.shape_string(), S.shape_string());
      if (e == 0) {
        out = W.shape[0];
        k = W.shape[1] * 2;
      } else if (W.shape[0] != out || W.shape[1] * 2 != k) {
        fail("{}: expert tensor {} has shape {}, expected [{}, {}] like {}", *W.file, W.name, W.shape_string(),
             out, k / 2, w[0]->name);
      }
      if (k % 64 != 0)
        fail("{}: NVFP4 tensor {} has {} input columns, not a multiple of 64 (block_nvfp4)", *W.file, W.name, k);
      if (const StTensor* t = take_opt(b + (ct ? ".weight_global_scale" : ".weight_scale_2"))) {
        if (t->numel() != 1) fail("{}: tensor {} has shape {}, expected a scalar", *t->file, t->name, t->shape_string());
        const float v = element_f32(*t, 0);
        s2[e] = ct ? 1.0f / v : v;  // compressed-tensors stores the reciprocal
      }
      if (const StTensor* t = take_opt(b + (ct ? ".input_global_scale" : ".input_scale"))) {
        if (t->numel() != 1) fail("{}: tensor {} has shape {}, expected a scalar", *t->file, t->name, t->shape_string());
        const float v = element_f32(*t, 0);
        in_s[e] = ct ? 1.0f / v : v;
        any_in = true;
      }
      if (!std::isfinite(s2[e]) || s2[e] <= 0.0f)
        fail("{}: {} second-level scale {} is not a positive finite number", dir_, b, s2[e]);
    }
    std::vector<int64_t> ne = {k, out};
    if (experts) ne.push_back(static_cast<int64_t>(E));
    const int64_t rb = row_bytes(GgmlType::NVFP4, k);
    add(gguf_base + ".weight", GgmlType::NVFP4, ne, [w, s, out, k, rb, perm_heads](uint8_t* dst) {
      for (size_t e = 0; e < w.size(); ++e)
        for (int64_t r = 0; r < out; ++r) {
          const int64_t src = permuted_row(r, out, perm_heads);
          nvfp4_repack_modelopt(w[e]->data + src * (k / 2), s[e]->data + src * (k / 16), 1, k, dst);
          dst += rb;
        }
    });
    any_nvfp4_ = true;
    // gguf-py: dense scale omitted when |s - 1| < 1e-6; experts when np.allclose(s, 1, atol=1e-6).
    auto all_one = [&](const std::vector<float>& v) {
      if (!experts) return trivially_one(v[0]);
      for (float x : v)
        if (!(std::fabs(x - 1.0f) <= 1e-6f + 1e-5f)) return false;
      return true;
    };
    if (!all_one(s2)) add_f32_values(gguf_base + ".scale", s2);
    if (any_in && !all_one(in_s)) add_f32_values(gguf_base + ".input_scale", in_s);
    return;
  }

  std::vector<const StTensor*> src(E);
  for (size_t e = 0; e < E; ++e) {
    src[e] = &take(hf_bases[e] + ".weight");
    if (ckpt_->find(hf_bases[e] + ".weight_scale"))
      fail("{}: tensor {}.weight_scale is not an NVFP4 block scale (FP8 checkpoints are not supported)", dir_,
           hf_bases[e]);
  }
  if (!(quantisable && out_ == OutType::kNvfp4)) {
    add_float(gguf_base + ".weight", src, float_type(*src[0]), perm_heads);
    return;
  }
  // --outtype nvfp4: the ModelOpt recipe, second-level scale per tensor / per expert.
  const StTensor& t0 = *src[0];
  if (t0.shape.size() != 2) fail("{}: tensor {} is not a matrix ({})", *t0.file, t0.name, t0.shape_string());
  const int64_t out = t0.shape[0], k = t0.shape[1];
  if (k % 64 != 0)
    fail("{}: tensor {} has {} input columns; --outtype nvfp4 needs a multiple of 64", *t0.file, t0.name, k);
  std::vector<float> s2(E, 1.0f);
  std::vector<float> row(static_cast<size_t>(k));
  for (size_t e = 0; e < E; ++e) {
    const StTensor& t = *src[e];
    if (!is_float(t.dtype) || t.shape != t0.shape)
      fail("{}: tensor {} has dtype {} shape {}, expected a float tensor of shape {}", *t.file, t.name,
           dtype_name(t.dtype), t.shape_string(), t0.shape_string());
    float amax = 0;
    for (int64_t r = 0; r < out; ++r) {
      to_f32(t, r * k, k, row.data());
      for (float x : row) amax = std::max(amax, std::fabs(x));
    }
    s2[e] = amax == 0 ? 1.0f : amax / 2688.0f;  // = quant::nvfp4_tensor_scale
  }
  std::vector<int64_t> ne = {k, out};
  if (experts) ne.push_back(static_cast<int64_t>(E));
  const int64_t rb = row_bytes(GgmlType::NVFP4, k);
  add(gguf_base + ".weight", GgmlType::NVFP4, ne, [src, s2, out, k, rb, perm_heads](uint8_t* dst) {
    std::vector<float> x(static_cast<size_t>(k));
    for (size_t e = 0; e < src.size(); ++e)
      for (int64_t r = 0; r < out; ++r) {
        to_f32(*src[e], permuted_row(r, out, perm_heads) * k, k, x.data());
        quant::quantize_row_ref(GgmlType::NVFP4, x.data(), dst, k, s2[e]);
        dst += rb;
      }
  });
  any_nvfp4_ = true;
  bool all_one = true;
  for (float x : s2) all_one = all_one && x == 1.0f;
  if (!all_one) add_f32_values(gguf_base + ".scale", s2);
}

void Conversion::build() {
  cfg_ = read_config(dir_);
  ckpt_ = Checkpoint::open(dir_);
  vocab_ = read_vocab(dir_, cfg_);
  const HfConfig& c = cfg_;
  const bool llama = c.arch == "llama", moe = c.arch == "qwen3moe";
  const int64_t hd = c.head_dim_or_default();

  auto expect = [&](const StTensor& t, std::vector<int64_t> shape) {
    if (t.shape != shape) {
      StTensor want;
      want.shape = shape;
      fail("{}: tensor {} has shape {}, expected {}", *t.file, t.name, t.shape_string(), want.shape_string());
    }
    return &t;
  };

  if (llama && c.rope_type == "llama3") add_f32_values("rope_freqs.weight", llama3_rope_factors(c));
  const StTensor& embd = *expect(take("model.embed_tokens.weight"), {c.n_vocab, c.n_embd});
  main_float_ = float_type(embd);
  add_float("token_embd.weight", {&embd}, main_float_, 0);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    add_float(blk(il, "attn_norm.weight"), {expect(take(p + "input_layernorm.weight"), {c.n_embd})}, GgmlType::F32, 0);
    const int hq = llama ? static_cast<int>(c.n_head) : 0, hk = llama ? static_cast<int>(c.n_head_kv) : 0;
    add_linear(blk(il, "attn_q"), {p + "self_attn.q_proj"}, true, hq);
    add_bias(blk(il, "attn_q.bias"), p + "self_attn.q_proj.bias", hq);
    add_linear(blk(il, "attn_k"), {p + "self_attn.k_proj"}, true, hk);
    add_bias(blk(il, "attn_k.bias"), p + "self_attn.k_proj.bias", hk);
    add_linear(blk(il, "attn_v"), {p + "self_attn.v_proj"}, true, 0);
    add_bias(blk(il, "attn_v.bias"), p + "self_attn.v_proj.bias", 0);
    add_linear(blk(il, "attn_output"), {p + "self_attn.o_proj"}, true, 0);
    add_bias(blk(il, "attn_output.bias"), p + "self_attn.o_proj.bias", 0);
    if (!llama) {
      add_float(blk(il, "attn_q_norm.weight"), {expect(take(p + "self_attn.q_norm.weight"), {hd})}, GgmlType::F32, 0);
      add_float(blk(il, "attn_k_norm.weight"), {expect(take(p + "self_attn.k_norm.weight"), {hd})}, GgmlType::F32, 0);
    }
    add_float(blk(il, "ffn_norm.weight"), {expect(take(p + "post_attention_layernorm.weight"), {c.n_embd})},
              GgmlType::F32, 0);
    if (moe) {
      add_float(blk(il, "ffn_gate_inp.weight"), {expect(take(p + "mlp.gate.weight"), {c.n_expert, c.n_embd})},
                GgmlType::F32, 0);
      for (const char* role : {"gate", "up", "down"}) {
        std::vector<std::string> bases;
        for (int64_t e = 0; e < c.n_expert; ++e)
          bases.push_back(p + "mlp.experts." + std::to_string(e) + "." + role + "_proj");
        add_linear(blk(il, (std::string("ffn_") + role + "_exps").c_str()), bases, true, 0);
      }
    } else {
      add_linear(blk(il, "ffn_gate"), {p + "mlp.gate_proj"}, true, 0);
      add_linear(blk(il, "ffn_up"), {p + "mlp.up_proj"}, true, 0);
      add_linear(blk(il, "ffn_down"), {p + "mlp.down_proj"}, true, 0);
    }
  }
  add_float("output_norm.weight", {expect(take("model.norm.weight"), {c.n_embd})}, GgmlType::F32, 0);
  if (ckpt_->find("lm_head.weight") || ckpt_->find("lm_head.weight_packed"))
    add_linear("output", {"lm_head"}, /*quantisable=*/false, 0);

  // Every checkpoint tensor must have been used (the converter's "Can not map tensor").
  std::sort(used_.begin(), used_.end());
  for (const StTensor* t : ckpt_->tensors()) {
    if (std::binary_search(used_.begin(), used_.end(), t->name)) continue;
    const std::string& n = t->name;
    if (n.ends_with(".rotary_emb.inv_freq") || n.ends_with(".k_scale") || n.ends_with(".v_scale") ||
        n.ends_with(".input_scale"))
      continue;
    fail("{}: tensor {} ({} {}) is not used by the {} converter", *t->file, n, dtype_name(t->dtype),
         t->shape_string(), c.arch);
  }

  // ---- metadata, in the converter's order ----
  const std::string a = c.arch + ".";
  w_.set_string("general.architecture", c.arch);
  w_.set_string("general.type", "model");
  w_.set_string("general.name", fs::path(dir_).filename().empty() ? fs::path(dir_).parent_path().filename().string()
                                                                  : fs::path(dir_).filename().string());
  w_.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layer));
  w_.set_u32(a + "context_length", static_cast<uint32_t>(c.n_ctx_train));
  w_.set_u32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  if (c.n_ff > 0) w_.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w_.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  w_.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  if (c.rope_type == "linear" && c.rope_factor > 0) {
    w_.set_string(a + "rope.scaling.type", "linear");
    w_.set_f32(a + "rope.scaling.factor", static_cast<float>(c.rope_factor));
  } else if (c.rope_type == "yarn" && c.rope_factor > 0) {
    w_.set_string(a + "rope.scaling.type", "yarn");
    w_.set_f32(a + "rope.scaling.factor", static_cast<float>(c.rope_factor));
    w_.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(c.rope_orig_ctx));
  }
  if (c.has_rope_theta) w_.set_f32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w_.set_f32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_eps));
  if (c.n_expert > 0) {
    w_.set_u32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
    w_.set_u32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  }
  if (c.head_dim > 0) {
    w_.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w_.set_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  // llama.cpp LlamaFileType: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32, MOSTLY_NVFP4 39.
  uint32_t ftype = main_float_ == GgmlType::F16 ? 1 : main_float_ == GgmlType::BF16 ? 32 : 0;
  if (any_nvfp4_) ftype = 39;
  w_.set_u32("general.file_type", ftype);
  if (moe) w_.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
  if (llama) {
    w_.set_u32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));
    w_.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  }
  w_.set_u32("general.quantization_version", 2);
  // tokenizer (gpt2 BPE)
  if (vocab_.add_space_prefix) w_.set_bool("tokenizer.ggml.add_space_prefix", *vocab_.add_space_prefix);
  w_.set_string("tokenizer.ggml.model", "gpt2");
  w_.set_string("tokenizer.ggml.pre", vocab_.pre);
  w_.set_string_array("tokenizer.ggml.tokens", vocab_.tokens);
  w_.set_i32_array("tokenizer.ggml.token_type", vocab_.token_types);
  w_.set_string_array("tokenizer.ggml.merges", vocab_.merges);
  for (const auto& [typ, id] : vocab_.special_ids) {
    const std::string key = typ == "unk"   ? "unknown_token_id"
                            : typ == "sep" ? "seperator_token_id"  // sic, gguf-py's key
                            : typ == "pad" ? "padding_token_id"
                                           : typ + "_token_id";
    w_.set_u32("tokenizer.ggml." + key, static_cast<uint32_t>(id));
  }
  for (const auto& [typ, b] : vocab_.add_special) w_.set_bool("tokenizer.ggml.add_" + typ + "_token", b);
  if (vocab_.chat_template) w_.set_string("tokenizer.chat_template", *vocab_.chat_template);
}

void Conversion::write(const std::string& path) {
  done_bytes_ = 0;
  w_.write(path);
}

std::unique_ptr<gguf::File> Conversion::open_in_memory() {
  done_bytes_ = 0;
  const gguf::Writer::Layout lay = w_.layout();
  // Anonymous memory: the ranges of referenced tensors are never written, so never allocated.
  MappedFile image = MappedFile::anonymous(lay.file_size, dir_);
  uint8_t* base = image.mutable_data();
  std::memcpy(base, lay.head.data(), lay.head.size());
  // Each tensor filled in place by the same callbacks write() streams (layout() keeps add order).
  for (size_t i = 0; i < fills_.size(); ++i) {
    if (!same_bytes_[i]) {
      fills_[i].second(base + lay.offsets[i], fills_[i].first);
      continue;
    }
    done_bytes_ += fills_[i].first;
    if (progress_) progress_(done_bytes_, data_bytes_);
  }
  image.seal();
  auto f = gguf::File::from_image(std::move(image), same_bytes_, ckpt_);
  for (size_t i = 0; i < names_.size(); ++i)
    if (f->tensors()[i].name != names_[i])
      fail("{}: internal: in-memory tensor #{} is {}, planned {}", dir_, i, f->tensors()[i].name, names_[i]);
  return f;
}

int64_t Conversion::n_referenced() const {
  int64_t n = 0;
  for (const uint8_t* p : same_bytes_) n += p != nullptr;
  return n;
}

uint64_t Conversion::referenced_bytes() const {
  uint64_t n = 0;
  for (size_t i = 0; i < same_bytes_.size(); ++i)
    if (same_bytes_[i]) n += fills_[i].first;
  return n;
}

std::unique_ptr<gguf::File> open_hf_as_gguf(const std::string& dir,
                                            const std::function<void(uint64_t, uint64_t)>& progress) {
  auto c = Conversion::plan(dir, OutType::kAuto);
  if (progress) c->set_progress(progress);
  return c->open_in_memory();
}

std::vector<float> llama3_rope_factors(const HfConfig& c) {
  const int64_t dim = c.head_dim_or_default();
  const float base = static_cast<float>(c.rope_theta);
  const float factor = static_cast<float>(c.rope_factor);
  const float lo = static_cast<float>(c.rope_low_freq_factor), hi = static_cast<float>(c.rope_high_freq_factor);
  const float old_ctx = static_cast<float>(c.rope_orig_ctx);
  const float lo_wavelen = old_ctx / lo, hi_wavelen = old_ctx / hi;
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(2.0 * M_PI) / freq;
    if (wavelen < hi_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > lo_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

}  // namespace ft::hf
