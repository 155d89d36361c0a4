// The model's weights on the device: uploaded once at load into one arena (one cudaMalloc,
// so the memory report is exact), with a progress callback. Kernels get plain views.
//
// A fused projection (q|k|v, gate|up) whose parts share a type is concatenated physically
// and runs as one GEMV/GEMM; its parts' NVFP4 `.scale`s become a per-row scale vector in
// the fp32 epilogue (engine::Linear::row_scales). Parts of different types stay separate
// launches writing their own row ranges. MoE expert tensors keep the file's 3-D layout and
// get a per-layer scale bank [n_expert][4] = (gate, up, down, 1) read by the grouped kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/buffer.h"
#include "format/ggml_type.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct DevMatrix {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;  // device
  int64_t row_bytes = 0;
  int64_t k = 0;
  int64_t rows = 0;
  int64_t row0 = 0;      // first output row inside its projection
  float scale = 1.0f;    // scalar epilogue scale
  bool tiled = false;    // NVFP4 in the tiled layout (cuda/nvfp4_tiled.h)
  bool lanes = false;    // tiled, lane-major pieces (nvfp4_lanes_default / FT_NVFP4_LANES; scales_clean only)
  bool scales_clean = false;  // NVFP4 without the UE4M3 NaN codes (cuda/nvfp4_scan.h; GemvArgs::scales_clean)
};

struct DevLinear {
  std::vector<DevMatrix> parts;       // one when fused
  const float* row_scale = nullptr;   // device {rows}; set when a fused part needs its own scale
  int64_t rows = 0;
  int64_t k = 0;
  bool empty() const { return parts.empty(); }
};

struct DevExpertTensor {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;  // device, expert 0 (nullptr when the experts stay on the host)
  int64_t row_bytes = 0;
  int64_t expert_bytes = 0;
  int64_t rows = 0;  // per expert
  int64_t k = 0;
  explicit operator bool() const { return rows > 0; }
};

struct DevExperts {
  DevExpertTensor gate, up, gate_up, down;
  const float* bank = nullptr;  // device [n_expert][4] = (gate, up, down, 1)
  int64_t n_expert = 0, n_embd = 0, n_ff = 0;
  bool gelu = false;  // GeGLU (tanh GELU) experts (gemma4) instead of SwiGLU
};

struct DevLayer {
  const float* attn_norm = nullptr;
  DevLinear qkv;
  const float* q_norm = nullptr;  // optional
  const float* k_norm = nullptr;
  DevLinear wo;
  const float* ffn_norm = nullptr;
  DevLinear gate_up, down;  // dense
  DevLinear router;         // MoE
  DevExperts experts;
  bool moe = false;
  // qwen35 / qwen35moe (gpu/forward_qwen35.cpp). Gated DeltaNet layers:
  DevLinear gdn_in;                     // {n_embd} -> qkv (conv_dim) | z | beta (H_v) | alpha (H_v)
  DevLinear gdn_out;                    // ssm_out {value_dim} -> {n_embd}
  const float* gdn_conv1d = nullptr;    // [conv_dim][d_conv]
  const float* gdn_dt_bias = nullptr;   // [H_v]
  const float* gdn_a = nullptr;         // [H_v], -exp(A_log)
  const float* gdn_norm = nullptr;      // [d], gated RMSNorm weight
  // Shared expert beside the routed ones, scaled by sigmoid(gate_inp_shexp . h):
  DevLinear gate_up_shexp, down_shexp, gate_inp_shexp;
  // gemma4 (gpu/forward_gemma4.cpp): post-norms, the MoE layer's extra norms and router input
  // scale, the per-layer input gate, the layer output scale. Its MoE layers also carry the
  // dense MLP (gate_up, down above).
  const float* post_attn_norm = nullptr;
  const float* post_ffw_norm = nullptr;
  const float* pre_ffw_norm_2 = nullptr;
  const float* post_ffw_norm_1 = nullptr;
  const float* post_ffw_norm_2 = nullptr;
  const float* router_in_scale = nullptr;  // {n_embd} ffn_gate_inp.scale
  DevLinear pl_inp_gate, pl_proj;          // {n_embd} -> {n_pl} -> {n_embd}
  const float* pl_post_norm = nullptr;
  float out_scale = 1.0f;
  bool v_from_k = false;  // no attn_v: V is the raw K projection
};

class DeviceWeights {
 public:
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  // Throws ft::Error (naming the tensor) for a type the GPU kernels do not handle.
  // upload_experts = false: routed expert tensors are described (type, shapes) but not
  // uploaded (w = nullptr); an offload-family MoE backend keeps them in host banks.
  // tile_nvfp4: the session decodes on the integer path (GpuNumerics::q8), so the layers' dense
  // NVFP4 projections that cuda::gemv_nvfp4_tile_wanted names are stored tiled
  // (cuda/nvfp4_tiled.h). FT_NVFP4_TILE=0 tiles none, =all every one that can be (tests).
  DeviceWeights(const model::Model& m, const Progress& progress, bool upload_experts = true, bool tile_nvfp4 = false);

  size_t bytes() const { return arena_.bytes(); }
  int tiled_count() const { return tiled_count_; }
  int lanes_count() const { return lanes_count_; }  // of those, lane-major (nvfp4_lanes_default / FT_NVFP4_LANES)
  // NVFP4 matrices the scan (on unless FT_NVFP4_SCAN=0) found free of the UE4M3 NaN codes (0 when it did not run).
  int clean_count() const { return clean_count_; }

  DevMatrix token_embd;  // rows = n_vocab, k = n_embd
  const float* output_norm = nullptr;
  DevLinear output;
  std::vector<DevLayer> layers;
  // gemma4 per-layer input embeddings (absent: rows 0).
  DevMatrix per_layer_token_embd;    // rows = n_vocab, k = n_pl * n_layer
  DevLinear per_layer_model_proj;    // {n_embd} -> {n_pl * n_layer}
  const float* per_layer_proj_norm = nullptr;

 private:
  cuda::DeviceBuffer arena_;
  int tiled_count_ = 0;
  int lanes_count_ = 0;
  int clean_count_ = 0;
};

}  // namespace ft::gpu
