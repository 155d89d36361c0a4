// Per-lane code of the tensor-core prefill kernel (attn_mma.cuh), host- and device-callable:
// shared-memory layout, staging, fragment addresses, masking, online softmax on the
// accumulators, the hi/lo split and the epilogue. The kernel calls these with its own lane
// and adds the warp-collective instructions (mma.sync, ldmatrix, shuffles); mma_grid_host
// below runs the same functions for the 32 lanes of each warp in lockstep with CPU models of
// those instructions (PTX ISA fragment layouts of m16n8k16 and ldmatrix .trans), so
// tests/cuda/attention_test.cpp executes the kernel's index arithmetic without a GPU.
//
// Fragments (g = lane / 4, c = lane % 4; pairs hold the lower column in the low half):
//   A 16x16: a0 (g, 2c..), a1 (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)
//   B 16x8:  b0 (k = 2c, 2c+1; n = g), b1 (k = 2c+8, 2c+9; n = g)
//   C 16x8:  c0, c1 (g, 2c..), c2, c3 (g+8, 2c..)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt_phases.cuh"

namespace ft::cuda::attn_detail {

inline constexpr int kMmaRows = 64;  // query rows per block, 16 per warp
inline constexpr int kMmaKeys = 64;  // keys per tile

template <class T, int D>
struct MmaShape {
  static constexpr int kLd = D + 8;  // padded row (elements): 32-bit fragment loads and ldmatrix rows conflict-free
  static constexpr size_t kSmem = sizeof(T) * (2 * kMmaRows + 2 * kMmaKeys) * kLd;
};

template <class T, int D>
struct MmaSmem {
  T* qh;  // [kMmaRows][kLd] Q high half
  T* ql;  // [kMmaRows][kLd] Q low half
  T* k;   // [kMmaKeys][kLd]
  T* v;   // [kMmaKeys][kLd]
  FT_ATTN_HD static MmaSmem carve(uint8_t* base) {
    constexpr int kLd = MmaShape<T, D>::kLd;
    MmaSmem s;
    s.qh = reinterpret_cast<T*>(base);
    s.ql = s.qh + kMmaRows * kLd;
    s.k = s.ql + kMmaRows * kLd;
    s.v = s.k + kMmaKeys * kLd;
    return s;
  }
};

struct MmaBlock {
  int64_t g, row0, n_rows, pos, kend;
};

FT_ATTN_HD inline MmaBlock mma_block(const SimtParams& p, int64_t bx, int64_t by) {
  MmaBlock b{};
  b.g = by;
  b.n_rows = p.n_tok * p.group;
  b.row0 = (p.row_blocks - 1 - bx) * kMmaRows;  // most keys first
  b.pos = *p.d_pos;
  const int64_t n_kv_all = live_keys(b.pos, p.n_tok, p.n_ctx);
  const int64_t last_row = (b.row0 + kMmaRows < b.n_rows ? b.row0 + kMmaRows : b.n_rows) - 1;
  b.kend = b.pos + last_row / p.group + 1;
  if (b.kend > n_kv_all) b.kend = n_kv_all;
  return b;
}

// fp32 <-> 16-bit cache element bits, round to nearest even.
template <class T>
FT_ATTN_HD inline uint16_t to_bits(float x);
template <>
FT_ATTN_HD inline uint16_t to_bits<__nv_bfloat16>(float x) {
#ifdef __CUDA_ARCH__
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
  return f32_to_bf16(x);
#endif
}
template <>
FT_ATTN_HD inline uint16_t to_bits<__half>(float x) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(x));
#else
  return f32_to_f16(x);
#endif
}
template <class T>
FT_ATTN_HD inline float from_bits(uint16_t b);
template <>
FT_ATTN_HD inline float from_bits<__nv_bfloat16>(uint16_t b) {
  return attn_bits_f32(static_cast<uint32_t>(b) << 16);
}
template <>
FT_ATTN_HD inline float from_bits<__half>(uint16_t b) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(b));
#else
  return f16_to_f32(b);
#endif
}

// (a, b) = hi + lo with hi, lo pairs of the cache type (the two halves of the split products).
template <class T>
FT_ATTN_HD inline void split2(float a, float b, uint32_t& hi, uint32_t& lo) {
  const uint16_t ah = to_bits<T>(a), bh = to_bits<T>(b);
  hi = static_cast<uint32_t>(ah) | static_cast<uint32_t>(bh) << 16;
  const uint16_t al = to_bits<T>(a - from_bits<T>(ah)), bl = to_bits<T>(b - from_bits<T>(bh));
  lo = static_cast<uint32_t>(al) | static_cast<uint32_t>(bl) << 16;
}

FT_ATTN_HD inline uint32_t lds32(const void* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
FT_ATTN_HD inline void sts32(void* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint32_t*>(p) = v;
#else
  std::memcpy(p, &v, 4);
#endif
}

// Q rows of the block -> hi/lo halves (padding rows are zero).
template <class T, int D>
FT_ATTN_HD inline void mma_stage_q(int tid, const SimtParams& p, const MmaBlock& b, const MmaSmem<T, D>& sm) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  for (int i = tid; i < kMmaRows * D / 2; i += 128) {
    const int r = i / (D / 2), c = 2 * (i % (D / 2));
    const int64_t row = b.row0 + r;
    float x0 = 0.0f, x1 = 0.0f;
    if (row < b.n_rows) {
      const RowRef rr = row_ref(row, b.g, p.group);
      const float* src = p.q + rr.t * p.ldq + rr.h * D + c;
      x0 = src[0];
      x1 = src[1];
    }
    uint32_t hi, lo;
    split2<T>(x0, x1, hi, lo);
    sts32(sm.qh + r * kLd + c, hi);
    sts32(sm.ql + r * kLd + c, lo);
  }
}

// K and V rows t0 .. t0 + n_valid - 1 of head g; the rest of the tile is zero.
template <class T, int D>
FT_ATTN_HD inline void mma_stage_kv(int tid, const SimtParams& p, const MmaBlock& b, int64_t t0, int n_valid,
                                    const MmaSmem<T, D>& sm) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  constexpr int kVecPerRow = D * static_cast<int>(sizeof(T)) / 16;
  const T* kc = static_cast<const T*>(p.k) + b.g * D;
  const T* vc = static_cast<const T*>(p.v) + b.g * D;
  for (int i = tid; i < kMmaKeys * kVecPerRow; i += 128) {
    const int r = i / kVecPerRow, c = i % kVecPerRow;
    uint4 kx = uint4{0u, 0u, 0u, 0u}, vx = uint4{0u, 0u, 0u, 0u};
    if (r < n_valid) {
      const int64_t off = (t0 + r) * p.kv_stride + c * 8;
      kx = load16_global(kc + off);
      vx = load16_global(vc + off);
    }
#ifdef __CUDA_ARCH__
    reinterpret_cast<uint4*>(sm.k + r * kLd)[c] = kx;
    reinterpret_cast<uint4*>(sm.v + r * kLd)[c] = vx;
#else
    std::memcpy(static_cast<void*>(sm.k + r * kLd + c * 8), &kx, 16);
    std::memcpy(static_cast<void*>(sm.v + r * kLd + c * 8), &vx, 16);
#endif
  }
}

// One lane's state: its two rows (g and g+8 of the warp's 16), the keys they may see, the
// output accumulators, the running max and its part of the row sums.
template <int D>
struct MmaLane {
  int64_t row[2], lim[2];  // keys j < lim[h] are visible to row h
  float o[D / 8][4];
  float m[2], l[2];
};

template <int D>
FT_ATTN_HD inline void mma_lane_init(int warp, int lane, const SimtParams& p, const MmaBlock& b, MmaLane<D>& st) {
  const int gq = lane / 4;
  FT_ATTN_UNROLL
  for (int h = 0; h < 2; ++h) {
    st.row[h] = b.row0 + warp * 16 + gq + 8 * h;
    st.lim[h] = st.row[h] < b.n_rows ? b.pos + st.row[h] / p.group + 1 : 0;
    if (st.lim[h] > b.kend) st.lim[h] = b.kend;  // staged rows past kend are zeros, not keys
    st.m[h] = -HUGE_VALF;
    st.l[h] = 0.0f;
  }
  FT_ATTN_UNROLL
  for (int n = 0; n < D / 8; ++n)
    FT_ATTN_UNROLL
    for (int e = 0; e < 4; ++e) st.o[n][e] = 0.0f;
}

// A fragment of k-step kk from a warp's 16 rows (row-major, kLd apart).
template <class T, int D>
FT_ATTN_HD inline void mma_frag_a(const T* rows, int lane, int kk, uint32_t (&a)[4]) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  const int gq = lane / 4, c0 = kk * 16 + 2 * (lane % 4);
  a[0] = lds32(rows + gq * kLd + c0);
  a[1] = lds32(rows + (gq + 8) * kLd + c0);
  a[2] = lds32(rows + gq * kLd + c0 + 8);
  a[3] = lds32(rows + (gq + 8) * kLd + c0 + 8);
}

// B fragment of K^T for k-step kk (head-dim columns) and key n-tile n: K rows are B columns.
template <class T, int D>
FT_ATTN_HD inline void mma_frag_k(const T* k, int lane, int kk, int n, uint32_t& b0, uint32_t& b1) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  const T* kr = k + (n * 8 + lane / 4) * kLd + kk * 16 + 2 * (lane % 4);
  b0 = lds32(kr);
  b1 = lds32(kr + 8);
}

// Row address this lane gives ldmatrix.x4.trans for keys 16kk.. and head-dim n-tiles n, n+1:
// matrices (keys 0-7, cols n), (keys 8-15, cols n), (keys 0-7, cols n+1), (keys 8-15, cols n+1).
template <class T, int D>
FT_ATTN_HD inline const T* mma_v_row(const T* v, int lane, int kk, int n) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  return v + (kk * 16 + lane % 16) * kLd + n * 8 + (lane / 16) * 8;
}

// Masks and scales the tile's scores; returns this lane's max per row (before the quad max).
// Element e of n-tile n: row h = e / 2, key t0 + n*8 + 2*(lane % 4) + e % 2.
template <int D>
FT_ATTN_HD inline void mma_mask_max(int lane, int64_t t0, float scale, const MmaLane<D>& st,
                                    float (&s)[kMmaKeys / 8][4], float (&mx)[2]) {
  mx[0] = mx[1] = -HUGE_VALF;
  FT_ATTN_UNROLL
  for (int n = 0; n < kMmaKeys / 8; ++n)
    FT_ATTN_UNROLL
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const int64_t j = t0 + n * 8 + 2 * (lane % 4) + e % 2;
      const float v = j < st.lim[h] ? s[n][e] * scale : -HUGE_VALF;
      s[n][e] = v;
      mx[h] = fmaxf(mx[h], v);
    }
}

// With the row max over the quad: new running max, probabilities in s, this lane's row-sum
// part and the accumulators rescaled by exp(m_old - m_new).
template <int D>
FT_ATTN_HD inline void mma_softmax(const float (&mx)[2], MmaLane<D>& st, float (&s)[kMmaKeys / 8][4]) {
  float alpha[2];
  FT_ATTN_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float m_new = fmaxf(st.m[h], mx[h]);
    alpha[h] = m_new == -HUGE_VALF ? 0.0f : expf(st.m[h] - m_new);
    st.m[h] = m_new;
  }
  float sum[2] = {0.0f, 0.0f};
  FT_ATTN_UNROLL
  for (int n = 0; n < kMmaKeys / 8; ++n)
    FT_ATTN_UNROLL
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const float pe = st.m[h] == -HUGE_VALF ? 0.0f : expf(s[n][e] - st.m[h]);
      s[n][e] = pe;
      sum[h] += pe;
    }
  FT_ATTN_UNROLL
  for (int h = 0; h < 2; ++h) st.l[h] = st.l[h] * alpha[h] + sum[h];
  FT_ATTN_UNROLL
  for (int n = 0; n < D / 8; ++n) {
    st.o[n][0] *= alpha[0];
    st.o[n][1] *= alpha[0];
    st.o[n][2] *= alpha[1];
    st.o[n][3] *= alpha[1];
  }
}

// A fragments (hi, lo) of P for keys 16kk..: C n-tiles 2kk and 2kk+1 are its two column halves.
template <class T>
FT_ATTN_HD inline void mma_frag_p(const float (&s)[kMmaKeys / 8][4], int kk, uint32_t (&ph)[4], uint32_t (&pl)[4]) {
  split2<T>(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
  split2<T>(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
  split2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
  split2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
}

// With the full row sums: normalise, round and store this lane's columns of its rows.
template <int D>
FT_ATTN_HD inline void mma_store(int lane, const SimtParams& p, const MmaBlock& b, const MmaLane<D>& st,
                                 const float (&l)[2]) {
  FT_ATTN_UNROLL
  for (int h = 0; h < 2; ++h) {
    if (st.row[h] >= b.n_rows) continue;
    const RowRef rr = row_ref(st.row[h], b.g, p.group);
    const float inv = 1.0f / l[h];  // l >= 1: key 0 is visible to every row
    float* dst = p.out + rr.t * p.ldo + rr.h * D + 2 * (lane % 4);
    FT_ATTN_UNROLL
    for (int n = 0; n < D / 8; ++n) {
      dst[n * 8] = round_hd(p.round, st.o[n][2 * h] * inv);
      dst[n * 8 + 1] = round_hd(p.round, st.o[n][2 * h + 1] * inv);
    }
  }
}

#ifndef __CUDA_ARCH__
// ---- CPU models of the warp-collective instructions and a lockstep run of the grid ----

// mma.sync m16n8k16 (row.col, fp32 accumulate) over the 32 lanes' fragments.
template <class T>
void mma_model(float (*c)[4], const uint32_t (*a)[4], const uint32_t* b0, const uint32_t* b1) {
  float A[16][16], B[16][8];
  auto lo = [](uint32_t w) { return from_bits<T>(static_cast<uint16_t>(w & 0xFFFF)); };
  auto hi = [](uint32_t w) { return from_bits<T>(static_cast<uint16_t>(w >> 16)); };
  for (int ln = 0; ln < 32; ++ln) {
    const int g = ln / 4, q = ln % 4;
    A[g][2 * q] = lo(a[ln][0]), A[g][2 * q + 1] = hi(a[ln][0]);
    A[g + 8][2 * q] = lo(a[ln][1]), A[g + 8][2 * q + 1] = hi(a[ln][1]);
    A[g][2 * q + 8] = lo(a[ln][2]), A[g][2 * q + 9] = hi(a[ln][2]);
    A[g + 8][2 * q + 8] = lo(a[ln][3]), A[g + 8][2 * q + 9] = hi(a[ln][3]);
    B[2 * q][g] = lo(b0[ln]), B[2 * q + 1][g] = hi(b0[ln]);
    B[2 * q + 8][g] = lo(b1[ln]), B[2 * q + 9][g] = hi(b1[ln]);
  }
  for (int ln = 0; ln < 32; ++ln) {
    const int g = ln / 4, q = ln % 4;
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e / 2), col = 2 * q + e % 2;
      float acc = c[ln][e];
      for (int k = 0; k < 16; ++k) acc = std::fma(A[r][k], B[k][col], acc);
      c[ln][e] = acc;
    }
  }
}

// ldmatrix.sync.m8n8.x4.trans.b16: lanes 8i..8i+7 give the 8 rows of matrix i; lane t gets,
// in register i, elements (2*(t%4), t/4) and (2*(t%4)+1, t/4) of matrix i.
template <class T>
void ldmatrix_x4_trans_model(const T* const* addr, uint32_t (*r)[4]) {
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 4; ++i) {
      uint16_t e0, e1;
      std::memcpy(&e0, addr[8 * i + 2 * (t % 4)] + t / 4, 2);
      std::memcpy(&e1, addr[8 * i + 2 * (t % 4) + 1] + t / 4, 2);
      r[t][i] = static_cast<uint32_t>(e0) | static_cast<uint32_t>(e1) << 16;
    }
}

template <class T, int D>
void mma_grid_host(const SimtParams& p, int64_t n_head_kv) {
  using Sh = MmaShape<T, D>;
  std::vector<uint8_t> mem(Sh::kSmem + 16);
  uint8_t* base = mem.data() + (16 - reinterpret_cast<uintptr_t>(mem.data()) % 16) % 16;
  const MmaSmem<T, D> sm = MmaSmem<T, D>::carve(base);
  std::vector<MmaLane<D>> st(128);
  for (int64_t by = 0; by < n_head_kv; ++by)
    for (int64_t bx = 0; bx < p.row_blocks; ++bx) {
      const MmaBlock b = mma_block(p, bx, by);
      for (int tid = 0; tid < 128; ++tid) mma_stage_q<T, D>(tid, p, b, sm);
      for (int tid = 0; tid < 128; ++tid) mma_lane_init<D>(tid / 32, tid % 32, p, b, st[tid]);
      for (int64_t t0 = 0; t0 < b.kend; t0 += kMmaKeys) {
        const int n_valid = static_cast<int>(b.kend - t0 < kMmaKeys ? b.kend - t0 : kMmaKeys);
        for (int tid = 0; tid < 128; ++tid) mma_stage_kv<T, D>(tid, p, b, t0, n_valid, sm);
        for (int w = 0; w < 4; ++w) {
          float s[32][kMmaKeys / 8][4] = {};
          uint32_t ah[32][4], al[32][4], b0[32], b1[32];
          for (int kk = 0; kk < D / 16; ++kk) {
            for (int ln = 0; ln < 32; ++ln) {
              mma_frag_a<T, D>(sm.qh + w * 16 * Sh::kLd, ln, kk, ah[ln]);
              mma_frag_a<T, D>(sm.ql + w * 16 * Sh::kLd, ln, kk, al[ln]);
            }
            for (int n = 0; n < kMmaKeys / 8; ++n) {
              float c[32][4];
              for (int ln = 0; ln < 32; ++ln) {
                mma_frag_k<T, D>(sm.k, ln, kk, n, b0[ln], b1[ln]);
                for (int e = 0; e < 4; ++e) c[ln][e] = s[ln][n][e];
              }
              mma_model<T>(c, ah, b0, b1);
              mma_model<T>(c, al, b0, b1);
              for (int ln = 0; ln < 32; ++ln)
                for (int e = 0; e < 4; ++e) s[ln][n][e] = c[ln][e];
            }
          }
          float mx[32][2];
          for (int ln = 0; ln < 32; ++ln) mma_mask_max<D>(ln, t0, p.scale, st[w * 32 + ln], s[ln], mx[ln]);
          float qmx[32][2];  // max over the quad (shuffles xor 1, 2)
          for (int ln = 0; ln < 32; ++ln)
            for (int h = 0; h < 2; ++h)
              qmx[ln][h] = std::fmax(std::fmax(mx[ln & ~3][h], mx[(ln & ~3) + 1][h]),
                                     std::fmax(mx[(ln & ~3) + 2][h], mx[(ln & ~3) + 3][h]));
          for (int ln = 0; ln < 32; ++ln) mma_softmax<D>(qmx[ln], st[w * 32 + ln], s[ln]);
          for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
            uint32_t ph[32][4], pl[32][4];
            for (int ln = 0; ln < 32; ++ln) mma_frag_p<T>(s[ln], kk, ph[ln], pl[ln]);
            for (int n = 0; n < D / 8; n += 2) {
              const T* addr[32];
              uint32_t r[32][4];
              for (int ln = 0; ln < 32; ++ln) addr[ln] = mma_v_row<T, D>(sm.v, ln, kk, n);
              ldmatrix_x4_trans_model<T>(addr, r);
              for (int half = 0; half < 2; ++half) {
                float c[32][4];
                uint32_t v0[32], v1[32];
                for (int ln = 0; ln < 32; ++ln) {
                  v0[ln] = r[ln][2 * half];
                  v1[ln] = r[ln][2 * half + 1];
                  for (int e = 0; e < 4; ++e) c[ln][e] = st[w * 32 + ln].o[n + half][e];
                }
                mma_model<T>(c, ph, v0, v1);
                mma_model<T>(c, pl, v0, v1);
                for (int ln = 0; ln < 32; ++ln)
                  for (int e = 0; e < 4; ++e) st[w * 32 + ln].o[n + half][e] = c[ln][e];
              }
            }
          }
        }
      }
      for (int tid = 0; tid < 128; ++tid) {
        const int q0 = tid & ~3;
        float l[2];
        for (int h = 0; h < 2; ++h)
          l[h] = (st[q0].l[h] + st[q0 + 1].l[h]) + (st[q0 + 2].l[h] + st[q0 + 3].l[h]);
        mma_store<D>(tid % 32, p, b, st[tid], l);
      }
    }
}
#endif

}  // namespace ft::cuda::attn_detail
