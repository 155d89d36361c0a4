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
// Kernel: one block per (token, KV head, group of up to 8 query heads[, chunk of keys]): each
// K/V row is read once for the query heads of its group; the block's warps take keys in turn
// with an online softmax each, merged in shared memory at the end. With a workspace, the keys
// of a step's first split_tokens tokens are cut in chunks of attention_batch_chunk(n_ctx), a
// block each, and the last block of a (token, head group) to finish merges the chunks'
// partials in chunk order (flash-decoding; no second launch). Without it one block walks all
// of a token's keys: for two Llama-8B tokens that is 16 blocks, each warp a chain of loads a
// key -- at depth the GPU idles. Grids depend on n_tok and n_ctx only, so a step is
// capturable in a CUDA graph. CPU twin: engine::attention_ref per token
// (tests/cuda/gpu_batch_attention_test.cpp). The q/k norm, rope and KV store stay their own launch
// (qk_norm_rope_store_batch): inside this one (decode-only steps, each block roping its q heads, the
// new key's block its key) it measured within noise -- H100 session 53 call 5, Llama-8B
// ft-bench-batch, ms a step inside / apart: B=2 3.28 / 3.31, B=4 4.16 / 4.15, B=8 7.15 / 7.11.
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
  // Optional (device, 16-byte aligned): also the integer GEMV's Q8 copy of the output (act_q8.h: rows of
  // n_head*head_dim values, act_q8_row_bytes apart), the bytes quantize_act_q8 writes from `out`: the wo
  // GEMV's input needs no quantise launch.
  void* out_q8 = nullptr;
  // Optional, the split over keys of a step's first split_tokens tokens (the rest walk whole):
  int64_t n_ctx = 0;          // rows of a slot: the chunks are planned from it, never from d_pos
  void* workspace = nullptr;  // attention_batch_workspace_bytes(split_tokens, n_head, n_ctx, head_dim) bytes,
                              // zeroed once (attention_workspace_init) and used by nothing else
  int64_t split_tokens = 0;
};

// Keys a block of the split takes (a multiple of 8, at least 128, at most 64 chunks a slot).
int64_t attention_batch_chunk(int64_t n_ctx);
// The split's workspace: a ticket a (token, query head), then [max_tok][n_head][chunks][head_dim + 2]
// fp32 partials.
size_t attention_batch_workspace_bytes(int64_t max_tok, int64_t n_head, int64_t n_ctx, int64_t head_dim);

void attention_decode_batch(const AttnBatchArgs& a, cudaStream_t s);

}  // namespace ft::cuda
