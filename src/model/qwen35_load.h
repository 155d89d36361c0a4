// What qwen35 and qwen35moe load the same way (shared/spec/arch/qwen35.md §1-2): the
// hyper-parameters (ssm.* sizes, rope sections, which layers are Gated DeltaNet) and the
// token-mixing half of each layer (gated full attention or Gated DeltaNet). The arch files
// add their FFN.
#pragma once

#include <cstdint>

#include "model/loader.h"
#include "model/model.h"

namespace ft::model {

// Completes m.hp and fills m.gdn_shape and m.rope_pair_div. Throws naming the key.
void load_qwen35_hparams(const gguf::File& f, Model& m);

// blk.il.attn_norm and either the gated attention (attn_q with the gate rows, attn_k,
// attn_v or attn_qkv, q/k norms, attn_output) or the Gated DeltaNet tensors.
void load_qwen35_mixer(TensorLoader& tl, Model& m, int64_t il);

// Marks the tensors of MTP layers (blk.il for il >= n_layer) as known: the main forward
// pass never runs them (llama.cpp skips them too unless MTP drafting is asked for).
void ignore_mtp_layers(TensorLoader& tl, const Model& m);

}  // namespace ft::model
