#include "model/hparams.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ft::model {

int64_t HParams::max_of(const std::vector<int64_t>& v) const {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

std::vector<int64_t> read_per_layer(const gguf::File& f, const std::string& key, int64_t n_layer,
                                    std::optional<int64_t> fallback) {
  const gguf::Value* v = f.find(key);
  if (!v) {
    if (!fallback) fail("{}: missing metadata key {}", f.path(), key);
    return std::vector<int64_t>(static_cast<size_t>(n_layer), *fallback);
  }
  if (v->is_array()) {
    auto arr = f.get_int_array(key);
    if (!arr || static_cast<int64_t>(arr->size()) != n_layer)
      fail("{}: metadata key {} is an array of {} values, expected {} (block_count)", f.path(), key,
           arr ? arr->size() : 0, n_layer);
    return *arr;
  }
  return std::vector<int64_t>(static_cast<size_t>(n_layer), *f.get_int(key));
}

double checked_float(const gguf::File& f, const std::string& key, double v, double lo, double hi, bool lo_open) {
  if (!std::isfinite(v) || v > hi || v < lo || (lo_open && v == lo))
    fail("{}: metadata key {} is {}, expected a finite value in {}{}, {}]", f.path(), key, v, lo_open ? "(" : "[",
         lo, hi);
  return v;
}

HParams read_hparams(const gguf::File& f, const std::string& arch) {
  const std::string p = arch + ".";
  HParams h;
  h.arch = arch;
  h.n_ctx_train = static_cast<int64_t>(f.require_uint(p + "context_length"));
  h.n_embd = static_cast<int64_t>(f.require_uint(p + "embedding_length"));
  const int64_t n_layer_all = static_cast<int64_t>(f.require_uint(p + "block_count"));
  const int64_t n_nextn = f.get_int(p + "nextn_predict_layers").value_or(0);
  h.n_layer = n_layer_all - n_nextn;
  if (h.n_embd <= 0 || h.n_layer <= 0 || h.n_layer > 512)
    fail("{}: bad model size: {}embedding_length={}, block_count={}", f.path(), p, h.n_embd,
         n_layer_all);

  h.n_head = read_per_layer(f, p + "attention.head_count", n_layer_all, std::nullopt);
  h.n_head_kv = f.has(p + "attention.head_count_kv")
                    ? read_per_layer(f, p + "attention.head_count_kv", n_layer_all, std::nullopt)
                    : h.n_head;
  h.n_ff = read_per_layer(f, p + "feed_forward_length", n_layer_all, 0);
  for (int64_t il = 0; il < n_layer_all; ++il) {
    const int64_t nh = h.n_head[il], nkv = h.n_head_kv[il];
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0)
      fail("{}: layer {}: head_count {} must be a positive multiple of head_count_kv {}", f.path(),
           il, nh, nkv);
  }
  if (h.n_embd % h.n_head[0] != 0 && !f.has(p + "attention.key_length"))
    fail("{}: embedding_length {} is not a multiple of head_count {}", f.path(), h.n_embd, h.n_head[0]);
  h.head_dim_k = f.get_int(p + "attention.key_length").value_or(h.n_embd / h.n_head[0]);
  h.head_dim_v = f.get_int(p + "attention.value_length").value_or(h.n_embd / h.n_head[0]);

  // Sizes far past any real model (widths ~16 K, FFNs ~100 K, heads ~128): a corrupt file, refused before the engine
  // sizes its buffers by them (qwen3moe.feed_forward_length 2^32 - 1, which its layers never use, had the CPU
  // session allocate scratch for it: bad_alloc).
  const auto bound = [&](const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) fail("{}: metadata key {} is {}, expected {} to {}", f.path(), key, v, lo, hi);
  };
  bound(p + "embedding_length", h.n_embd, 1, int64_t{1} << 17);
  for (int64_t il = 0; il < n_layer_all; ++il) {
    bound(p + "feed_forward_length", h.n_ff[il], 0, int64_t{1} << 20);
    bound(p + "attention.head_count", h.n_head[il], 1, int64_t{1} << 12);
  }
  bound(p + "attention.key_length", h.head_dim_k, 1, int64_t{1} << 12);
  bound(p + "attention.value_length", h.head_dim_v, 1, int64_t{1} << 12);

  h.n_expert = f.get_int(p + "expert_count").value_or(0);
  bound(p + "expert_count", h.n_expert, 0, int64_t{1} << 16);
  h.n_expert_used = read_per_layer(f, p + "expert_used_count", n_layer_all, 0);
  for (int64_t k : h.n_expert_used)
    if (k < 0 || k > h.n_expert || (h.n_expert > 0 && k == 0))
      fail("{}: {}expert_used_count {} must be in [1, expert_count = {}]", f.path(), p, k,
           h.n_expert);

  h.rms_eps = static_cast<float>(checked_float(f, p + "attention.layer_norm_rms_epsilon",
                                               f.require_float(p + "attention.layer_norm_rms_epsilon"), 0.0, 1.0, false));
  h.causal = f.get_bool(p + "attention.causal").value_or(true);

  // RoPE (README §C.4 "cparams derived in llama-context.cpp").
  RopeParams& r = h.rope;
  r.n_rot = static_cast<int>(f.get_int(p + "rope.dimension_count").value_or(h.head_dim_k));
  if (r.n_rot <= 0 || r.n_rot % 2 != 0 || r.n_rot > h.head_dim_k)
    fail("{}: {}rope.dimension_count {} must be even and <= head dim {}", f.path(), p, r.n_rot,
         h.head_dim_k);
  r.freq_base = static_cast<float>(
      checked_float(f, p + "rope.freq_base", f.get_float(p + "rope.freq_base").value_or(10000.0), 0.0, 1e12, true));
  const std::string scaling = f.get_string(p + "rope.scaling.type").value_or("linear");
  double factor = f.get_float(p + "rope.scaling.factor").value_or(0.0);
  if (factor == 0.0) factor = f.get_float(p + "rope.scale_linear").value_or(0.0);
  checked_float(f, p + "rope.scaling.factor", factor, 0.0, 1e6, false);  // 0: none
  r.freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
  if (scaling == "none") {
    r.freq_scale = 1.0f;
  } else if (scaling != "linear" && scaling != "yarn") {
    fail("{}: {}rope.scaling.type '{}' is not supported (none, linear, yarn)", f.path(), p, scaling);
  }
  r.ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  r.attn_factor = static_cast<float>(checked_float(
      f, p + "rope.scaling.attn_factor", f.get_float(p + "rope.scaling.attn_factor").value_or(1.0), 0.0, 1e3, true));
  r.n_ctx_orig = static_cast<int>(
      f.get_int(p + "rope.scaling.original_context_length").value_or(h.n_ctx_train));

  // n_vocab: the tokenizer's token list, else <arch>.vocab_size (tokenizer model "none").
  if (const gguf::Value* toks = f.find("tokenizer.ggml.tokens"); toks && toks->is_array())
    h.n_vocab = static_cast<int64_t>(toks->arr.size());
  else
    h.n_vocab = f.get_int(p + "vocab_size").value_or(0);
  h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim_k));
  h.n_head.resize(h.n_layer);
  h.n_head_kv.resize(h.n_layer);
  h.n_ff.resize(h.n_layer);
  h.n_expert_used.resize(h.n_layer);
  return h;
}

}  // namespace ft::model
