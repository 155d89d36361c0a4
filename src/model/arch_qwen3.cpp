// Arch `qwen3` (shared/spec/arch/qwen3.md): Qwen3 dense. NEOX rope over the whole head,
// per-head RMSNorm of Q and K before rope, SwiGLU FFN, attention scale 1/sqrt(head_dim).
#include "core/error.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::model {
namespace {

void load_qwen3(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  const std::string& path = tl.file().path();
  hp.rope.type = RopeType::kNeox;
  if (hp.head_dim_k != hp.head_dim_v || hp.rope.n_rot != hp.head_dim_k)
    fail("{}: qwen3 needs key_length == value_length == rope.dimension_count, got {}, {}, {}", path,
         hp.head_dim_k, hp.head_dim_v, hp.rope.n_rot);
  if (hp.n_expert != 0) fail("{}: qwen3 is dense but expert_count is {}", path, hp.n_expert);

  load_embeddings_and_head(tl, m);
  tl.ignore("cls.output.weight");  // reranker head, not used for generation
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    load_attention(tl, m, il, /*qk_norm=*/true);
    load_dense_ffn(tl, m, il);
  }
}

}  // namespace

extern const Arch kArchQwen3 = {"qwen3", load_qwen3, decoder_forward};

}  // namespace ft::model
