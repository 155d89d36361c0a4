// KV cache and causal multi-head attention with grouped KV heads (README §C.5).
//
//   score[j] = scale * <q_h, k_g[j]>,  g = h / (n_head / n_head_kv),  j <= p_q
//              (and p_q - j < window for a sliding-window layer)
//   a = softmax(score) (fp32, max subtracted, sum accumulated in double as ggml)
//   o_h = sum_j a[j] * v_g[j]
//
// The cache stores K and V in the activation dtype (fp32, bf16 or fp16).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/exec.h"

namespace ft::engine {

class KvCache {
 public:
  // kv_dim[il] = n_head_kv * head_dim of layer il (0 for a layer without attention).
  // n_cells[il] (optional, 0 = n_ctx): rows kept for layer il. A sliding-window layer keeps
  // only window + n_ubatch - 1 rows as a ring (position p in row p % n_cells): enough for
  // every query of a batch to see its whole window.
  KvCache(ActType type, int64_t n_ctx, const std::vector<int64_t>& kv_dim,
          const std::vector<int64_t>& n_cells = {});

  ActType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_cells(int64_t il) const { return cells_[il]; }
  size_t bytes() const;

  // Writes n_tok rows of K and V (fp32, ld apart) of layer il at positions pos0.. .
  void store(int64_t il, int64_t pos0, int64_t n_tok, const float* k, int64_t ldk, const float* v,
             int64_t ldv);
  // Row of K/V at position pos, converted to fp32 into dst (kv_dim elements, or n from offset).
  void load_k(int64_t il, int64_t pos, int64_t off, int64_t n, float* dst) const;
  void load_v(int64_t il, int64_t pos, int64_t off, int64_t n, float* dst) const;

  // Raw row pointers for the fast paths (element size esize()).
  const void* k_row(int64_t il, int64_t pos) const { return k_[il].data() + row_of(il, pos) * kv_dim_[il] * esize_; }
  const void* v_row(int64_t il, int64_t pos) const { return v_[il].data() + row_of(il, pos) * kv_dim_[il] * esize_; }
  int64_t esize() const { return esize_; }

  // Cell-addressed access for a paged cache (engine/kv_pages.h), where a position's cell
  // comes from its sequence's page table instead of the position itself.
  int64_t cell_of(int64_t il, int64_t pos) const { return row_of(il, pos); }
  const void* k_cell(int64_t il, int64_t cell) const { return k_[il].data() + cell * kv_dim_[il] * esize_; }
  const void* v_cell(int64_t il, int64_t cell) const { return v_[il].data() + cell * kv_dim_[il] * esize_; }
  void load_k_cell(int64_t il, int64_t cell, int64_t off, int64_t n, float* dst) const;
  void load_v_cell(int64_t il, int64_t cell, int64_t off, int64_t n, float* dst) const;
  // Writes n_tok rows of K and V of layer il into cells[0..n_tok).
  void store_cells(int64_t il, const int64_t* cells, int64_t n_tok, const float* k, int64_t ldk,
                   const float* v, int64_t ldv);

 private:
  int64_t row_of(int64_t il, int64_t pos) const { return pos < cells_[il] ? pos : pos % cells_[il]; }

  ActType type_;
  int64_t n_ctx_;
  int64_t esize_;
  std::vector<int64_t> kv_dim_;
  std::vector<int64_t> cells_;
  std::vector<std::vector<uint8_t>> k_, v_;
};

struct AttnShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;
  int64_t window = 0;  // sliding window: keys with p_q - p_k >= window are masked (0: none)
};

// Per-thread scratch for attention: scores over the whole context.
struct AttnScratch {
  std::vector<float> buf;  // n_threads * (n_ctx + 2*head_dim)
  void reserve(int n_threads, int64_t n_ctx, int64_t head_dim);
};

// Queries q (n_tok rows, ldq apart, heads contiguous) at positions pos0 + t attend to the
// cached keys 0 .. pos0 + t of layer il (causal; only the last s.window ones when set). Writes n_tok rows of n_head*head_dim_v to out.
void attention(const Exec& ex, const AttnShape& s, const KvCache& kv, int64_t il, const float* q,
               int64_t ldq, int64_t n_tok, int64_t pos0, float* out, int64_t ldo, AttnScratch& sc);

// One sequence's rows in a batch of several sequences (engine/batch_runner.h): query rows
// row0 .. row0+n_tok-1 at positions pos0.., whose keys 0 .. pos0+n_tok-1 live in the cells
// cells[pos] of the cache.
struct AttnSeq {
  int64_t row0 = 0;
  int64_t n_tok = 0;
  int64_t pos0 = 0;
  const int64_t* cells = nullptr;
};

// attention() for each sequence of a batch over its own cells, in one parallel loop. Each
// sequence is summed exactly as attention() sums a call with its n_tok tokens, so a
// sequence's output does not depend on what else is in the batch.
void attention_seqs(const Exec& ex, const AttnShape& s, const KvCache& kv, int64_t il,
                    const float* q, int64_t ldq, const AttnSeq* seqs, int64_t n_seq, float* out,
                    int64_t ldo, AttnScratch& sc);

// Straightforward single-threaded twin used by the tests.
void attention_ref(const AttnShape& s, const KvCache& kv, int64_t il, const float* q, int64_t ldq,
                   int64_t n_tok, int64_t pos0, float* out, int64_t ldo, ActType act);

}  // namespace ft::engine
