// The device buffers qwen35 / qwen35moe add beside GpuBuffers (gpu/state.h): per Gated
// DeltaNet layer the sequence's conv window and delta-rule state (fp32, zeroed by the
// kernels themselves when a pass starts at position 0), and the scratch of one micro-batch
// (the layer's input projections, conv output, head outputs, the gated attention's raw
// q|gate rows and gates, the shared expert's rows). Sized at start-up.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/buffer.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct Qwen35Buffers {
  Qwen35Buffers(const model::Model& m, int64_t n_ubatch);

  std::vector<cuda::DeviceBuffer> conv;  // per layer [conv_dim][d_conv - 1] (empty: attention layer)
  std::vector<cuda::DeviceBuffer> ssm;   // per layer [H_v][d][d]
  cuda::DeviceBuffer in;      // [U][in_dim]  qkv | z | beta | alpha
  cuda::DeviceBuffer y;       // [U][conv_dim] conv + silu output
  cuda::DeviceBuffer out;     // [U][value_dim] head outputs
  cuda::DeviceBuffer gb;      // [U][H_v][3] decay, beta, g
  cuda::DeviceBuffer raw;     // [U][raw_ld] gated attention projection [q_0 g_0 ... | k | v]
  cuda::DeviceBuffer gate;    // [U][n_head * hd]
  cuda::DeviceBuffer sh_gu;   // [U][2 n_ff_shexp]
  cuda::DeviceBuffer sh_h;    // [U][n_ff_shexp]
  cuda::DeviceBuffer branch;  // [U][n_embd] shared expert * gate, then + routed experts
  cuda::DeviceBuffer sh_logit;  // [U] shared expert gate logits
  int64_t raw_ld = 0;
  size_t state_bytes = 0, workspace_bytes = 0;
};

// Whether m is qwen35 / qwen35moe (has Gated DeltaNet layer types).
bool is_qwen35(const model::Model& m);

// The widest projection input qwen35 adds (value_dim of ssm_out, n_ff_shexp of the shared
// expert's down projection): GpuBuffers sizes its Q8 and GEMM workspaces for it. 0 otherwise.
int64_t qwen35_max_k(const model::Model& m);

}  // namespace ft::gpu
