// Device buffers of one running sequence, all sized at start-up (no allocation per token):
// the residual stream and block scratch for n_ubatch tokens, the KV cache, the RoPE table,
// the Q8 activation buffer, the attention and GEMM workspaces, and pinned host slots that
// the captured decode graph reads (token, position) and writes (argmax).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/attention.h"
#include "cuda/buffer.h"
#include "cuda/gemm.h"
#include "cuda/round.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct Qwen35Buffers;  // gpu/state_qwen35.h
struct Gemma4Buffers;  // gpu/state_gemma4.h

// Bytes of one KV-cache element of type t.
size_t kv_elem_bytes(cuda::KvType t);

// Activation numerics on the GPU (--dtype):
//   float32  : fp32 activations and KV, exact fp32 GEMV/GEMM (the rule (a) mode);
//   bfloat16 / float16 : activations rounded to that dtype between blocks, KV in it,
//              tensor-core GEMMs on that dtype;
//   auto     : fp32 activations, f16 KV, quantised-weight GEMVs on Q8 activations (dp4a),
//              bf16 tensor-core GEMMs: llama.cpp's CUDA numerics, the fast default.
struct GpuNumerics {
  cuda::Round round = cuda::Round::kNone;
  cuda::KvType kv = cuda::KvType::kF32;
  cuda::GemmPrec prec = cuda::GemmPrec::kF32;
  bool q8 = false;
  // auto on gemma4 (gpu/session.cpp, with an fp32 KV cache): prefill GEMMs of weights whose
  // CPU dot type is Q8_0 multiply their input's Q8 values in fp32 (cuda/act_q8.h
  // round_trip_act_q8) instead of bf16 operands, as llama.cpp's CPU build does
  // (gpu/forward_gemma4.cpp, the experts' moe_experts_prefill).
  bool q8_prefill = false;
  // auto on gemma4 too: inputs of BF16 / F16-weight matmuls rounded to bf16 / f16 (ggml-cpu's
  // vec_dot_type) by the kernels that produce them (gpu/forward_gemma4.cpp).
  bool half_inputs = false;
  // Precision of the GEMMs asked to be exact (linear's `exact`: the q8_prefill ones and the
  // routers; the experts' Q8 prefill): kF32, or a split bf16 precision (cuda/gemm.h kBF16x3)
  // that runs weights exact in bf16 on tensor cores and the others at kF32 (gemma4's auto).
  cuda::GemmPrec exact_prec = cuda::GemmPrec::kF32;
};

struct BatchRows;  // gpu/batch_forward.h

struct GpuBuffers {
  // kv_rows: rows of each layer's KV cache (0: n_ctx; a batch runner's max_seqs x n_ctx slots).
  GpuBuffers(const model::Model& m, const GpuNumerics& num, int64_t n_ctx, int64_t n_ubatch, int64_t kv_rows = 0);

  int64_t n_ctx, n_ubatch;
  int64_t n_used = 0;        // max experts per token (0: dense)
  int64_t qkv_ld = 0, attn_ld = 0, gu_ld = 0, max_k = 0;

  cuda::DeviceBuffer x, h, qkv, attn, gu, hh, router, ids, wts;  // activations
  cuda::DeviceBuffer order, offsets, sort_ws, ysort;                // MoE prefill
  cuda::DeviceBuffer xq;                                           // Q8 activations
  cuda::DeviceBuffer logits;                                       // [n_ubatch][n_vocab] fp32
  cuda::DeviceBuffer rope_cs;                                      // [n_ctx][n_rot]
  cuda::DeviceBuffer attn_ws;
  std::vector<cuda::DeviceBuffer> k_cache, v_cache;                // per layer
  std::vector<int64_t> kv_cells;  // rows of each layer's cache (position p in row p % cells)
  cuda::DeviceBuffer tokens, pos, argmax, bad;                     // small device ints
  cuda::DeviceBuffer argmax_ws;                                    // cuda::argmax's split scratch (0)
  cuda::DeviceBuffer route_ticket;                                 // moe_router_route's counter (0)
  // A dense gate|up launch's SwiGLU tail (cuda::GemvArgs::glu_xq): its block counters (0) and its Q8
  // row, apart from xq, which that launch is still reading.
  cuda::DeviceBuffer glu_count, xq_glu;
  // The norm fold (cuda/norm_fold.h; decode): the producing GEMV's Q8 row of y * w (apart from xq
  // and xq_glu, which the producers read), its blocks' sums of squares and its block counters (0).
  cuda::DeviceBuffer xq_n, nq_part, nq_count;
  std::unique_ptr<cuda::Gemm> gemm;
  std::unique_ptr<Qwen35Buffers> q35;  // qwen35 / qwen35moe: Gated DeltaNet state + scratch
  std::unique_ptr<Gemma4Buffers> g4;   // gemma4: sliding rope table, branch and PLE scratch
  // Several sequences in one forward (gpu/batch_runner_gpu.cpp); null: one sequence at *pos.
  const BatchRows* batch = nullptr;

  // Pinned host slots for the graph's copies.
  int32_t* h_tokens = nullptr;  // [n_ubatch]
  int32_t* h_pos = nullptr;
  int32_t* h_argmax = nullptr;  // [n_ubatch]
  float* h_logits = nullptr;    // [n_ubatch][n_vocab]

  size_t kv_bytes = 0, workspace_bytes = 0;

  ~GpuBuffers();
  GpuBuffers(const GpuBuffers&) = delete;
  GpuBuffers& operator=(const GpuBuffers&) = delete;
};

}  // namespace ft::gpu
