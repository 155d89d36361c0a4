// The phases of the SIMT attention kernel (attn_simt.cuh), host- and device-callable: the
// kernel runs them on 128 threads with a barrier between phases; simt_grid_host below runs
// the same functions thread by thread on the CPU, so tests/cuda/attention_test.cpp executes
// the kernel's index arithmetic, masking, chunk plan and combine without a GPU. Only the
// warp-parallel softmax (shuffles) has a separate serial twin here (softmax_row).
//
// Block = 128 threads, one KV head g (blockIdx.y), kRowsPerBlock query rows of that head's
// group (blockIdx.x; attn_plan.cuh row_ref), one chunk of keys (blockIdx.z, decode only).
// Per tile of kT keys:
//   1. stage_kv: the K and V rows of head g in shared memory (16-byte loads; rows past the
//      end are zero so that p = 0 never meets a stale NaN);
//   2. scores: each thread owns one key and kRowsQK rows; the q rows are read as broadcasts
//      and the padded K rows (16 bytes) keep the per-lane row reads conflict-free;
//   3. online softmax: one warp per row updates (m, l) and leaves the probabilities and the
//      rescale factor exp(m_old - m_new) in shared memory;
//   4. pv: each thread owns 8 columns of kRowsPV rows and walks the tile's keys.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "cuda/attn_plan.cuh"
#include "cuda/round.h"

#if defined(__CUDA_ARCH__)  // device pass only: host compilers warn on unknown pragmas
#define FT_ATTN_UNROLL _Pragma("unroll")
#define FT_ATTN_UNROLL4 _Pragma("unroll 4")
#else
#define FT_ATTN_UNROLL
#define FT_ATTN_UNROLL4
#endif

namespace ft::cuda::attn_detail {

struct SimtParams {
  const float* q;
  int64_t ldq;
  const void* k;
  const void* v;
  int64_t kv_stride;  // elements between cache rows (n_head_kv * D)
  float* out;
  int64_t ldo;
  float* part_acc;  // decode: [n_tok*n_head][splits][D]
  float* part_ml;   // decode: [n_tok*n_head][splits][2] = (m, l)
  const int32_t* d_pos;
  int64_t n_tok, n_ctx, group, n_head, splits, row_blocks;
  float scale;
  Round round;
};

template <class T, int D>
struct SimtShape {
  static constexpr int kThreads = 128;
  // Keys per tile: 64, or 32 where a row is 1 KB (f32 at D = 256) so that the K and V tiles
  // stay within the 99 KB of shared memory that sm_86/sm_89 allow a block.
  static constexpr int kT = sizeof(T) * D >= 1024 ? 32 : 64;
  static constexpr int kLd = D + static_cast<int>(16 / sizeof(T));  // padded smem row (elements)
  static constexpr int kTpk = kThreads / kT;                         // threads per key (scores)
  static constexpr int kRowsQK = kRowsPerBlock / kTpk;
  static constexpr int kCG = D / 8;  // 8-column groups (P*V)
  // Row groups (P*V); at D = 32 there are more threads than (row, column group) pairs and
  // the threads past kRG * kCG sit out P*V and the epilogue.
  static constexpr int kRG = kThreads / kCG < kRowsPerBlock ? kThreads / kCG : kRowsPerBlock;
  static constexpr int kRowsPV = kRowsPerBlock / kRG;
  static constexpr int kPLd = kT + 1;  // padded probability row: rows rg and rg+1 on other banks
  static constexpr size_t kSmem = sizeof(float) * kRowsPerBlock * D + 2 * sizeof(T) * kT * kLd +
                                  sizeof(float) * kRowsPerBlock * kPLd + 3 * sizeof(float) * kRowsPerBlock;
  static_assert(kThreads % kT == 0 && kRowsPerBlock % kTpk == 0, "score mapping");
  static_assert(kThreads % kCG == 0 && kRowsPerBlock % kRG == 0 && kRG * kCG <= kThreads, "P*V mapping");
};

template <class T, int D>
struct SimtSmem {
  float* q;  // [kRowsPerBlock][D]
  T* k;      // [kT][kLd]
  T* v;      // [kT][kLd]
  float* p;  // [kRowsPerBlock][kPLd]
  float* m;  // [kRowsPerBlock] running max
  float* l;  // [kRowsPerBlock] running sum
  float* a;  // [kRowsPerBlock] rescale of this tile
  FT_ATTN_HD static SimtSmem carve(uint8_t* base) {
    using S = SimtShape<T, D>;
    SimtSmem s;
    s.q = reinterpret_cast<float*>(base);
    s.k = reinterpret_cast<T*>(s.q + kRowsPerBlock * D);
    s.v = s.k + S::kT * S::kLd;
    s.p = reinterpret_cast<float*>(s.v + S::kT * S::kLd);
    s.m = s.p + kRowsPerBlock * S::kPLd;
    s.l = s.m + kRowsPerBlock;
    s.a = s.l + kRowsPerBlock;
    return s;
  }
};

// What one block works on.
struct SimtBlock {
  int64_t g, row0, n_rows, pos, kbeg, kend, split;
  int rows_here;  // live rows of the block, 1..16
  bool idle;      // decode chunk past the live keys: the block exits at once
};

template <bool kPartial>
FT_ATTN_HD inline SimtBlock simt_block(const SimtParams& p, int64_t bx, int64_t by, int64_t bz) {
  SimtBlock b{};
  b.g = by;
  // Prefill: the last row blocks see the most keys, so they start first.
  const int64_t rb = kPartial ? bx : p.row_blocks - 1 - bx;
  b.n_rows = p.n_tok * p.group;
  b.row0 = rb * kRowsPerBlock;
  b.pos = *p.d_pos;
  const int64_t n_kv_all = live_keys(b.pos, p.n_tok, p.n_ctx);
  // Keys the block's last row sees (the rows' tokens grow with the row index).
  const int64_t last_row = (b.row0 + kRowsPerBlock < b.n_rows ? b.row0 + kRowsPerBlock : b.n_rows) - 1;
  b.rows_here = static_cast<int>(last_row - b.row0 + 1);
  b.kend = b.pos + last_row / p.group + 1;
  if (b.kend > n_kv_all) b.kend = n_kv_all;
  b.kbeg = 0;
  b.split = bz;
  b.idle = false;
  if (kPartial) {
    const DecodePlan pl = decode_plan(n_kv_all, p.splits);
    if (bz >= pl.n_chunks) {
      b.idle = true;
      return b;
    }
    b.kbeg = bz * pl.chunk;
    if (b.kend > b.kbeg + pl.chunk) b.kend = b.kbeg + pl.chunk;
  }
  return b;
}

FT_ATTN_HD inline float attn_bits_f32(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

// Eight consecutive cache elements at a 16-byte aligned address, in fp32.
FT_ATTN_HD inline void load8(const float* p, float (&x)[8]) {
#ifdef __CUDA_ARCH__
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
#else
  std::memcpy(x, p, 32);
#endif
}
FT_ATTN_HD inline void load8(const __nv_bfloat16* p, float (&x)[8]) {
  uint32_t w[4];
#ifdef __CUDA_ARCH__
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
#else
  std::memcpy(w, p, 16);
#endif
  for (int i = 0; i < 4; ++i) {
    // bf16 -> fp32 is a 16-bit shift (exact).
    x[2 * i] = attn_bits_f32(w[i] << 16);
    x[2 * i + 1] = attn_bits_f32(w[i] & 0xFFFF0000u);
  }
}
FT_ATTN_HD inline void load8(const __half* p, float (&x)[8]) {
#ifdef __CUDA_ARCH__
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &w[i], 4);
    const float2 f = __half22float2(h);
    x[2 * i] = f.x;
    x[2 * i + 1] = f.y;
  }
#else
  uint16_t h[8];
  std::memcpy(h, p, 16);
  for (int i = 0; i < 8; ++i) x[i] = f16_to_f32(h[i]);
#endif
}

FT_ATTN_HD inline float round_hd(Round r, float v) {
#ifdef __CUDA_ARCH__
  if (r == Round::kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  if (r == Round::kF16) return __half2float(__float2half_rn(v));
  return v;
#else
  if (r == Round::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (r == Round::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
#endif
}

template <class T>
FT_ATTN_HD inline uint4 load16_global(const T* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint4*>(p));
#else
  uint4 u;
  std::memcpy(&u, p, 16);
  return u;
#endif
}

// Phase 0: this block's q rows (zero for padding rows) and the running (m, l).
template <class T, int D>
FT_ATTN_HD inline void simt_stage_q(int tid, const SimtParams& p, const SimtBlock& b, const SimtSmem<T, D>& sm) {
  for (int i = tid; i < kRowsPerBlock * D; i += SimtShape<T, D>::kThreads) {
    const int64_t row = b.row0 + i / D;
    float x = 0.0f;
    if (row < b.n_rows) {
      const RowRef rr = row_ref(row, b.g, p.group);
      x = p.q[rr.t * p.ldq + rr.h * D + i % D];
    }
    sm.q[i] = x;
  }
  if (tid < kRowsPerBlock) {
    sm.m[tid] = -HUGE_VALF;
    sm.l[tid] = 0.0f;
  }
}

// Phase 1: K and V rows t0 .. t0 + n_valid - 1 of head g; the rest of the tile is zero.
template <class T, int D>
FT_ATTN_HD inline void simt_stage_kv(int tid, const SimtParams& p, const SimtBlock& b, int64_t t0, int n_valid,
                                     const SimtSmem<T, D>& sm) {
  using S = SimtShape<T, D>;
  constexpr int kVecPerRow = D * static_cast<int>(sizeof(T)) / 16;
  const T* kc = static_cast<const T*>(p.k) + b.g * D;
  const T* vc = static_cast<const T*>(p.v) + b.g * D;
  for (int i = tid; i < S::kT * kVecPerRow; i += S::kThreads) {
    const int r = i / kVecPerRow, c = i % kVecPerRow;
    uint4 kx = uint4{0u, 0u, 0u, 0u}, vx = uint4{0u, 0u, 0u, 0u};
    if (r < n_valid) {
      const int64_t off = (t0 + r) * p.kv_stride + c * (16 / static_cast<int64_t>(sizeof(T)));
      kx = load16_global(kc + off);
      vx = load16_global(vc + off);
    }
#ifdef __CUDA_ARCH__
    reinterpret_cast<uint4*>(sm.k + r * S::kLd)[c] = kx;
    reinterpret_cast<uint4*>(sm.v + r * S::kLd)[c] = vx;
#else
    std::memcpy(static_cast<void*>(sm.k + r * S::kLd + c * (16 / sizeof(T))), &kx, 16);
    std::memcpy(static_cast<void*>(sm.v + r * S::kLd + c * (16 / sizeof(T))), &vx, 16);
#endif
  }
}

// Phase 2: scaled scores of the tile, -inf where masked (past the row's position, past the
// staged keys, padding rows).
template <class T, int D>
FT_ATTN_HD inline void simt_scores(int tid, const SimtParams& p, const SimtBlock& b, int64_t t0, int n_valid,
                                   const SimtSmem<T, D>& sm) {
  using S = SimtShape<T, D>;
  const int kk = tid % S::kT, part = tid / S::kT;
  float s[S::kRowsQK];
FT_ATTN_UNROLL
  for (int i = 0; i < S::kRowsQK; ++i) s[i] = 0.0f;
  const T* krow = sm.k + kk * S::kLd;
FT_ATTN_UNROLL4
  for (int d = 0; d < D; d += 8) {
    float kx[8];
    load8(krow + d, kx);
FT_ATTN_UNROLL
    for (int i = 0; i < S::kRowsQK; ++i) {
      if (part * S::kRowsQK + i >= b.rows_here) break;  // warp-uniform: padding rows of a small group
      float qx[8];
      load8(sm.q + (part * S::kRowsQK + i) * D + d, qx);
FT_ATTN_UNROLL
      for (int e = 0; e < 8; ++e) s[i] = fmaf(qx[e], kx[e], s[i]);
    }
  }
  const int64_t j = t0 + kk;
FT_ATTN_UNROLL
  for (int i = 0; i < S::kRowsQK; ++i) {
    const int r = part * S::kRowsQK + i;
    const int64_t row = b.row0 + r;
    const bool live = kk < n_valid && row < b.n_rows && j <= b.pos + row / p.group;
    sm.p[r * S::kPLd + kk] = live ? s[i] * p.scale : -HUGE_VALF;
  }
}

// Phase 3, serial twin of the kernel's warp-parallel row update (same formulas).
template <class T, int D>
FT_ATTN_HD inline void softmax_row(int r, const SimtSmem<T, D>& sm) {
  using S = SimtShape<T, D>;
  float* pr = sm.p + r * S::kPLd;
  const float m_old = sm.m[r];
  float mx = -HUGE_VALF;
  for (int j = 0; j < S::kT; ++j) mx = fmaxf(mx, pr[j]);
  const float m_new = fmaxf(m_old, mx);
  float sum = 0.0f;
  for (int j = 0; j < S::kT; ++j) {
    const float e = m_new == -HUGE_VALF ? 0.0f : expf(pr[j] - m_new);
    pr[j] = e;
    sum += e;
  }
  const float alpha = m_old == -HUGE_VALF ? 0.0f : expf(m_old - m_new);
  sm.a[r] = alpha;
  sm.l[r] = sm.l[r] * alpha + sum;
  sm.m[r] = m_new;
}

// Phase 4: acc (this thread's kRowsPV rows x 8 columns) = acc * alpha + P V.
template <class T, int D>
FT_ATTN_HD inline void simt_pv(int tid, const SimtBlock& b, const SimtSmem<T, D>& sm,
                               float (&acc)[SimtShape<T, D>::kRowsPV][8]) {
  using S = SimtShape<T, D>;
  const int cg = tid % S::kCG, rg = tid / S::kCG;
  if (rg >= S::kRG) return;
FT_ATTN_UNROLL
  for (int i = 0; i < S::kRowsPV; ++i) {
    const float alpha = sm.a[rg + i * S::kRG];
FT_ATTN_UNROLL
    for (int e = 0; e < 8; ++e) acc[i][e] *= alpha;
  }
FT_ATTN_UNROLL4
  for (int j = 0; j < S::kT; ++j) {
    float vx[8];
    load8(sm.v + j * S::kLd + cg * 8, vx);
FT_ATTN_UNROLL
    for (int i = 0; i < S::kRowsPV; ++i) {
      if (rg + i * S::kRG >= b.rows_here) break;
      const float pj = sm.p[(rg + i * S::kRG) * S::kPLd + j];
FT_ATTN_UNROLL
      for (int e = 0; e < 8; ++e) acc[i][e] = fmaf(pj, vx[e], acc[i][e]);
    }
  }
}

// Phase 5: decode writes the unnormalised partials (acc, m, l) of its chunk; prefill writes
// acc / l, rounded.
template <class T, int D, bool kPartial>
FT_ATTN_HD inline void simt_epilogue(int tid, const SimtParams& p, const SimtBlock& b, const SimtSmem<T, D>& sm,
                                     const float (&acc)[SimtShape<T, D>::kRowsPV][8]) {
  using S = SimtShape<T, D>;
  const int cg = tid % S::kCG, rg = tid / S::kCG;
  if (rg >= S::kRG) return;
FT_ATTN_UNROLL
  for (int i = 0; i < S::kRowsPV; ++i) {
    const int r = rg + i * S::kRG;
    const int64_t row = b.row0 + r;
    if (row >= b.n_rows) continue;
    const RowRef rr = row_ref(row, b.g, p.group);
    if (kPartial) {
      const int64_t slot = (rr.t * p.n_head + rr.h) * p.splits + b.split;
      float* dst = p.part_acc + slot * D + cg * 8;
      for (int e = 0; e < 8; ++e) dst[e] = acc[i][e];
      if (cg == 0) {
        p.part_ml[slot * 2] = sm.m[r];
        p.part_ml[slot * 2 + 1] = sm.l[r];
      }
    } else {
      const float inv = 1.0f / sm.l[r];  // l >= 1: key 0 is live for every row
      float* dst = p.out + rr.t * p.ldo + rr.h * D + cg * 8;
      for (int e = 0; e < 8; ++e) dst[e] = round_hd(p.round, acc[i][e] * inv);
    }
  }
}

// Combine (decode): output column c of row = t*n_head + h from the live chunks' partials,
// weights exp(m_s - M); a chunk without live keys has l = 0 and weighs nothing.
struct CombineParams {
  const float* part_acc;
  const float* part_ml;
  const int32_t* d_pos;
  float* out;
  int64_t ldo, n_tok, n_ctx, n_head, splits, d;
  Round round;
};

FT_ATTN_HD inline void combine_column(const CombineParams& p, int64_t row, int64_t c) {
  const int64_t t = row / p.n_head, h = row % p.n_head;
  const int64_t n_kv = live_keys(*p.d_pos, p.n_tok, p.n_ctx);
  const int64_t n_chunks = decode_plan(n_kv, p.splits).n_chunks;
  const float* ml = p.part_ml + row * p.splits * 2;
  float mx = -HUGE_VALF;
  for (int64_t s = 0; s < n_chunks; ++s)
    if (ml[2 * s + 1] > 0.0f) mx = fmaxf(mx, ml[2 * s]);
  float l = 0.0f, o = 0.0f;
  for (int64_t s = 0; s < n_chunks; ++s) {
    const float ls = ml[2 * s + 1];
    if (ls <= 0.0f) continue;
    const float w = expf(ml[2 * s] - mx);
    l = fmaf(w, ls, l);
    o = fmaf(w, p.part_acc[(row * p.splits + s) * p.d + c], o);
  }
  p.out[t * p.ldo + h * p.d + c] = round_hd(p.round, o / l);
}

#ifndef __CUDA_ARCH__
// CPU run of the whole SIMT grid (grid = row_blocks x n_head_kv x splits), thread by thread
// with a barrier between phases, then the combine for decode: the kernels' own code.
template <class T, int D, bool kPartial>
void simt_grid_host(const SimtParams& p, int64_t n_head_kv) {
  using S = SimtShape<T, D>;
  std::vector<uint8_t> mem(S::kSmem + 16);
  uint8_t* base = mem.data() + (16 - reinterpret_cast<uintptr_t>(mem.data()) % 16) % 16;
  const SimtSmem<T, D> sm = SimtSmem<T, D>::carve(base);
  std::vector<float> acc_all(static_cast<size_t>(S::kThreads * S::kRowsPV * 8));
  auto acc_of = [&](int tid) -> float(&)[S::kRowsPV][8] {
    return *reinterpret_cast<float(*)[S::kRowsPV][8]>(acc_all.data() + tid * S::kRowsPV * 8);
  };
  for (int64_t bz = 0; bz < (kPartial ? p.splits : 1); ++bz)
    for (int64_t by = 0; by < n_head_kv; ++by)
      for (int64_t bx = 0; bx < p.row_blocks; ++bx) {
        const SimtBlock b = simt_block<kPartial>(p, bx, by, bz);
        if (b.idle) continue;
        for (int tid = 0; tid < S::kThreads; ++tid) simt_stage_q<T, D>(tid, p, b, sm);
        std::fill(acc_all.begin(), acc_all.end(), 0.0f);
        for (int64_t t0 = b.kbeg; t0 < b.kend; t0 += S::kT) {
          const int n_valid = static_cast<int>(b.kend - t0 < S::kT ? b.kend - t0 : S::kT);
          for (int tid = 0; tid < S::kThreads; ++tid) simt_stage_kv<T, D>(tid, p, b, t0, n_valid, sm);
          for (int tid = 0; tid < S::kThreads; ++tid) simt_scores<T, D>(tid, p, b, t0, n_valid, sm);
          for (int r = 0; r < kRowsPerBlock; ++r) softmax_row<T, D>(r, sm);
          for (int tid = 0; tid < S::kThreads; ++tid) simt_pv<T, D>(tid, b, sm, acc_of(tid));
        }
        for (int tid = 0; tid < S::kThreads; ++tid) simt_epilogue<T, D, kPartial>(tid, p, b, sm, acc_of(tid));
      }
}

inline void combine_host(const CombineParams& p) {
  for (int64_t row = 0; row < p.n_tok * p.n_head; ++row)
    for (int64_t c = 0; c < p.d; ++c) combine_column(p, row, c);
}
#endif

}  // namespace ft::cuda::attn_detail
