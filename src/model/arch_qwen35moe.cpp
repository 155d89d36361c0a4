// Arch `qwen35moe` (shared/spec/arch/qwen35moe.md): Qwen3.5 / Qwen3.6 MoE (35B-A3B, ...).
// The layers of qwen35; every FFN is routed experts (softmax, top-k, renormalised) plus a
// shared expert scaled by sigmoid(ffn_gate_inp_shexp · x). Gate/up experts split or merged.
#include <fmt/format.h>

#include "core/error.h"
#include "model/model.h"
#include "model/qwen35_blocks.h"
#include "model/qwen35_load.h"

namespace ft::model {
namespace {

void load_qwen35moe(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  const gguf::File& f = tl.file();
  const std::string& path = f.path();
  if (hp.n_expert <= 0) fail("{}: qwen35moe.expert_count must be > 0", path);
  hp.n_ff_exp = f.get_int("qwen35moe.expert_feed_forward_length").value_or(hp.n_ff[0] / hp.n_expert_used[0]);
  hp.n_ff_shexp = f.get_int("qwen35moe.expert_shared_feed_forward_length").value_or(hp.n_ff[0]);
  if (hp.n_ff_exp <= 0 || hp.n_ff_shexp <= 0)
    fail("{}: qwen35moe needs expert_feed_forward_length > 0 and expert_shared_feed_forward_length > 0, got {} "
         "and {}", path, hp.n_ff_exp, hp.n_ff_shexp);
  load_qwen35_hparams(f, m);
  load_embeddings_and_head(tl, m);
  const int64_t n_embd = hp.n_embd, n_sh = hp.n_ff_shexp;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    load_qwen35_mixer(tl, m, il);
    load_moe_ffn(tl, m, il, /*allow_merged_gate_up=*/true, "post_attention_norm");
    Layer& L = m.layers[il];
    auto name = [&](const char* role) { return fmt::format("blk.{}.{}", il, role); };
    L.ffn_gate_inp_shexp.add(tl.get_weight(name("ffn_gate_inp_shexp.weight"), {n_embd}), 1.0f);
    L.ffn_gate_up_shexp.add(tl.get_scaled(name("ffn_gate_shexp"), {n_embd, n_sh}));
    L.ffn_gate_up_shexp.add(tl.get_scaled(name("ffn_up_shexp"), {n_embd, n_sh}));
    L.ffn_down_shexp.add(tl.get_scaled(name("ffn_down_shexp"), {n_sh, n_embd}));
  }
  ignore_mtp_layers(tl, m);
}

}  // namespace

extern const Arch kArchQwen35Moe = {"qwen35moe", load_qwen35moe, qwen35_forward};

}  // namespace ft::model
