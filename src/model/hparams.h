// Hyper-parameters of a decoder-only transformer, read from GGUF metadata
// (shared/spec/arch/README.md §C.2). read_hparams() reads the generic `<arch>.` keys every
// arch shares; an arch builder then checks and completes what is specific to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace ft::model {

enum class RopeType { kNorm, kNeox };

// Everything ggml's rope needs (README §C.4), already resolved from the scaling keys.
struct RopeParams {
  RopeType type = RopeType::kNorm;
  int n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1 / rope.scaling.factor
  float ext_factor = 0.0f;   // 1 for yarn
  float attn_factor = 1.0f;  // rope.scaling.attn_factor
  int n_ctx_orig = 0;        // rope.scaling.original_context_length or context_length
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

struct HParams {
  std::string arch;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  std::vector<int64_t> n_head;     // per layer
  std::vector<int64_t> n_head_kv;  // per layer
  std::vector<int64_t> n_ff;       // per layer (dense FFN width)
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t n_expert = 0;
  std::vector<int64_t> n_expert_used;  // per layer
  int64_t n_ff_exp = 0;                // expert FFN width
  int64_t n_ff_shexp = 0;              // shared-expert FFN width (qwen35moe)
  // Hybrid archs (qwen35, qwen35moe): 1 = Gated DeltaNet layer, which has no KV cache.
  // Empty: every layer is attention.
  std::vector<uint8_t> recurrent;
  bool attn_gated_q = false;  // attn_q rows per head: the query (hd), then its output gate (hd)
  float rms_eps = 1e-5f;
  float attn_scale = 1.0f;  // set by the arch (1/sqrt(head_dim) for llama/qwen3)
  bool causal = true;
  RopeParams rope;

  // Per-layer attention layout where it varies (gemma4: sliding and global layers have
  // their own head dim, window and rope; the last layers may read an earlier layer's KV).
  // Empty vectors mean: head_dim_k/head_dim_v everywhere, full causal, own KV cache.
  std::vector<int64_t> head_dim_l;  // K = V head dim of layer il
  std::vector<int64_t> n_swa_l;     // sliding window of layer il (0: full causal attention)
  std::vector<int64_t> kv_src_l;    // layer whose KV cache layer il attends to
  RopeParams rope_swa;              // rope of the sliding-window layers
  int64_t n_embd_per_layer = 0;     // gemma4 per-layer input embeddings (0: none)
  float final_logit_softcap = 0.0f; // logits = cap * tanh(logits / cap) when > 0

  int64_t head_dim(int64_t il) const { return head_dim_l.empty() ? head_dim_k : head_dim_l[il]; }
  int64_t window(int64_t il) const { return n_swa_l.empty() ? 0 : n_swa_l[il]; }
  int64_t kv_src(int64_t il) const { return kv_src_l.empty() ? il : kv_src_l[il]; }
  bool is_recurrent(int64_t il) const { return !recurrent.empty() && recurrent[il] != 0; }
  int64_t q_dim(int64_t il) const { return n_head[il] * head_dim_k; }
  int64_t kv_dim(int64_t il) const { return n_head_kv[il] * head_dim_k; }
  int64_t max_of(const std::vector<int64_t>& v) const;
};

// Reads the generic keys of README §C.2 for `arch` (rms eps included, required).
// Throws ft::Error naming the key on a missing required key or an out-of-range value.
HParams read_hparams(const gguf::File& f, const std::string& arch);

// A float a forward pass divides by, scales by or exponentiates: finite and in [lo, hi] (lo excluded when
// lo_open), else an ft::Error naming the file and key -- a NaN or infinite value would decode to NaN logits.
double checked_float(const gguf::File& f, const std::string& key, double v, double lo, double hi, bool lo_open);

// A key that may be a scalar (broadcast) or an array of n_layer values.
std::vector<int64_t> read_per_layer(const gguf::File& f, const std::string& key, int64_t n_layer,
                                    std::optional<int64_t> fallback);

}  // namespace ft::model
