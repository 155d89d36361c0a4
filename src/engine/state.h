// Everything one running sequence needs besides the weights: the execution context, the KV
// cache, the RoPE table and activation buffers sized once for the largest batch
// (n_ubatch tokens), so decoding allocates nothing per token.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/attention.h"
#include "engine/deltanet.h"
#include "engine/exec.h"
#include "engine/rope.h"

namespace ft::model {
struct Model;
}

namespace ft::engine {

struct Scratch {
  std::vector<float> x;        // [U][n_embd] residual stream (fp32)
  std::vector<float> h;        // [U][n_embd] normed input of a block
  std::vector<float> qkv;      // [U][q_dim + 2 kv_dim]
  std::vector<float> attn;     // [U][n_head * head_dim_v]
  std::vector<float> branch;   // [U][n_embd] output of a block before the residual add
  std::vector<float> ffn_gu;   // [U][2 n_ff]
  std::vector<float> ffn_h;    // [U][n_ff]
  std::vector<float> router;   // [U][n_expert]
  std::vector<float> probs;    // [n_expert]
  std::vector<int32_t> order;  // [n_expert]
  std::vector<int32_t> moe_ids;  // [U][n_expert_used]
  std::vector<float> moe_w;      // [U][n_expert_used]
  std::vector<float> attn_gate;  // [U][n_head * head_dim_v] qwen35: attention output gate
  std::vector<float> shexp;      // [U][n_embd] qwen35moe: shared-expert output
  std::vector<float> branch2;    // [U][n_embd] second FFN branch (gemma4: experts beside the MLP)
  std::vector<float> per_layer;  // [U][n_layer * n_embd_per_layer] gemma4 per-layer inputs
  std::vector<float> pl_gate;    // [U][n_embd_per_layer]
};

struct State {
  State(const model::Model& m, ThreadPool& pool, ActType act, int64_t n_ctx, int64_t n_ubatch);

  Exec ex;
  int64_t n_ctx;
  int64_t n_ubatch;
  KvCache kv;
  DeltaNetState dn;  // conv + delta-rule state of the Gated DeltaNet layers (qwen35)
  RopeCache rope;
  RopeCache rope_swa;  // sliding-window layers' rope where it differs (gemma4)
  AttnScratch attn;
  Scratch s;
};

}  // namespace ft::engine
