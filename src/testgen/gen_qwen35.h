// qwen35 / qwen35moe test models (shared/spec/arch/qwen35.md §5, qwen35moe.md §5): the
// parts generate_model() hands to this file for Arch::kQwen35 / kQwen35Moe. The global
// tensors, the three file variants (model, F32 twin, no-scale copy) and the weight
// statistics (residual-branch size, input-projection std) stay generate_model()'s.
//
// Layers: every full_attention_interval-th is gated full attention, the others Gated
// DeltaNet (H_v = 2 H_k in the tiny preset, so the tiled value-head mapping matters);
// FFN dense (qwen35) or routed experts plus a gated shared expert (qwen35moe). The GDN
// projections are role attn, the shared expert role mlp, its gate vector role router.
#pragma once

#include <cstdint>
#include <functional>

#include "format/gguf_writer.h"
#include "testgen/model_gen.h"
#include "testgen/tensor_gen.h"

namespace ft::testgen {

bool is_qwen35(Arch a);

// The qwen35-only keys (ssm.*, rope sections and dims, layer interval, expert widths).
void write_qwen35_keys(const ModelSpec& spec, gguf::Writer& w);

// generate_model()'s weight statistics a layer is built with.
struct LayerStats {
  std::function<float(float lo, float hi)> spread;  // magnitude factor 10^U(lo, hi) (1 without spread)
  float r_branch = 1.0f;  // std a residual branch should have
  float sd_in = 1.0f;     // std of an input projection (outputs of RMS ~1)
};

// Adds layer il's tensors to generate_model()'s builder.
void add_qwen35_layer(const ModelSpec& spec, int64_t il, TensorGen& b, const LayerStats& st);

}  // namespace ft::testgen
