// gemma4's device buffers beside GpuBuffers (gpu/forward_gemma4.cpp): the sliding layers'
// RoPE table, branch scratch for the post-norms and the MoE layer's two outputs, and the
// per-layer input embeddings of a micro-batch. Sized at start-up like GpuBuffers.
#pragma once

#include <cstdint>

#include "cuda/buffer.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

bool is_gemma4(const model::Model& m);

struct Gemma4Buffers {
  Gemma4Buffers(const model::Model& m, int64_t n_ctx, int64_t n_ubatch);

  cuda::DeviceBuffer rope_cs_swa;     // [n_ctx][n_rot_swa] {cos, sin}, no freq factors
  cuda::DeviceBuffer branch, tmp, f, e;  // [n_ubatch][n_embd] each
  cuda::DeviceBuffer per_layer, pl_tok;  // [n_ubatch][n_layer * n_pl] (PLE only)
  cuda::DeviceBuffer pl_gate;            // [n_ubatch][n_pl]
  cuda::DeviceBuffer attn_ws;            // decode split-K partials (cuda/attention_window.h)
  size_t bytes = 0;
};

}  // namespace ft::gpu
