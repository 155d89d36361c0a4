// qk_norm_rope_store (rope.h) for a batch of tokens from several sequences: token t sits at
// its own position d_pos[t] and its K/V row goes to cache row d_base[t] + d_pos[t], where
// d_base[t] is the first row of its sequence's slot in a cache of max_seqs x n_ctx rows
// (gpu/batch_runner_gpu.cpp). The arithmetic is qk_norm_rope_store's, element for element,
// so a token gives bit-identical q, K and V whichever way it is run. Both arrays are read on
// the device (graph capture).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/rope.h"

namespace ft::cuda {

void qk_norm_rope_store_batch(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                              const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                              bool neox, const int32_t* d_pos, const int32_t* d_base, Round r, const KvStore& kv,
                              cudaStream_t s);

}  // namespace ft::cuda
