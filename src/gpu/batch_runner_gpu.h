// The engine::BatchRunner of the CUDA backend (continuous batching for `ft serve --device
// cuda`, llama / qwen3 / qwen3moe): one GpuForward over the next tokens of every sequence
// of a step, so each weight is read once per step for all of them -- the GEMV family up to
// 8 tokens, the tensor-core GEMM above, the routed experts of all tokens through the
// session's MoeBackend in one call per layer.
//
// KV: one slot of n_ctx rows per sequence in a cache of max_seqs x n_ctx rows per layer
// (allocated at start, so an admitted sequence never runs out); each token carries its
// position and its slot's first row to the rope/store and attention kernels
// (cuda/rope.h qk_norm_rope_store_batch, cuda/attention_batch.h: one launch per layer for all sequences).
// Prefix reuse: a new sequence takes the free slot whose text shares the longest prefix with
// its prompt (the rows past it are overwritten). Decode-only steps replay a CUDA graph per
// batch size (FT_CUDA_GRAPHS=0: off).
//
// Shares the session's weights and MoE backend; the session must not run while this does.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/batch_runner.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

class GpuSession;

// The archs whose GpuForward layers are the decoder blocks the batch forward extends
// (llama, qwen3, qwen3moe); make_batch_runner gives null for the others (served in turn).
bool gpu_batch_supports(const model::Model& m);

std::unique_ptr<engine::BatchRunner> make_gpu_batch_runner(GpuSession& s, int64_t max_seqs, int64_t page_size = 16);

// Registers make_gpu_batch_runner with engine::make_batch_runner (for GpuSession runners).
void register_gpu_batch_runner();

}  // namespace ft::gpu
