#include "gpu/state_gemma4.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "cuda/attention_window.h"
#include "cuda/check.h"
#include "cuda/geglu.h"
#include "engine/geglu.h"
#include "engine/rope.h"
#include "model/model.h"

namespace ft::gpu {

bool is_gemma4(const model::Model& m) { return std::strcmp(m.arch->name, "gemma4") == 0; }

Gemma4Buffers::Gemma4Buffers(const model::Model& m, int64_t n_ctx, int64_t U) {
  const model::HParams& hp = m.hp;
  const size_t f4 = sizeof(float);
  auto alloc = [&](cuda::DeviceBuffer& b, size_t n) {
    b = cuda::DeviceBuffer(n);
    bytes += n;
  };
  // Sliding layers: their own base and n_rot, no factors; built with the CPU's function so
  // the angles are the CPU engine's bits.
  const int n_rot = hp.rope_swa.n_rot;
  std::vector<float> cs(static_cast<size_t>(n_ctx * n_rot));
  for (int64_t p = 0; p < n_ctx; ++p) engine::rope_angles(hp.rope_swa, nullptr, p, cs.data() + p * n_rot);
  alloc(rope_cs_swa, cs.size() * f4);
  FT_CUDA_CHECK(cudaMemcpy(rope_cs_swa.get(), cs.data(), cs.size() * f4, cudaMemcpyHostToDevice));
  for (cuda::DeviceBuffer* b : {&branch, &tmp, &f, &e}) alloc(*b, static_cast<size_t>(U * hp.n_embd) * f4);
  const int64_t n_pl = hp.n_embd_per_layer;
  if (n_pl > 0) {
    alloc(per_layer, static_cast<size_t>(U * n_pl * hp.n_layer) * f4);
    alloc(pl_tok, static_cast<size_t>(U * n_pl * hp.n_layer) * f4);
    alloc(pl_gate, static_cast<size_t>(U * n_pl) * f4);
  }
  int64_t max_hd = 0, max_head = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    max_hd = std::max(max_hd, hp.head_dim(il));
    max_head = std::max(max_head, hp.n_head[il]);
  }
  alloc(attn_ws, cuda::attention_window_workspace_bytes(max_head, max_hd));
  // ggml-cpu's fp16 GELU table, from the CPU engine's own function (cuda/geglu.h).
  if (!cuda::gelu_table_ready()) {
    std::vector<uint16_t> t(65536);
    for (uint32_t i = 0; i < t.size(); ++i) t[i] = f32_to_f16(engine::gelu_tanh_f32(f16_to_f32(static_cast<uint16_t>(i))));
    cuda::gelu_table_set(t.data());
  }
}

}  // namespace ft::gpu
