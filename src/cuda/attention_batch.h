// Decode attention for a batch of tokens from several sequences (continuous batching,
// gpu/batch_runner_gpu.cpp): token t attends to keys 0 .. d_pos[t] of its own sequence,
// whose rows start at cache row d_base[t] (a slot of n_ctx rows in a cache of
// max_seqs x n_ctx rows). One launch for all tokens of a step, whatever sequences they
// belong to; decode tokens and prompt-chunk tokens alike (a chunk token at position p sees
// the chunk's keys up to p, stored before this call). The math of attention.h:
//
//   score[j] = scale * <q_h, k_g[j]>,  g = h / (n_head / n_head_kv),  j <= d_pos[t]
//   o_h      = round( sum_j softmax(score)[j] * v_g[j] )     (fp32, online softmax)
//
// Kernel: one block per (token, KV head, group of up to 8 query heads): each K/V row is read
// once for the query heads of its group; the block's warps take keys in turn with an online
// softmax each, merged in shared memory at the end. No workspace; grids depend on n_tok only,
// so a step is capturable in a CUDA graph. CPU twin: engine::attention_ref per token
// (tests/cuda/gpu_batch_attention_test.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention.h"
#include "cuda/round.h"

namespace ft::cuda {

struct AttnBatchArgs {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;  // head_dim_k == head_dim_v in {32, 64, 128, 256}
  float scale = 1.0f;
  const float* q = nullptr;  // device: n_tok rows ldq apart, head h at q + t*ldq + h*head_dim
  int64_t ldq = 0;
  int64_t n_tok = 0;
  const int32_t* d_pos = nullptr;   // device [n_tok]: position of token t in its sequence
  const int32_t* d_base = nullptr;  // device [n_tok]: first cache row of token t's sequence
  KvType kv_type = KvType::kF32;
  const void* k_cache = nullptr;  // rows of n_head_kv*head_dim elements (attention.h layout)
  const void* v_cache = nullptr;
  float* out = nullptr;  // device: n_tok rows of n_head*head_dim floats, ldo apart
  int64_t ldo = 0;
  Round round = Round::kNone;
};

void attention_decode_batch(const AttnBatchArgs& a, cudaStream_t s);

}  // namespace ft::cuda
