#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/proc_mem.h"
#include "engine/vec_math.h"

namespace ft::engine {

KvCache::KvCache(ActType type, int64_t n_ctx, const std::vector<int64_t>& kv_dim,
                 const std::vector<int64_t>& n_cells)
    : type_(type), n_ctx_(n_ctx), esize_(type == ActType::kF32 ? 4 : 2), kv_dim_(kv_dim) {
  // Refused before allocating: a context past the machine's memory was a bare "out of memory" (bad_alloc).
  double need = 0.0;
  for (size_t il = 0; il < kv_dim.size(); ++il) {
    const int64_t cells = il < n_cells.size() && n_cells[il] > 0 ? std::min(n_ctx, n_cells[il]) : n_ctx;
    need += 2.0 * static_cast<double>(cells) * static_cast<double>(kv_dim[il]) * static_cast<double>(esize_);
  }
  if (const int64_t ram = physical_memory_bytes(); ram > 0 && need > static_cast<double>(ram))
    fail("--ctx-size {}: the KV cache would take {:.1f} GiB, more than this machine's {:.1f} GiB of memory", n_ctx,
         need / double(1 << 30), static_cast<double>(ram) / double(1 << 30));
  k_.resize(kv_dim.size());
  v_.resize(kv_dim.size());
  cells_.assign(kv_dim.size(), n_ctx);
  for (size_t il = 0; il < kv_dim.size(); ++il) {
    if (il < n_cells.size() && n_cells[il] > 0) cells_[il] = std::min(n_ctx, n_cells[il]);
    k_[il].assign(static_cast<size_t>(cells_[il] * kv_dim[il] * esize_), 0);
    v_[il].assign(static_cast<size_t>(cells_[il] * kv_dim[il] * esize_), 0);
  }
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (size_t il = 0; il < k_.size(); ++il) b += k_[il].size() + v_[il].size();
  return b;
}

namespace {

void put_row(ActType t, const float* src, int64_t n, uint8_t* dst) {
  switch (t) {
    case ActType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case ActType::kBF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
    } break;
    case ActType::kF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
    } break;
  }
}

void get_row(ActType t, const uint8_t* src, int64_t n, float* dst) {
  switch (t) {
    case ActType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case ActType::kBF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
    } break;
    case ActType::kF16: {
      const auto* s = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
    } break;
  }
}

}  // namespace

void KvCache::store(int64_t il, int64_t pos0, int64_t n_tok, const float* k, int64_t ldk,
                    const float* v, int64_t ldv) {
  const int64_t d = kv_dim_[il];
  for (int64_t t = 0; t < n_tok; ++t) {
    put_row(type_, k + t * ldk, d, k_[il].data() + row_of(il, pos0 + t) * d * esize_);
    put_row(type_, v + t * ldv, d, v_[il].data() + row_of(il, pos0 + t) * d * esize_);
  }
}

void KvCache::store_cells(int64_t il, const int64_t* cells, int64_t n_tok, const float* k,
                          int64_t ldk, const float* v, int64_t ldv) {
  const int64_t d = kv_dim_[il];
  for (int64_t t = 0; t < n_tok; ++t) {
    put_row(type_, k + t * ldk, d, k_[il].data() + cells[t] * d * esize_);
    put_row(type_, v + t * ldv, d, v_[il].data() + cells[t] * d * esize_);
  }
}

void KvCache::load_k_cell(int64_t il, int64_t cell, int64_t off, int64_t n, float* dst) const {
  get_row(type_, k_[il].data() + (cell * kv_dim_[il] + off) * esize_, n, dst);
}
void KvCache::load_v_cell(int64_t il, int64_t cell, int64_t off, int64_t n, float* dst) const {
  get_row(type_, v_[il].data() + (cell * kv_dim_[il] + off) * esize_, n, dst);
}

void KvCache::load_k(int64_t il, int64_t pos, int64_t off, int64_t n, float* dst) const {
  get_row(type_, k_[il].data() + (row_of(il, pos) * kv_dim_[il] + off) * esize_, n, dst);
}
void KvCache::load_v(int64_t il, int64_t pos, int64_t off, int64_t n, float* dst) const {
  get_row(type_, v_[il].data() + (row_of(il, pos) * kv_dim_[il] + off) * esize_, n, dst);
}

void AttnScratch::reserve(int n_threads, int64_t n_ctx, int64_t head_dim) {
  const size_t need = static_cast<size_t>(n_threads) * static_cast<size_t>(n_ctx + 2 * head_dim);
  if (buf.size() < need) buf.resize(need);
}

namespace {

// First key position a query at position p sees (the sliding window's start).
inline int64_t first_key(const AttnShape& s, int64_t p) {
  return s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
}

// One (token, head): scores over keys [j0, n_kv), softmax, weighted sum of V, each step
// rounded as llama.cpp's CPU backend rounds its non-flash attention on an F32 cache, since
// the output feeds a Q8-rounded projection where one ulp can flip a rounding
// (tests/oracle/drift_probe_test.cpp):
//   scores   ggml_vec_dot_f32 (vec_math.h dot_f32), times the scale;
//   softmax  ggml's soft_max over the key row padded to a multiple of 8 (exp_sum);
//   V sum    one token: ggml_vec_dot_f32 over the keys (fused multiply-adds into 32 lanes by
//            key index mod 32, then its reduction); a batch (ggml hands >= 2 tokens to
//            llamafile's sgemm): 8 lanes by key index mod 8, summed as (l + l+4) pairs,
//            then (0+2) + (1+3).
// Lanes are indexed by key position, which is ggml's KV cell index on a cache that does
// not wrap (a sliding-window ring reorders cells there).
// `tmp` holds n_kv scores followed by head_dim_k + head_dim_v floats of conversion space.
// `cell(j)` is the cache cell of key position j.
template <class CellOf>
void attend_one(const AttnShape& s, const KvCache& kv, int64_t il, const float* q, int64_t j0,
                int64_t n_kv, int64_t g, float* o, float* tmp, ActType act, bool batched,
                const CellOf& cell) {
  float* score = tmp;
  float* row = tmp + n_kv;
  const int64_t dk = s.head_dim_k, dv = s.head_dim_v;
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = j0; j < n_kv; ++j) {
    float d;
    if (kv.type() == ActType::kF32) {
      d = dot_f32(q, static_cast<const float*>(kv.k_cell(il, cell(j))) + g * dk, dk);
    } else {
      kv.load_k_cell(il, cell(j), g * dk, dk, row);
      d = dot_f32(q, row, dk);
    }
    score[j] = d * s.scale;
    mx = std::max(mx, score[j]);
  }
  const float inv = static_cast<float>(1.0 / exp_sum(score, j0, n_kv, mx, true));
  const int64_t lanes = batched ? 8 : 32;
  thread_local std::vector<float> acc;  // [lanes][dv]
  acc.assign(static_cast<size_t>(lanes * dv), 0.0f);
  for (int64_t j = j0; j < n_kv; ++j) {
    const float* v;
    if (kv.type() == ActType::kF32) {
      v = static_cast<const float*>(kv.v_cell(il, cell(j))) + g * dv;
    } else {
      kv.load_v_cell(il, cell(j), g * dv, dv, row);
      v = row;
    }
    mad_f32(acc.data() + (j % lanes) * dv, v, score[j] * inv, dv);
  }
  const float* a = acc.data();
  for (int64_t i = 0; i < dv; ++i) {
    float t[4];
    if (batched) {
      for (int l = 0; l < 4; ++l) t[l] = a[l * dv + i] + a[(l + 4) * dv + i];
      o[i] = round_act(act, (t[0] + t[2]) + (t[1] + t[3]));
    } else {
      float x[8];
      for (int l = 0; l < 8; ++l)
        x[l] = (a[l * dv + i] + a[(16 + l) * dv + i]) + (a[(8 + l) * dv + i] + a[(24 + l) * dv + i]);
      for (int l = 0; l < 4; ++l) t[l] = x[l] + x[l + 4];
      o[i] = round_act(act, (t[0] + t[1]) + (t[2] + t[3]));
    }
  }
}

}  // namespace

void attention(const Exec& ex, const AttnShape& s, const KvCache& kv, int64_t il, const float* q,
               int64_t ldq, int64_t n_tok, int64_t pos0, float* out, int64_t ldo, AttnScratch& sc) {
  const int64_t group = s.n_head / s.n_head_kv;
  const int64_t per_thread = kv.n_ctx() + s.head_dim_k + s.head_dim_v;
  sc.reserve(ex.pool->size(), kv.n_ctx(), std::max(s.head_dim_k, s.head_dim_v));
  const int64_t n = n_tok * s.n_head;
  const ActType act = ex.act;
  const auto cell = [&](int64_t j) { return kv.cell_of(il, j); };
  ex.pool->parallel_for(n, 1, [&](int64_t i0, int64_t i1, int tid) {
    float* tmp = sc.buf.data() + tid * per_thread;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / s.n_head, h = i % s.n_head;
      attend_one(s, kv, il, q + t * ldq + h * s.head_dim_k, first_key(s, pos0 + t), pos0 + t + 1,
                 h / group, out + t * ldo + h * s.head_dim_v, tmp, act, n_tok > 1, cell);
    }
  });
}

void attention_seqs(const Exec& ex, const AttnShape& s, const KvCache& kv, int64_t il,
                    const float* q, int64_t ldq, const AttnSeq* seqs, int64_t n_seq, float* out,
                    int64_t ldo, AttnScratch& sc) {
  const int64_t group = s.n_head / s.n_head_kv;
  const int64_t per_thread = kv.n_ctx() + s.head_dim_k + s.head_dim_v;
  sc.reserve(ex.pool->size(), kv.n_ctx(), std::max(s.head_dim_k, s.head_dim_v));
  // Work item i = (row, head) over all sequences' rows; seq_of maps a row to its sequence.
  thread_local std::vector<int32_t> seq_of;
  int64_t n_rows = 0;
  for (int64_t b = 0; b < n_seq; ++b) n_rows = std::max(n_rows, seqs[b].row0 + seqs[b].n_tok);
  seq_of.assign(static_cast<size_t>(n_rows), -1);
  for (int64_t b = 0; b < n_seq; ++b)
    for (int64_t t = 0; t < seqs[b].n_tok; ++t) seq_of[seqs[b].row0 + t] = static_cast<int32_t>(b);
  const int32_t* so = seq_of.data();
  const ActType act = ex.act;
  ex.pool->parallel_for(n_rows * s.n_head, 1, [&](int64_t i0, int64_t i1, int tid) {
    float* tmp = sc.buf.data() + tid * per_thread;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = i / s.n_head, h = i % s.n_head;
      if (so[r] < 0) continue;
      const AttnSeq& sq = seqs[so[r]];
      const int64_t p = sq.pos0 + (r - sq.row0);
      const int64_t* cells = sq.cells;
      attend_one(s, kv, il, q + r * ldq + h * s.head_dim_k, first_key(s, p), p + 1, h / group,
                 out + r * ldo + h * s.head_dim_v, tmp, act, sq.n_tok > 1,
                 [cells](int64_t j) { return cells[j]; });
    }
  });
}

void attention_ref(const AttnShape& s, const KvCache& kv, int64_t il, const float* q, int64_t ldq,
                   int64_t n_tok, int64_t pos0, float* out, int64_t ldo, ActType act) {
  const int64_t group = s.n_head / s.n_head_kv;
  std::vector<float> k(static_cast<size_t>(s.head_dim_k)), v(static_cast<size_t>(s.head_dim_v));
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t n_kv = pos0 + t + 1, j0 = first_key(s, pos0 + t);
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t g = h / group;
      const float* qh = q + t * ldq + h * s.head_dim_k;
      std::vector<double> p(static_cast<size_t>(n_kv), 0.0);
      double mx = -1e300;
      for (int64_t j = j0; j < n_kv; ++j) {
        kv.load_k(il, j, g * s.head_dim_k, s.head_dim_k, k.data());
        double d = 0.0;
        for (int64_t i = 0; i < s.head_dim_k; ++i) d += static_cast<double>(qh[i]) * k[i];
        p[j] = d * s.scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0.0;
      for (int64_t j = j0; j < n_kv; ++j) sum += (p[j] = std::exp(p[j] - mx));
      float* o = out + t * ldo + h * s.head_dim_v;
      std::vector<double> acc(static_cast<size_t>(s.head_dim_v), 0.0);
      for (int64_t j = j0; j < n_kv; ++j) {
        kv.load_v(il, j, g * s.head_dim_v, s.head_dim_v, v.data());
        for (int64_t i = 0; i < s.head_dim_v; ++i) acc[i] += p[j] / sum * v[i];
      }
      for (int64_t i = 0; i < s.head_dim_v; ++i) o[i] = round_act(act, static_cast<float>(acc[i]));
    }
  }
}

}  // namespace ft::engine
