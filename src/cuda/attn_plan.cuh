// Index arithmetic of the attention kernels (attention_decode.cu, attention_prefill.cu),
// host- and device-callable so that tests/cuda/attention_test.cpp checks it without a
// GPU: the decode split plan, the row <-> (token, head) mapping and kv_store's element map.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FT_ATTN_HD __host__ __device__
#else
#define FT_ATTN_HD
#endif

namespace ft::cuda::attn_detail {

// Query rows per block of the SIMT kernel: the rows of one KV head are (token, head of the
// group) pairs, row i = t*group + (h - g*group); a block takes 16 consecutive ones.
inline constexpr int kRowsPerBlock = 16;
// Decode chunks are whole multiples of this many keys.
inline constexpr int64_t kChunkUnit = 64;
// Most splits of one row's keys (bounds the workspace): 128 x 64 keys = 8k keys before the
// chunks grow past one unit.
inline constexpr int64_t kMaxSplits = 128;

FT_ATTN_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits that the decode grid provides for a cache of n_ctx rows: enough blocks to fill the
// GPU (target_blocks over all KV heads and row blocks), at most kMaxSplits, at least 1, and
// never more than the chunk units the cache holds. `unit`: kChunkUnit for the SIMT kernel,
// kDecodeUnit (attn_decode_tuning.cuh) for the dedicated decode kernel.
FT_ATTN_HD inline int64_t decode_splits(int64_t n_ctx, int64_t n_head_kv, int64_t row_blocks, int64_t target_blocks,
                                        int64_t unit = kChunkUnit) {
  int64_t s = ceil_div(target_blocks, n_head_kv * row_blocks);
  const int64_t units = ceil_div(n_ctx, unit);
  if (s > kMaxSplits) s = kMaxSplits;
  if (s > units) s = units;
  if (s < 1) s = 1;
  return s;
}

// How n_kv live keys are cut into at most `splits` chunks of a whole number of units:
// chunk c covers keys [c*chunk, min((c+1)*chunk, n_kv)) for c < n_chunks. The decode kernel
// and the combine kernel both evaluate it from the position they read on the device.
struct DecodePlan {
  int64_t chunk;     // keys per chunk, a multiple of the unit
  int64_t n_chunks;  // live chunks, 1 <= n_chunks <= splits
};

FT_ATTN_HD inline DecodePlan decode_plan(int64_t n_kv, int64_t splits, int64_t unit = kChunkUnit) {
  if (n_kv < 1) n_kv = 1;
  const int64_t units = ceil_div(n_kv, unit);
  const int64_t chunk = ceil_div(units, splits) * unit;
  return DecodePlan{chunk, ceil_div(n_kv, chunk)};
}

// decode_plan with chunks of at least min_chunk keys (a multiple of unit; 0: none): fewer live
// chunks -- and so fewer partials to merge -- at short context.
FT_ATTN_HD inline DecodePlan decode_plan_min(int64_t n_kv, int64_t splits, int64_t unit, int64_t min_chunk) {
  DecodePlan pl = decode_plan(n_kv, splits, unit);
  if (pl.chunk < min_chunk) pl = DecodePlan{min_chunk, ceil_div(n_kv < 1 ? 1 : n_kv, min_chunk)};
  return pl;
}

// Keys the queries of a call see: all rows up to the last token's position, clamped to the
// cache (a position past the cache would otherwise read outside it).
FT_ATTN_HD inline int64_t live_keys(int64_t pos, int64_t n_tok, int64_t n_ctx) {
  int64_t n = pos + n_tok;
  if (n > n_ctx) n = n_ctx;
  if (n < 1) n = 1;
  return n;
}

// Row i of KV head g: token i / group, query head g*group + i % group.
struct RowRef {
  int64_t t, h;
};
FT_ATTN_HD inline RowRef row_ref(int64_t i, int64_t g, int64_t group) { return RowRef{i / group, g * group + i % group}; }

// kv_store's element i of n_tok*(k_dim + v_dim): the K elements of every token, then the V
// ones; source index in k or v (ld apart) and destination index in the cache at row pos + t.
struct KvSlot {
  bool is_v;
  int64_t src, dst;
};
FT_ATTN_HD inline KvSlot kv_slot(int64_t i, int64_t n_tok, int64_t k_dim, int64_t v_dim, int64_t ldk, int64_t ldv,
                                 int64_t pos) {
  const int64_t n_k = n_tok * k_dim;
  if (i < n_k) {
    const int64_t t = i / k_dim, c = i % k_dim;
    return KvSlot{false, t * ldk + c, (pos + t) * k_dim + c};
  }
  const int64_t t = (i - n_k) / v_dim, c = (i - n_k) % v_dim;
  return KvSlot{true, t * ldv + c, (pos + t) * v_dim + c};
}

}  // namespace ft::cuda::attn_detail
