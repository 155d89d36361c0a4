// One-token decode attention on tensor cores (mma.sync m16n8k16, fp32 accumulate; sm_80+), for
// 16-bit caches at head dim 128 and GQA groups of at most 8: attention_decode's mode 3
// (attention_set_decode_override), measured against the dedicated SIMT kernel (attn_decode.cuh).
// Twin: engine::attention_ref (tests/cuda/attention_test.cpp, CudaAttention.MmaDecode*).
//
// Why: ncu of the dedicated kernel at 4096 keys (Qwen3-30B-A3B shape, benches/h200.md session
// 16) showed it instruction- and latency-bound, not memory-bound: 6.2 M warp instructions a
// launch (~94 a key and row block: per key a 16-lane dot, a butterfly, a softmax update and the
// V update, repeated by each of the 4 row blocks of a group of 8), 25% occupancy (128
// registers), DRAM 6%. Here a warp does a 16-key tile for all the group's heads with 64 MMAs,
// 32 byte permutes and 16 16-byte loads a lane.
//
// Grid (splits, n_head_kv); block = 4 warps, one KV head, one chunk of keys (attn_plan.cuh
// decode_plan with MmaDecodeParams::unit, attn_decode_tuning.cuh's kMmaDecodeUnit: 128 keys, so
// a warp streams two tiles or more where the SIMT plan's 64 gave it one); warp w takes the
// chunk's 16-key tiles w, w + 4, ... Per tile (lane = 4 g + c):
//   S = Q K^T:  A = Q (rows = the group's heads, 8..15 zero), B = K^T with the 128 dims in a
//               lane-friendly order: lane (g, c) loads dims 32 j + 8 c .. + 7 (j < 4) of key g
//               (four 16-byte loads; 8 lanes of a row read 64 contiguous bytes per load) and
//               k-step s takes its values 4 (s % 2) .. + 3 of load s / 2; Q's fragment uses
//               the same dims. Q and P are split into hi + lo in the cache type (two MMAs
//               each, as the prefill kernel does: ~22 / ~16 mantissa bits instead of 11 / 8).
//   softmax:    base 2 (q pre-scaled by scale * log2 e), row max over the quad (2 shuffles),
//               running sum per lane (reduced once at the end).
//   O^T += V^T P^T: A = V^T (rows = dims: lane g's m-tile t rows are dims 16 g + 2 t and
//               + 1), built from the lane's four V rows (keys 2c, 2c+1, 2c+8, 2c+9; 32 bytes
//               each) by byte permutes; B = P^T, which is exactly S's C fragment of rows 0..7.
//               O^T (128 dims x 8 heads) is 32 registers a lane.
// The 4 warps merge in shared memory; the block writes its chunk's partial (acc, m ln 2, l) in
// the SIMT kernel's layout, and mma_combine_kernel below merges the chunks, rounds the output
// and writes its Q8 copy.
// Loads (NS, attn_decode_tuning.cuh kMmaDecodeStages): a warp's tiles stream through a ring of NS
// stages in shared memory by cp.async, the first `pre` issued before the PDL wait (the rows before
// the new key are two launches old), the rest as stages free; NS = 0 keeps the kernel's first form
// (one tile in registers before the wait, each later one loaded after the one before). The new
// key's K / V go into the registers of the tile holding it after the wait.
// ROPE (AttnArgs::qkv_raw): the block ropes its group's q heads (and, where its chunk holds the new
// key, that key, storing K and V into the caches) with rope_head.cuh's body -- qk_norm_rope_store's
// bits -- so no rope launch precedes it. Both: H200 session 34, attn_decode_tuning.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/attn_mma.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_types.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/rope_head.cuh"

namespace ft::cuda::attn_detail {

inline constexpr int kMmaDecodeD = 128;
inline constexpr int kMmaDecodeMaxGroup = 8;
inline constexpr int kMmaDecodeWarps = 4;
inline constexpr int kMmaDecodeTile = 16;  // keys a warp step

struct MmaDecodeParams {
  const float* q;  // one token: head h at q + h * 128
  const void* k;
  const void* v;
  int64_t kv_stride;  // elements between cache rows
  float* part_acc;    // [n_head][splits][128]
  float* part_ml;     // [n_head][splits][2]: (m ln 2, l)
  const int32_t* d_pos;
  int64_t n_ctx, splits;
  int64_t unit;       // keys: chunks are whole multiples (decode_plan_min's unit; the combine's plan too)
  int64_t min_chunk;  // keys a live chunk holds at least (a multiple of unit; 0: none)
  int group;
  float scale_log2;
  // The combine (mma_combine_kernel): the output row and its optional Q8 copy.
  float* out;
  Round round;
  uint8_t* out_q8;  // nullptr, or the act_q8 row of n_head * 128 values
  int64_t q8_k;
  // ROPE (rope_head.cuh, as qk_norm_rope_store computes it: the same bits): the block whose chunk
  // holds the new key stores it into the caches.
  rope_detail::RopeInside rope;
  int pre;  // NS > 0: tiles a warp issues before the PDL wait (1..NS; the rest right after it)
};

// split2 (attn_mma_lane.cuh): hi + lo pairs of the cache type.
__device__ __forceinline__ uint4 ld_kv(const void* base, int64_t elem) {
  return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + elem));
}

// NS > 0: a warp's tiles stream through a ring of NS stages in shared memory (kMmaTileBytes each:
// the 16 K rows, then the 16 V rows of the KV head), the first MmaDecodeParams::pre issued before
// the PDL wait. A stage's 16-byte pieces are XOR-swizzled per key so that the fragment loads below
// are free of bank conflicts (each quarter warp reads 8 distinct bank groups): K piece p of key r
// at p ^ mma_swz_k(r), V piece p at p ^ mma_swz_v(r).
inline constexpr int kMmaTileBytes = 2 * kMmaDecodeTile * kMmaDecodeD * 2;  // 8 KB
__host__ __device__ constexpr int mma_swz_k(int r) { return (r & 1) << 2; }
__host__ __device__ constexpr int mma_swz_v(int r) { return (((r >> 1) & 1) << 2) | ((r >> 2) & 1); }
// Dynamic shared memory of the kernel: the rings (NS > 0; the warps' merge rows reuse them).
__host__ __device__ constexpr int mma_decode_smem(int ns) { return ns * kMmaDecodeWarps * kMmaTileBytes; }
// A bound on the kernel's static shared memory where it has a ring (NS > 0; asserted beside its arrays):
// the launcher counts on it to tell whether two blocks fit an SM (attention_decode.cu).
inline constexpr int kMmaDecodeStaticSmemMax = 8 * 1024;

template <class T, int NS, bool ROPE>
__global__ void __launch_bounds__(kMmaDecodeWarps * 32) attn_mma_decode_kernel(const MmaDecodeParams p) {
  constexpr int D = kMmaDecodeD;
  static_assert(NS == 0 || (NS >= 2 && NS <= 4), "cp_async_wait takes 0..3 groups pending");
  extern __shared__ __align__(16) uint8_t s_dyn[];
  __shared__ float s_m[kMmaDecodeWarps][kMmaDecodeMaxGroup], s_l[kMmaDecodeWarps][kMmaDecodeMaxGroup];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t split = blockIdx.x, kvh = blockIdx.y;
  // The position and the cache rows before it are at least two launches old (written before the
  // step's first kernel, or by earlier steps): read before the PDL wait, so the K/V loads overlap
  // the launch before. The new key (row pos) may come from the launch before (or, ROPE, is made here).
  const int64_t pos = *p.d_pos;
  const int64_t n_kv = live_keys(pos, 1, p.n_ctx);
  const DecodePlan plan = decode_plan_min(n_kv, p.splits, p.unit, p.min_chunk);
  if (split >= plan.n_chunks) {  // the whole block: no barrier below is skipped by part of it
    pdl_wait();
    pdl_trigger();
    return;
  }
  const int64_t kbeg = split * plan.chunk, kend = kbeg + plan.chunk < n_kv ? kbeg + plan.chunk : n_kv;
  const int64_t col = kvh * D;  // the KV head's first element in a cache row
  const int64_t first = kbeg + kMmaDecodeTile * warp;
  constexpr int64_t kStep = kMmaDecodeTile * kMmaDecodeWarps;
  const int n_my = first < kend ? static_cast<int>((kend - first + kStep - 1) / kStep) : 0;

  // K: key t0 + 8 j + g, dims 32 jj + 8 c .. + 7. V: keys t0 + {2c, 2c+1, 2c+8, 2c+9}, dims 16 g .. + 15.
  uint4 kq[2][4], vr[4][2];
  auto load_tile = [&](int64_t t0, int64_t lim) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t key = t0 + 8 * j + g;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
        kq[j][jj] = key < lim ? ld_kv(p.k, key * p.kv_stride + col + 32 * jj + 8 * c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t key = t0 + 2 * c + (i & 1) + 8 * (i >> 1);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        vr[i][h] = key < lim ? ld_kv(p.v, key * p.kv_stride + col + 16 * g + 8 * h) : make_uint4(0, 0, 0, 0);
    }
  };
  // NS > 0: tile i of this warp (keys first + 64 i ..) into stage i % NS, keys at or past
  // min(kend, pos) zero-filled (the new key is put into the registers after the wait).
  uint8_t* const ring = s_dyn + warp * NS * kMmaTileBytes;
  const int64_t lim_pre = kend < pos ? kend : pos;
  auto copy_tile = [&](int i) {
    const int64_t t0 = first + kStep * i;
    uint8_t* st = ring + (i % (NS > 0 ? NS : 1)) * kMmaTileBytes;
#pragma unroll
    for (int u = 0; u < 16; ++u) {
      const int idx = lane + 32 * (u & 7), r = idx >> 4, piece = idx & 15;
      const bool is_v = u >= 8;
      const int64_t key = t0 + r;
      const bool ok = key < lim_pre;
      const int sw = is_v ? mma_swz_v(r) : mma_swz_k(r);
      const uint16_t* src = static_cast<const uint16_t*>(is_v ? p.v : p.k) + (ok ? key : 0) * p.kv_stride + col + 8 * piece;
      cp_async16_zfill(st + (is_v ? kMmaTileBytes / 2 : 0) + r * (2 * D) + 16 * (piece ^ sw), src, ok);
    }
  };
  auto lds_tile = [&](int i) {
    const uint8_t* st = ring + (i % (NS > 0 ? NS : 1)) * kMmaTileBytes;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = 8 * j + g;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
        kq[j][jj] = *reinterpret_cast<const uint4*>(st + r * (2 * D) + 16 * ((4 * jj + c) ^ mma_swz_k(r)));
    }
#pragma unroll
    for (int i4 = 0; i4 < 4; ++i4) {
      const int r = 2 * c + (i4 & 1) + 8 * (i4 >> 1);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        vr[i4][h] = *reinterpret_cast<const uint4*>(st + kMmaTileBytes / 2 + r * (2 * D) +
                                                    16 * ((2 * g + h) ^ mma_swz_v(r)));
    }
  };
  if constexpr (NS == 0) {
    if (first < kend) load_tile(first, lim_pre);
  } else {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      if (i < p.pre) {
        if (i < n_my) copy_tile(i);
        cp_async_commit();  // empty groups too: the wait counts stay uniform
      }
    }
  }
  constexpr int KP = D / 64;  // ROPE: rope_head.cuh's pairs a lane
  float co[KP], si[KP];
  if constexpr (ROPE) rope_detail::load_pairs(p.rope.rope_cs + pos * p.rope.n_rot, p.rope.n_rot, lane, co, si);
  pdl_wait();
  pdl_trigger();
  if constexpr (NS > 0) {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      if (i >= p.pre) {
        if (i < n_my) copy_tile(i);
        cp_async_commit();
      }
    }
  }

  // ROPE: the group's q heads into s_rope, and where the chunk holds the new key, its K (normed,
  // rotated) and V rows in the cache type into s_new and the caches.
  using RopeSmem = float[ROPE ? kMmaDecodeMaxGroup + kMmaDecodeWarps + 1 : 1][D];
  __shared__ __align__(16) RopeSmem s_rope;
  __shared__ __align__(16) T s_new[2][ROPE ? D : 8];
  if constexpr (ROPE) {
    const bool has_new = kbeg <= pos && pos < kend;
    const int n_items = p.group + (has_new ? 2 : 0);
    float* buf = s_rope[kMmaDecodeMaxGroup + warp];
    for (int it = warp; it < n_items; it += kMmaDecodeWarps) {
      if (it < p.group) {
        rope_detail::head(p.rope.rq + (kvh * p.group + it) * D, s_rope[it], D, p.rope.q_norm_w, p.rope.eps, co, si,
                          p.rope.n_rot, p.rope.neox, p.round, buf, lane);
      } else if (it == p.group) {
        float* kf = s_rope[kMmaDecodeMaxGroup + kMmaDecodeWarps];
        rope_detail::head(p.rope.rk + kvh * D, kf, D, p.rope.k_norm_w, p.rope.eps, co, si, p.rope.n_rot, p.rope.neox,
                          p.round, buf, lane);
        T* dst = static_cast<T*>(p.rope.k_store) + pos * p.kv_stride + col;
        for (int i = lane; i < D; i += 32) dst[i] = s_new[0][i] = from_float<T>(kf[i]);
      } else {
        T* dst = static_cast<T*>(p.rope.v_store) + pos * p.kv_stride + col;
        for (int i = lane; i < D; i += 32) dst[i] = s_new[1][i] = from_float<T>(p.rope.rv[kvh * D + i]);
      }
    }
    __syncthreads();
  }
  // The new key into this tile's registers (from s_new, or the cache the launch before wrote).
  auto patch_new = [&](int64_t t0) {
    if (!(t0 <= pos && pos < t0 + kMmaDecodeTile && pos < kend)) return;
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (t0 + 8 * j + g == pos)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          if constexpr (ROPE)
            kq[j][jj] = *reinterpret_cast<const uint4*>(&s_new[0][32 * jj + 8 * c]);
          else
            kq[j][jj] = ld_kv(p.k, pos * p.kv_stride + col + 32 * jj + 8 * c);
        }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (t0 + 2 * c + (i & 1) + 8 * (i >> 1) == pos)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (ROPE)
            vr[i][h] = *reinterpret_cast<const uint4*>(&s_new[1][16 * g + 8 * h]);
          else
            vr[i][h] = ld_kv(p.v, pos * p.kv_stride + col + 16 * g + 8 * h);
        }
  };

  // Q fragments (rows 8..15 of A are zero: a1 = a3 = 0).
  uint32_t qh[8][2], ql[8][2];
  {
    const bool live = g < p.group;
    const float* q = ROPE ? s_rope[live ? g : 0] : p.q + (kvh * p.group + (live ? g : 0)) * D;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const int d0 = 32 * (s >> 1) + 8 * c + 4 * (s & 1);
      float x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) x[i] = live ? q[d0 + i] * p.scale_log2 : 0.0f;
      split2<T>(x[0], x[1], qh[s][0], ql[s][0]);
      split2<T>(x[2], x[3], qh[s][1], ql[s][1]);
    }
  }

  float o[8][4];
#pragma unroll
  for (int t = 0; t < 8; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  // One 16-key tile (kq, vr loaded) into (m, l, o).
  auto tile = [&](int64_t t0) {
    // S = Q K^T for keys t0 .. t0 + 7 (j = 0) and t0 + 8 .. t0 + 15 (j = 1).
    float sc[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        const uint4 w = kq[j][s >> 1];
        const uint32_t b0 = (s & 1) ? w.z : w.x, b1 = (s & 1) ? w.w : w.y;
        const uint32_t ah[4] = {qh[s][0], 0u, qh[s][1], 0u}, al[4] = {ql[s][0], 0u, ql[s][1], 0u};
        mma16816(sc[j], ah, b0, b1, T{});
        mma16816(sc[j], al, b0, b1, T{});
      }
    }
    // Lane (g, c) holds head g's scores of keys t0 + 8 j + 2 c (+1) in sc[j][0..1].
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t key = t0 + 8 * j + 2 * c + i;
        if (key >= kend) sc[j][i] = -INFINITY;
        mx = fmaxf(mx, sc[j][i]);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
    const float mn = fmaxf(m, mx);  // finite: the tile's first key is live
    const float alpha = exp2f(m - mn);
    m = mn;
    float pr[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) pr[j][i] = exp2f(sc[j][i] - mn);
    l = fmaf(l, alpha, (pr[0][0] + pr[0][1]) + (pr[1][0] + pr[1][1]));
    // O^T columns are heads 2c and 2c + 1: their rescale factors live in quads 2c and 2c + 1.
    const float a0 = __shfl_sync(0xFFFFFFFFu, alpha, 8 * c), a1 = __shfl_sync(0xFFFFFFFFu, alpha, 8 * c + 4);
#pragma unroll
    for (int t = 0; t < 8; ++t) o[t][0] *= a0, o[t][1] *= a1, o[t][2] *= a0, o[t][3] *= a1;
    uint32_t ph0, pl0, ph1, pl1;  // B = P^T: (keys 2c, 2c+1; head g), (keys 2c+8, 2c+9; head g)
    split2<T>(pr[0][0], pr[0][1], ph0, pl0);
    split2<T>(pr[1][0], pr[1][1], ph1, pl1);
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const uint32_t w0 = (&vr[0][t >> 2].x)[t & 3], w1 = (&vr[1][t >> 2].x)[t & 3];
      const uint32_t w2 = (&vr[2][t >> 2].x)[t & 3], w3 = (&vr[3][t >> 2].x)[t & 3];
      const uint32_t a[4] = {__byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632), __byte_perm(w2, w3, 0x5410),
                             __byte_perm(w2, w3, 0x7632)};
      mma16816(o[t], a, ph0, ph1, T{});
      mma16816(o[t], a, pl0, pl1, T{});
    }
  };
  if constexpr (NS == 0) {
    // The first tile's loads were issued before the wait; later tiles load after the one before.
    if (first < kend) patch_new(first);
    for (int64_t t0 = first; t0 < kend; t0 += kStep) {
      if (t0 != first) load_tile(t0, kend);
      tile(t0);
    }
  } else {
    for (int i = 0; i < n_my; ++i) {
      cp_async_wait(NS - 1);  // tile i landed (NS + i groups committed)
      __syncwarp();
      lds_tile(i);
      __syncwarp();  // every lane has read the stage
      if (i + NS < n_my) copy_tile(i + NS);
      cp_async_commit();
      const int64_t t0 = first + kStep * i;
      patch_new(t0);
      tile(t0);
    }
    cp_async_wait(0);  // nothing lands in the ring once it holds the merge rows
    __syncwarp();
  }
  l += __shfl_xor_sync(0xFFFFFFFFu, l, 1);
  l += __shfl_xor_sync(0xFFFFFFFFu, l, 2);

  // The warps' (m, l, O) into shared memory: o[t] = (dim 16g+2t, heads 2c, 2c+1), (dim 16g+2t+1, same
  // heads). NS > 0: warp w's rows in its own ring (NS x 8 KB >= 8 x 128 floats).
  using MergeRows = float[kMmaDecodeMaxGroup][D];
  __shared__ __align__(16) MergeRows s_o0[NS == 0 ? kMmaDecodeWarps : 1];
  static_assert(NS == 0 || sizeof(s_m) + sizeof(s_l) + sizeof(s_rope) + sizeof(s_new) <= kMmaDecodeStaticSmemMax,
                "the launcher's bound on the ring instances' static shared memory (s_o0 is unused there)");
  auto s_o = [&](int w) -> MergeRows& {
    if constexpr (NS == 0) return s_o0[w];
    return *reinterpret_cast<MergeRows*>(s_dyn + w * NS * kMmaTileBytes);
  };
  if (c == 0) s_m[warp][g] = m, s_l[warp][g] = l;
  MergeRows& mine = s_o(warp);
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    const int dd = 16 * g + 2 * t;
    mine[2 * c][dd] = o[t][0];
    mine[2 * c + 1][dd] = o[t][1];
    mine[2 * c][dd + 1] = o[t][2];
    mine[2 * c + 1][dd + 1] = o[t][3];
  }
  __syncthreads();
  const int dim = static_cast<int>(threadIdx.x);  // 128 threads, one dim each
  for (int h = 0; h < p.group; ++h) {
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMmaDecodeWarps; ++w) M = fmaxf(M, s_m[w][h]);
    float acc = 0.0f, L = 0.0f;
#pragma unroll
    for (int w = 0; w < kMmaDecodeWarps; ++w) {
      const float e = s_m[w][h] == -INFINITY ? 0.0f : exp2f(s_m[w][h] - M);
      acc = fmaf(e, s_o(w)[h][dim], acc);
      L = fmaf(e, s_l[w][h], L);
    }
    const int64_t row = kvh * p.group + h;
    p.part_acc[(row * p.splits + split) * D + dim] = acc;
    if (dim == 0) {
      p.part_ml[(row * p.splits + split) * 2] = M * 0.6931471805599453f;  // the combine's natural-log scale
      p.part_ml[(row * p.splits + split) * 2 + 1] = L;
    }
  }
}

// Merges one head's chunk partials (one block of 128 threads a query head): the chunks' (m, l)
// staged in shared memory and reduced in parallel, then thread (slice s, quad q) sums dims
// 4q .. 4q + 3 over chunks s, s + 4, ... with eight loads in flight, the four slices meet in
// shared memory, and warp 0 writes the rounded row segment and its Q8 blocks (q8_quantize_quad:
// quantize_act_q8's bytes). Same arithmetic as combine_column up to the order of the sums.
__global__ void __launch_bounds__(128) mma_combine_kernel(const MmaDecodeParams p) {
  constexpr int D = kMmaDecodeD;
  __shared__ float s_w[kMaxSplits], s_red[4][D], s_max[4], s_sum[4];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int64_t h = blockIdx.x;
  pdl_wait();
  pdl_trigger();
  const int64_t n_kv = live_keys(*p.d_pos, 1, p.n_ctx);
  const int n_chunks = static_cast<int>(decode_plan_min(n_kv, p.splits, p.unit, p.min_chunk).n_chunks);
  const float* ml = p.part_ml + h * p.splits * 2;
  const float m = tid < n_chunks && ml[2 * tid + 1] > 0.0f ? ml[2 * tid] : -INFINITY;
  const float lv = tid < n_chunks ? ml[2 * tid + 1] : 0.0f;
  float mx = m;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
  if (lane == 0) s_max[warp] = mx;
  __syncthreads();
  mx = fmaxf(fmaxf(s_max[0], s_max[1]), fmaxf(s_max[2], s_max[3]));
  const float w = m == -INFINITY ? 0.0f : expf(m - mx);
  if (tid < kMaxSplits) s_w[tid] = w;
  float l = w * lv;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xFFFFFFFFu, l, o);
  if (lane == 0) s_sum[warp] = l;
  __syncthreads();
  l = (s_sum[0] + s_sum[1]) + (s_sum[2] + s_sum[3]);
  const int q = lane, sl = warp;
  const float4* acc = reinterpret_cast<const float4*>(p.part_acc + h * p.splits * D) + q;
  float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int c0 = sl; c0 < n_chunks; c0 += 32) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int ch = c0 + 4 * u;
      v[u] = ch < n_chunks ? __ldg(acc + static_cast<int64_t>(ch) * (D / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int ch = c0 + 4 * u;
      const float wu = ch < n_chunks ? s_w[ch] : 0.0f;
      a.x = fmaf(wu, v[u].x, a.x), a.y = fmaf(wu, v[u].y, a.y), a.z = fmaf(wu, v[u].z, a.z), a.w = fmaf(wu, v[u].w, a.w);
    }
  }
  reinterpret_cast<float4*>(s_red[sl])[q] = a;
  __syncthreads();
  if (warp == 0) {
    float4 o;
    const float4 r0 = reinterpret_cast<const float4*>(s_red[0])[q], r1 = reinterpret_cast<const float4*>(s_red[1])[q];
    const float4 r2 = reinterpret_cast<const float4*>(s_red[2])[q], r3 = reinterpret_cast<const float4*>(s_red[3])[q];
    o.x = round_hd(p.round, ((r0.x + r1.x) + (r2.x + r3.x)) / l);
    o.y = round_hd(p.round, ((r0.y + r1.y) + (r2.y + r3.y)) / l);
    o.z = round_hd(p.round, ((r0.z + r1.z) + (r2.z + r3.z)) / l);
    o.w = round_hd(p.round, ((r0.w + r1.w) + (r2.w + r3.w)) / l);
    *reinterpret_cast<float4*>(p.out + h * D + 4 * q) = o;
    if (p.out_q8 != nullptr) q8_quantize_quad(o, h * D + 4 * q, p.q8_k, p.out_q8);
  }
}

}  // namespace ft::cuda::attn_detail
