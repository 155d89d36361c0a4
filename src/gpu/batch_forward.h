// What GpuForward needs to run the tokens of several sequences in one forward
// (gpu/batch_runner_gpu.h): per token a position and the first cache row of its sequence's
// KV slot; per sequence the row whose logits the head computes. GpuBuffers::batch points at
// one while a batch runner steps; null for a single sequence at *pos.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct GpuBuffers;
struct GpuNumerics;
struct DevLayer;

struct BatchRows {
  const int32_t* pos = nullptr;   // device [n_tok]: position of each token in its sequence
  const int32_t* base = nullptr;  // device [n_tok]: its sequence's first KV-cache row (slot * n_ctx)
  const int32_t* out_rows = nullptr;  // device [n_out]: the token rows whose logits are wanted
  int64_t n_out = 0;
  float* logits = nullptr;  // device [n_out][n_vocab] fp32 (Head::kRows)
  // The attention's split over keys (cuda::AttnBatchArgs::workspace) for a step's first attn_split_tokens
  // tokens; null: each token's keys in one block.
  void* attn_ws = nullptr;
  int64_t attn_split_tokens = 0;
};

// The attention half of a layer between the qkv projection and W_o, for a batch: q/k norm +
// rope at each token's position, K and V into its slot, attention of each token over its
// own sequence (cuda/attention_batch.h); reads b.qkv, writes b.attn (and its Q8 copy into out_q8 where
// given: the wo GEMV's input).
void batch_attention(const model::Model& m, const DevLayer& L, int64_t il, GpuBuffers& b, const GpuNumerics& num,
                     int64_t n_tok, cudaStream_t s, void* out_q8 = nullptr);

}  // namespace ft::gpu
