// Per-head RMSNorm (qwen3's q/k norm) and rotary position embedding, in place, for the q
// and k heads of a fused qkv row: the CUDA twin of engine::rmsnorm_heads followed by
// engine::rope_apply (model/decoder.cpp attention_block).
//
// Row t of x (ld apart) holds n_head q heads of hd elements at x + t*ld + h*hd, then
// n_head_kv k heads right after them (v, further on, is untouched). Per head:
//   norm (when its weight is given):  y = round(x * s * w), s as engine::rmsnorm_row
//   rope:  pairs (2i, 2i+1) (neox = false) or (i, i + n_rot/2) (neox = true), i < n_rot/2:
//          a' = round(fma(a, c, -(b*s))),  b' = round(fma(a, s, b*c))   (as engine::rope_apply)
//   elements [n_rot, hd) keep the norm's output.
// q_norm_w / k_norm_w {hd} may be nullptr (no norm for those heads).
// cs: device table of {cos, sin} per pair, row p (position p) at cs + p*n_rot, built on the
// host with engine::rope_angles so that angles are bit-identical to the CPU's. Token t is
// at position *d_pos + t (read on the device, for graph capture); the table must have a
// row for it. One warp per head, 4 heads per block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/attention.h"
#include "cuda/round.h"

namespace ft::cuda {

// Largest head_dim the kernel takes (a head is staged in shared memory).
inline constexpr int64_t kRopeMaxHeadDim = 512;

void qk_norm_rope(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                  const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot, bool neox,
                  const int32_t* d_pos, Round r, cudaStream_t s);

// Where qk_norm_rope_store puts the token's K and V: k heads after the norm and the rotation
// and the v heads (n_head_kv x v_head_dim floats at v + t*ldv) converted as kv_store does, at
// cache row *d_pos + t (caches of n_head_kv*hd and n_head_kv*v_head_dim elements per row).
struct KvStore {
  KvType type = KvType::kF32;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const float* v = nullptr;
  int64_t ldv = 0;
  int64_t v_head_dim = 0;
};

// qk_norm_rope followed by kv_store of the same rows, in one launch (the decode path: one
// kernel fewer per layer). Same results, bit for bit.
void qk_norm_rope_store(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                        const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                        bool neox, const int32_t* d_pos, Round r, const KvStore& kv, cudaStream_t s);

// qk_norm_rope_store for a batch of tokens from several sequences (continuous batching,
// gpu/batch_forward.cpp): token t sits at its own position d_pos[t] (d_pos is per token here)
// and its K/V row goes to cache row d_base[t] + d_pos[t], d_base[t] the first row of its
// sequence's slot in a cache of max_seqs x n_ctx rows. The same kernel as
// qk_norm_rope_store, so a token gets bit-identical q, K and V either way. Both arrays are
// read on the device (graph capture).
void qk_norm_rope_store_batch(float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t n_head_kv, int64_t hd,
                              const float* q_norm_w, const float* k_norm_w, float eps, const float* cs, int n_rot,
                              bool neox, const int32_t* d_pos, const int32_t* d_base, Round r, const KvStore& kv,
                              cudaStream_t s);

}  // namespace ft::cuda
