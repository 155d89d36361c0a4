// Arch `qwen35` (shared/spec/arch/qwen35.md): Qwen3.5 / Qwen3.6 dense. Hybrid layers: Gated
// DeltaNet (linear attention with a recurrent state) and, every full_attention_interval-th
// layer, full attention with a sigmoid output gate, q/k norms and partial IMROPE; every
// layer has a SwiGLU FFN behind post_attention_norm. Norm weights already carry the +1.
#include "core/error.h"
#include "model/model.h"
#include "model/qwen35_blocks.h"
#include "model/qwen35_load.h"

namespace ft::model {
namespace {

void load_qwen35(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  if (hp.n_expert != 0) fail("{}: qwen35 is dense but expert_count is {}", tl.file().path(), hp.n_expert);
  load_qwen35_hparams(tl.file(), m);
  load_embeddings_and_head(tl, m);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    load_qwen35_mixer(tl, m, il);
    load_dense_ffn(tl, m, il, "post_attention_norm");
  }
  ignore_mtp_layers(tl, m);
}

}  // namespace

extern const Arch kArchQwen35 = {"qwen35", load_qwen35, qwen35_forward};

}  // namespace ft::model
