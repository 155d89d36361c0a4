// Arch `llama` (shared/spec/arch/llama.md): Llama 1/2/3.x, Mistral, Mixtral (MoE when
// expert_count > 0). NORM rope over the whole head with optional rope_freqs (Llama-3.1
// "llama3" factors), no Q/K norm, optional biases, attention scale 1/sqrt(head_dim).
#include "core/error.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::model {
namespace {

void load_llama(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  const std::string& path = tl.file().path();
  hp.rope.type = RopeType::kNorm;
  if (hp.head_dim_k != hp.head_dim_v || hp.rope.n_rot != hp.head_dim_k)
    fail("{}: llama needs key_length == value_length == rope.dimension_count, got {}, {}, {}", path,
         hp.head_dim_k, hp.head_dim_v, hp.rope.n_rot);
  if (hp.n_expert > 0) hp.n_ff_exp = hp.n_ff[0];  // feed_forward_length is the expert width

  load_embeddings_and_head(tl, m);
  m.rope_freqs = tl.get_f32("rope_freqs.weight", {hp.rope.n_rot / 2}, false);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    load_attention(tl, m, il, /*qk_norm=*/false);
    if (hp.n_expert == 0)
      load_dense_ffn(tl, m, il);
    else
      load_moe_ffn(tl, m, il, /*allow_merged_gate_up=*/false);
  }
}

}  // namespace

extern const Arch kArchLlama = {"llama", load_llama, decoder_forward};

}  // namespace ft::model
