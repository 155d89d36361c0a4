// Causal multi-head attention with grouped KV heads over a KV cache on the GPU: the CUDA
// twin of engine::attention / engine::attention_ref (src/engine/attention.h).
//
//   score[j] = scale * <q_h, k_g[j]>,  g = h / (n_head / n_head_kv),  j <= pos + t
//   o_h      = round( sum_j softmax(score)[j] * v_g[j] )     (softmax in fp32, max subtracted)
//
// The position of the first query token is read on the device (d_pos), and every grid is
// sized from the cache capacity n_ctx, so one captured CUDA graph serves every decode step.
//
// Kernels (all accumulate in fp32):
//   decode  (n_tok <= kAttnDecodeMaxTokens): split-K flash-decoding (attn_decode.cuh; the
//           SIMT kernel of the prefill path above 4 tokens). A block takes one KV head, a
//           few of its query rows (token x head of the group, so each K/V row is read once
//           for all of them) and one chunk of keys, read straight from global memory; the
//           chunk length is planned on the device from the live length (attn_plan.cuh). The
//           last blocks to finish merge the chunks (no second launch).
//   prefill (any n_tok): causal flash attention, one block per (query tile, KV head), online
//           softmax over key tiles, no workspace. bf16/f16 caches at head_dim 64/128 use tensor
//           cores (mma.sync m16n8k16, sm_80+); the f32 cache and head_dim 256 use the SIMT
//           kernel. A prompt chunk may start at any position (earlier keys already cached).
//
// Supported: head_dim_k == head_dim_v in {64, 128, 256}; n_head a multiple of n_head_kv;
// 16-byte aligned caches. Violations throw ft::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

inline constexpr int64_t kAttnDecodeMaxTokens = 8;

// The cache stores K and V in the activation dtype (fp32 for --dtype float32, bf16/f16
// otherwise), as engine::KvCache does.
enum class KvType { kF32, kF16, kBF16 };

// Cache layout per layer (the engine allocates it): K [n_ctx][k_dim], V [n_ctx][v_dim] with
// k_dim = n_head_kv*head_dim_k, v_dim = n_head_kv*head_dim_v, rows contiguous (as
// engine::KvCache). Writes n_tok rows of K and V (fp32 in, ldk / ldv floats apart, rounded to
// nearest even) at positions *d_pos .. *d_pos + n_tok - 1 (d_pos: device pointer; the caller
// keeps *d_pos + n_tok <= n_ctx, which this call cannot see).
void kv_store(KvType t, void* k_cache, void* v_cache, int64_t k_dim, int64_t v_dim, const float* k, int64_t ldk,
              const float* v, int64_t ldv, int64_t n_tok, const int32_t* d_pos, cudaStream_t s);

struct AttnArgs {
  int64_t n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  float scale = 1.0f;
  const float* q = nullptr;  // device: n_tok rows ldq apart, head h at q + t*ldq + h*head_dim_k
  int64_t ldq = 0;
  int64_t n_tok = 0;             // query tokens at positions *d_pos + t, attending to keys 0 .. *d_pos + t
  const int32_t* d_pos = nullptr;  // DEVICE pointer to the position of the first query token
  int64_t n_ctx = 0;             // cache capacity (rows); grids are sized from it, never from *d_pos
  // Optional: the most live keys (*d_pos + n_tok) any replay of this call can see (0: n_ctx). The
  // dedicated decode kernel then launches only the chunks that many keys can make live; the chunk
  // plan (and so every sum) still follows n_ctx. A graph of one-token steps below the tensor-core
  // kernel's depth (gpu/session.cpp) passes it: with n_ctx 512 the grid held 16 chunks a head
  // where at most 2 are live, their blocks each holding 64 KB of shared memory through the launch
  // before until its end (the PDL wait). H200 session 31, tg128 alternating, bound on / off:
  // n_ctx 512 Llama-8B 511.49, 511.33 / 504.51, 504.22 tok/s, Qwen3-30B-A3B 536.03, 536.13 / 525.18,
  // 525.61; n_ctx 4096 518.18, 516.77 / 511.90, 510.88 and 539.11, 538.71 / 521.91, 521.59.
  int64_t max_keys = 0;
  KvType kv_type = KvType::kF32;
  const void* k_cache = nullptr;  // this layer's cache (layout above)
  const void* v_cache = nullptr;
  float* out = nullptr;  // device: n_tok rows of n_head*head_dim_v floats, ldo apart
  int64_t ldo = 0;
  Round round = Round::kNone;  // rounding of the output to the activation dtype
  // The caller zeroed the workspace once (attention_workspace_init) and uses it for nothing
  // else: the decode kernel's ticket counters are then zero on entry (every call leaves them
  // zero), so attention() skips the per-call reset (a memset node, which also breaks the
  // programmatic-launch chain).
  bool ws_zeroed = false;
  // Optional (device, 16-byte aligned): also the integer GEMV's Q8 copy of the output
  // (act_q8.h: rows of k = n_head*head_dim_v values, act_q8_row_bytes(k) bytes apart), the
  // bytes quantize_act_q8 writes from `out`. The decode kernel (1..4 tokens) writes the
  // blocks of each head in its epilogue, so the wo GEMV's input needs no quantise launch;
  // the other paths quantise `out` after themselves.
  void* out_q8 = nullptr;
  // One token at depth: the tensor-core decode kernel (attn_decode_mma.cuh) where
  // attention_mma_decode_supported (no qkv_raw: the rope and KV store run before). Faster from a
  // few hundred live keys, slower below (two launches; the session's threshold, gpu/session.cpp
  // kMmaMinKeys, and benches/h200.md sessions 16-17).
  bool decode_mma = false;
  // Optional, the rope inside the decode kernel (attention_fused_rope_supported): q and the new
  // key come raw from qkv_raw (one token: q heads, then k heads, then v heads, head_dim apart;
  // q is not read), are normed (q_norm_w / k_norm_w, rms eps; nullptr: no norm) and rotated
  // (rope table rope_cs of n_rot values a position, at *d_pos; neox pairs or adjacent) exactly as
  // qk_norm_rope_store would, and the new K and V rows are stored into the caches: one launch
  // for qk_norm_rope_store + attention, the same bits.
  const float* qkv_raw = nullptr;
  const float* q_norm_w = nullptr;
  const float* k_norm_w = nullptr;
  float rms_eps = 0.0f;
  const float* rope_cs = nullptr;
  int n_rot = 0;
  bool neox = false;
};

// Whether attention() takes AttnArgs::qkv_raw for these arguments: one token, equal k / v head
// dims of at most 128, the dedicated decode kernel (not the SIMT one forced for tests).
bool attention_fused_rope_supported(const AttnArgs& a);

// Whether AttnArgs::decode_mma takes effect for these arguments (qkv_raw aside): one token,
// head dims 128, a 16-bit cache, GQA groups of at most 8.
bool attention_mma_decode_supported(const AttnArgs& a);
// Calls that ran the tensor-core decode kernel so far (tests: that a path really took it).
int64_t attention_mma_decode_launches();
// Blocks of the last dedicated decode kernel launch (gridDim x * y * z; tests: AttnArgs::max_keys).
int64_t attention_decode_grid_blocks();

// Device workspace that attention() needs for calls of up to max_tok query tokens: 64 KB of
// ticket counters, then the decode split partials, [min(max_tok, 8) * n_head]
// [min(n_ctx/32, 128) splits + 8 merge groups][head_dim + 2] floats (Llama-8B at n_ctx >= 4k:
// 8*32*136*130*4 = 18 MB). Prefill needs none.
size_t attention_workspace_bytes(int64_t n_head, int64_t max_tok, int64_t n_ctx, int64_t head_dim_v);

// Zeroes a workspace once after its allocation (stream-ordered), so that calls may set
// AttnArgs::ws_zeroed.
void attention_workspace_init(void* workspace, size_t bytes, cudaStream_t s);

// Picks decode (n_tok <= kAttnDecodeMaxTokens) or prefill. No host sync, no allocation:
// capturable in a CUDA graph. `workspace` holds attention_workspace_bytes(n_head, n_tok, ...).
void attention(const AttnArgs& a, void* workspace, cudaStream_t s);

// The two paths, for tests and benchmarks.
void attention_decode(const AttnArgs& a, void* workspace, cudaStream_t s);  // n_tok <= kAttnDecodeMaxTokens
void attention_prefill(const AttnArgs& a, cudaStream_t s);                   // any n_tok; no workspace

// Prefill kernel choice for tests and benchmarks (process-wide, not thread-safe):
// 0 automatic (tensor cores for bf16/f16), 1 always the SIMT kernel.
void attention_set_prefill_override(int mode);

// Decode kernel choice for tests and benchmarks (process-wide, not thread-safe): mode 0
// automatic (the dedicated decode kernel, attn_decode.cuh, up to 4 tokens; the SIMT split-K
// kernel + combine kernel above), 1 always the SIMT kernel, 2 always the dedicated kernel, 3 the
// tensor-core decode kernel (attn_decode_mma.cuh: one token, 16-bit caches, head dim 128, groups
// <= 8, the rope inside where attention_mma_rope_on; other calls as in mode 0) + the combine kernel.
// max_rows (1, 2, 4, 8; 0 = tuning default) caps the query rows per decode block,
// blocks_per_sm (0 = default) sets the grid the split plan aims for, and keys_per_slot
// (2, 4; 0 = default; 16-bit caches at head dim 128 only; other values are refused) the keys each
// lane group loads per step.
void attention_set_decode_override(int mode, int max_rows = 0, int blocks_per_sm = 0, int keys_per_slot = 0);
// Keys of its chunk a block of the dedicated decode kernel stages in shared memory before the PDL
// wait (attn_decode_tuning.cuh kDecodeStageKeys): keys >= 0 sets it (0: none), -1 restores the
// default or FT_ATTN_STAGE_KEYS. Process-wide, for tests and benchmarks.
void attention_set_decode_stage(int64_t keys);
// The tensor-core decode kernel (mode 3 / AttnArgs::decode_mma): stages (0, 2) of its per-warp
// K/V ring in shared memory (attn_decode_tuning.cuh kMmaDecodeStages; 0: the first tile in registers
// before the PDL wait, the others loaded one at a time), rope (0 / 1) whether it takes the rope
// inside (AttnArgs::qkv_raw; kMmaDecodeRope), pre (>= 1) the ring's tiles issued before the PDL
// wait (kMmaDecodePre), min_chunk (>= 0) the least keys of a live chunk (kMmaDecodeMinChunk, rounded
// up to the plan's unit; 0 none); -1 restores the default or FT_ATTN_MMA_STAGES / FT_ATTN_MMA_ROPE /
// FT_ATTN_MMA_PRE / FT_ATTN_MMA_PLAN. Process-wide, for tests and benchmarks.
void attention_set_mma_decode(int stages, int rope, int pre = -1, int64_t min_chunk = -1);
// Whether the tensor-core decode kernel takes the rope inside (a caller with qkv_raw and decode_mma
// set gets it where attention_mma_decode_supported holds; otherwise it must rope first).
bool attention_mma_rope_on();

}  // namespace ft::cuda
