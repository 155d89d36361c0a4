// Causal attention with an optional sliding window over a ring-buffer KV cache, for head
// dims the flash kernels of attention.h do not take (up to 512): the CUDA twin of
// engine::attention with AttnShape::window and KvCache's n_cells (engine/attention.h).
//
//   keys of the query at position p:  j in [max(0, p - window + 1), p]   (window 0: [0, p])
//   key j lives in cache row j % n_cells (n_cells = n_ctx: a plain cache; a sliding layer
//   keeps window + n_ubatch - 1 rows, enough for every query of a batch to see its window)
//   score[j] = scale * <q_h, k_g[j]>,  g = h / (n_head / n_head_kv)
//   o_h      = round( sum_j softmax(score)[j] * v_g[j] )      (fp32, online softmax)
//
// One block per (token, head, key split), 8 warps splitting the block's keys, each with its
// own online softmax, merged through shared memory. Decode (n_tok <= kAttnDecodeMaxTokens,
// with a workspace) splits each head's keys over up to kWindowAttnMaxSplits blocks of 64
// keys, merged by a second launch: one block per head would leave 16 blocks for 132 SMs and
// walk ~600 keys serially. Positions are read on the device (d_pos) and the grids depend on
// n_tok and the cache size only, so a decode step can be graph-captured. Plain SIMT.
//
// Supported: head_dim in {64, 128, 256, 512}, n_head a multiple of n_head_kv. Else ft::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention.h"
#include "cuda/round.h"

namespace ft::cuda {

struct WindowAttnArgs {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;  // K and V share the head dim
  float scale = 1.0f;
  const float* q = nullptr;  // n_tok rows ldq apart, head h at q + t*ldq + h*head_dim
  int64_t ldq = 0;
  int64_t n_tok = 0;
  const int32_t* d_pos = nullptr;  // DEVICE pointer: position of the first query token
  int64_t window = 0;              // 0: full causal attention
  int64_t n_cells = 0;             // cache rows (ring size)
  KvType kv_type = KvType::kF32;
  const void* k_cache = nullptr;  // [n_cells][n_head_kv*head_dim]
  const void* v_cache = nullptr;
  float* out = nullptr;  // n_tok rows of n_head*head_dim, ldo apart
  int64_t ldo = 0;
  Round round = Round::kNone;
  // Decode split-K partials (attention_window_workspace_bytes); nullptr: one block per head.
  float* ws = nullptr;
};

inline constexpr int64_t kWindowAttnMaxSplits = 64;
inline constexpr int64_t kWindowAttnSplitKeys = 64;

// Workspace for decode calls of up to kAttnDecodeMaxTokens tokens.
size_t attention_window_workspace_bytes(int64_t n_head, int64_t head_dim);

// Writes n_tok rows of K and V (kv_dim floats each, converted to the cache type, nearest
// even) at rows (*d_pos + t) % n_cells.
void kv_store_ring(KvType type, void* k_cache, void* v_cache, int64_t kv_dim, const float* k, int64_t ldk,
                   const float* v, int64_t ldv, int64_t n_tok, const int32_t* d_pos, int64_t n_cells,
                   cudaStream_t s);

void attention_window(const WindowAttnArgs& a, cudaStream_t s);

}  // namespace ft::cuda
