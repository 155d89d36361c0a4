// Arch `qwen3moe` (shared/spec/arch/qwen3moe.md): Qwen3-30B-A3B, 235B-A22B. The attention
// of qwen3; every layer's FFN is routed experts (softmax, top-k, always renormalised), no
// shared expert, separate gate/up expert tensors.
#include "core/error.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::model {
namespace {

void load_qwen3moe(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  const std::string& path = tl.file().path();
  hp.rope.type = RopeType::kNeox;
  if (hp.head_dim_k != hp.head_dim_v || hp.rope.n_rot != hp.head_dim_k)
    fail("{}: qwen3moe needs key_length == value_length == rope.dimension_count, got {}, {}, {}",
         path, hp.head_dim_k, hp.head_dim_v, hp.rope.n_rot);
  if (hp.n_expert <= 0) fail("{}: qwen3moe.expert_count must be > 0", path);
  const auto n_ff_exp = tl.file().get_int("qwen3moe.expert_feed_forward_length");
  hp.n_ff_exp = n_ff_exp ? *n_ff_exp : hp.n_ff[0] / hp.n_expert_used[0];
  if (hp.n_ff_exp <= 0) fail("{}: qwen3moe.expert_feed_forward_length must be > 0", path);

  load_embeddings_and_head(tl, m);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    load_attention(tl, m, il, /*qk_norm=*/true);
    load_moe_ffn(tl, m, il, /*allow_merged_gate_up=*/false);
  }
}

}  // namespace

extern const Arch kArchQwen3Moe = {"qwen3moe", load_qwen3moe, decoder_forward};

}  // namespace ft::model
