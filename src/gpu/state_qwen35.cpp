#include "gpu/state_qwen35.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/check.h"
#include "model/model.h"

namespace ft::gpu {

bool is_qwen35(const model::Model& m) { return !m.hp.recurrent.empty(); }

int64_t qwen35_max_k(const model::Model& m) {
  if (!is_qwen35(m)) return 0;
  return std::max(m.gdn_shape.value_dim(), m.hp.n_ff_shexp);
}

Qwen35Buffers::Qwen35Buffers(const model::Model& m, int64_t n_ubatch) {
  const model::HParams& hp = m.hp;
  const engine::DeltaNetShape& g = m.gdn_shape;
  const auto U = static_cast<size_t>(n_ubatch);
  const size_t f = sizeof(float);
  int64_t q_dim = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    raw_ld = std::max(raw_ld, 2 * hp.n_head[il] * hp.head_dim_k + 2 * hp.n_head_kv[il] * hp.head_dim_k);
    q_dim = std::max(q_dim, hp.n_head[il] * hp.head_dim_k);
  }
  conv.resize(static_cast<size_t>(hp.n_layer));
  ssm.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (!hp.is_recurrent(il)) continue;
    conv[il] = cuda::DeviceBuffer(static_cast<size_t>(g.conv_dim() * (g.d_conv - 1)) * f);
    ssm[il] = cuda::DeviceBuffer(static_cast<size_t>(g.n_v_heads * g.d_head * g.d_head) * f);
    // Zero once so that a first pass at a position > 0 (never done by the sessions) reads
    // a defined state; a pass at position 0 zeroes it in the kernels.
    if (conv[il].bytes()) FT_CUDA_CHECK(cudaMemset(conv[il].get(), 0, conv[il].bytes()));
    FT_CUDA_CHECK(cudaMemset(ssm[il].get(), 0, ssm[il].bytes()));
    state_bytes += conv[il].bytes() + ssm[il].bytes();
  }
  auto alloc = [&](cuda::DeviceBuffer& b, size_t bytes) {
    b = cuda::DeviceBuffer(std::max<size_t>(bytes, f));
    workspace_bytes += b.bytes();
  };
  alloc(in, U * g.in_dim() * f);
  alloc(y, U * g.conv_dim() * f);
  alloc(out, U * g.value_dim() * f);
  alloc(gb, U * 3 * g.n_v_heads * f);
  alloc(raw, U * raw_ld * f);
  alloc(gate, U * q_dim * f);
  alloc(sh_gu, U * 2 * hp.n_ff_shexp * f);
  alloc(sh_h, U * hp.n_ff_shexp * f);
  alloc(branch, U * hp.n_embd * f);
  alloc(sh_logit, U * f);
}

}  // namespace ft::gpu
