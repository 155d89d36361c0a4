// The dedicated decode attention kernel (1..8 query tokens against the KV cache), launched by
// attention_decode.cu. Twin: engine::attention_ref (tests/cuda/attention_test.cpp).
//
// Block = kDecodeWarps warps, one KV head g, R query rows of its group (row i = token
// i / group, head g*group + i % group: every K/V row is read once for all of them) and one
// chunk of keys (attn_plan.cuh decode_plan_min with kDecodeUnit and kDecodeMinChunk, from *d_pos).
// Before the PDL wait the block copies its chunk's cache rows before the new key (at most
// DecodeParams::stage_keys; two launches old, so legal there) into shared memory with cp.async:
// the keys stream in under the launch before, and the key loop reads them from shared memory
// (H200 session 20: tg128 +2.6% Llama-8B, +4.0% Qwen3-30B-A3B). No barrier in the key loop:
//   - a lane group of L = D/8 lanes owns one key at a time, each lane 8 of its elements
//     (one 16-byte load per K or V row, two for f32); q (pre-scaled by scale*log2 e) and the
//     accumulators of its 8 columns for the R rows stay in registers;
//   - each lane group loads NK keys (K and V) before computing: dot products, an xor
//     butterfly over the L lanes (every lane ends with the same fp32 sum), one online
//     softmax update per row and NK keys (base 2), acc = acc * alpha + p * v;
//   - at the end the lane groups' (m, l, acc) are merged in shared memory in a fixed order.
// One live chunk: the block writes the normalised, rounded output. Several: it writes its
// partial (acc, m, l) to the workspace and takes a ticket; the last block of each group of
// kDecodeMergeGroup chunks merges the group, the last of those merges the groups, always in
// index order (deterministic whichever block finishes last), and each resets its ticket.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/attention.h"
#include "cuda/attn_decode_tuning.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/cp_async.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/ticket.cuh"
#include "cuda/rope_head.cuh"
#include "cuda/round.cuh"

namespace ft::cuda::attn_detail {

struct DecodeParams {
  const float* q;
  int64_t ldq;
  const void* k;
  const void* v;
  int64_t kv_stride;  // elements between cache rows (n_head_kv * D)
  float* out;
  int64_t ldo;
  float* part_acc;     // [n_tok*n_head][splits][D]
  float* part_ml;      // [n_tok*n_head][splits][2] = (m, l), m in base 2
  float* group_acc;    // [n_tok*n_head][kDecodeMaxGroups][D]: merged groups of chunks
  float* group_ml;     // [n_tok*n_head][kDecodeMaxGroups][2]
  uint32_t* tickets;   // [n_head_kv][row_blocks][kDecodeTicketsPerHead], zero between calls
  const int32_t* d_pos;
  int64_t n_tok, n_ctx, group, n_head, splits, row_blocks;
  int64_t min_chunk;  // keys a live chunk holds at least (decode_plan_min; a multiple of kDecodeUnit)
  float scale_log2;  // scale * log2(e): scores in base 2, exp2f on the SFU
  // Keys of its chunk a block copies into shared memory before the PDL wait (0: none; the
  // launch's dynamic shared memory holds stage_keys K rows then stage_keys V rows of D).
  int64_t stage_keys;
  Round round;
  uint8_t* out_q8;       // nullptr, or the Q8 copy of out (act_q8.h rows of q8_k values)
  int64_t q8_k, q8_row_bytes;
  // The rope inside (rope_head.cuh): the blocks of the chunk holding the new key use it from
  // shared memory, and those of row block 0 store it into the caches.
  rope_detail::RopeInside rope;
  // With the rope inside and staged keys, the q / k norm weights (1: and the position's rope row)
  // are prefetched into L1 before the PDL wait, so the norm's weight reads after the head's sum of
  // squares hit L1 instead of making a second L2 round trip. 0: none. The host sets 1 where the
  // model has q / k norms (attention_decode.cu). H200 session 27, Qwen3-30B-A3B tg128 alternating:
  // call 5 517.3 (1) / 515.7 (2) against 510.6 tok/s (4 rounds), the final call's +0.6% (3 rounds);
  // Llama-8B (no norms: 1 prefetches the rope row alone) -0.5% there, so it stays 0.
  int pre_l1;
};

// Rows of D floats of s_acc the fused rope stages in before the key loop: the block's R q
// heads, a stage per warp, the new key (the merge reuses s_acc after the loop).
template <int D, int R>
inline constexpr bool kFusedRopeFits = (kDecodeWarps * (32 / (D / 8))) * R >= R + kDecodeWarps + 1;

// Eight cache elements of one lane, as loaded (16 bytes, 32 for f32).
template <class T>
struct KvRaw {
  uint4 w[sizeof(T) == 4 ? 2 : 1];
};

template <class T>
__device__ __forceinline__ void kv_load(const T* p, KvRaw<T>& r) {
  const uint4* u = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(r.w) / 16); ++i) r.w[i] = __ldg(u + i);
}

// The same from shared memory (the fused rope's new key and value).
template <class T>
__device__ __forceinline__ void kv_load_shared(const T* p, KvRaw<T>& r) {
  const uint4* u = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(r.w) / 16); ++i) r.w[i] = u[i];
}

template <class T>
__device__ __forceinline__ void kv_zero(KvRaw<T>& r) {
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(r.w) / 16); ++i) r.w[i] = uint4{0u, 0u, 0u, 0u};
}

__device__ __forceinline__ void kv_float(const KvRaw<float>& r, float (&x)[8]) {
  x[0] = __uint_as_float(r.w[0].x), x[1] = __uint_as_float(r.w[0].y);
  x[2] = __uint_as_float(r.w[0].z), x[3] = __uint_as_float(r.w[0].w);
  x[4] = __uint_as_float(r.w[1].x), x[5] = __uint_as_float(r.w[1].y);
  x[6] = __uint_as_float(r.w[1].z), x[7] = __uint_as_float(r.w[1].w);
}
__device__ __forceinline__ void kv_float(const KvRaw<__nv_bfloat16>& r, float (&x)[8]) {
  const uint32_t w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // bf16 -> fp32 is a 16-bit shift (exact)
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ void kv_float(const KvRaw<__half>& r, float (&x)[8]) {
  const uint32_t w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &w[i], 4);
    const float2 f = __half22float2(h);
    x[2 * i] = f.x;
    x[2 * i + 1] = f.y;
  }
}

// Sums x (V values per lane) over the L lanes of each aligned lane group by an xor butterfly: on
// return every lane of the group holds the same V sums (the same bits). (A reduce-scatter +
// all-gather form measured within 1-2% in the H200 19:20 run; removed in session 36.)
template <int L, int V>
__device__ __forceinline__ void group_sum(float (&x)[V]) {
#pragma unroll
  for (int o = 1; o < L; o <<= 1)
#pragma unroll
    for (int i = 0; i < V; ++i) x[i] += __shfl_xor_sync(0xFFFFFFFFu, x[i], o);
}

// The Q8 epilogue: output column c of row rr, rounded as written to out. The output loops
// give a warp 32 consecutive columns of one row (D and the block size are multiples of 32),
// i.e. one whole Q8 block of that head, lane i holding column 32j + i: the warp quantises it
// with quantize_act_q8's arithmetic (q8_tail.cuh) straight from registers.
template <int D>
__device__ __forceinline__ void write_q8(const DecodeParams& p, const RowRef& rr, int c, float y) {
  static_assert(D % 32 == 0, "Q8 blocks of 32 must not straddle heads");
  q8_quantize_warp(y, (rr.h * D + c) / 32, p.q8_k, p.out_q8 + rr.t * p.q8_row_bytes);
}

// Merges parts first .. first + count - 1 (partial index row * stride + i) of the block's
// rows in index order: M = max m over parts with l > 0, w_i = exp2(m_i - M), l = sum w_i l_i,
// o = sum w_i acc_i. Writes the normalised, rounded output (dst_acc == nullptr) or the merged
// partial at index dst_idx of dst (dst_stride parts per row). Every (m, l) is staged in shared
// memory by one thread each and the partials are loaded 8 at a time: loops of dependent L2
// loads made this merge the largest cost of the H200 run of 19:20 (ctx 512: 12 us a launch,
// ctx 8 without a merge: 3.6 us).
template <int R, int D>
__device__ __forceinline__ void merge_parts(const DecodeParams& p, int64_t g, int64_t row0, int rows_here,
                                            const float* acc, const float* ml, int64_t stride, int64_t first,
                                            int count, float* dst_acc, float* dst_ml, int64_t dst_stride,
                                            int64_t dst_idx, float* s_w, float* s_lm, float* s_pm) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < rows_here * count; i += kDecodeThreads) {
    const int r = i / count, k = i % count;
    const RowRef rr = row_ref(row0 + r, g, p.group);
    const float* m = ml + ((rr.t * p.n_head + rr.h) * stride + first + k) * 2;
    s_pm[(r * kDecodeMergeMax + k) * 2] = __ldcg(m);
    s_pm[(r * kDecodeMergeMax + k) * 2 + 1] = __ldcg(m + 1);
  }
  __syncthreads();
  if (tid < rows_here) {
    const float* pm = s_pm + tid * kDecodeMergeMax * 2;
    float mx = -HUGE_VALF;
    for (int i = 0; i < count; ++i)
      if (pm[2 * i + 1] > 0.0f) mx = fmaxf(mx, pm[2 * i]);
    float ls = 0.0f;
    for (int i = 0; i < count; ++i) {
      const float lw = pm[2 * i + 1];
      const float w = lw > 0.0f ? exp2f(pm[2 * i] - mx) : 0.0f;
      s_w[tid * kDecodeMergeMax + i] = w;
      ls = fmaf(w, lw, ls);
    }
    s_lm[2 * tid] = mx;
    s_lm[2 * tid + 1] = ls;
  }
  __syncthreads();
  for (int i = tid; i < R * D; i += kDecodeThreads) {
    const int r = i / D, c = i % D;
    if (r >= rows_here) break;
    const RowRef rr = row_ref(row0 + r, g, p.group);
    const int64_t row_g = rr.t * p.n_head + rr.h;
    const float* src = acc + (row_g * stride + first) * D + c;
    const float* w = s_w + r * kDecodeMergeMax;
    float o = 0.0f;
    for (int k0 = 0; k0 < count; k0 += 8) {
      float a[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) a[k] = k0 + k < count && w[k0 + k] != 0.0f ? __ldcg(src + (k0 + k) * D) : 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (k0 + k < count && w[k0 + k] != 0.0f) o = fmaf(w[k0 + k], a[k], o);
    }
    if (dst_acc == nullptr) {
      const float y = round_to(p.round, o / s_lm[2 * r + 1]);  // l > 0: key 0 is live
      p.out[rr.t * p.ldo + rr.h * D + c] = y;
      if (p.out_q8 != nullptr) write_q8<D>(p, rr, c, y);
    } else {
      dst_acc[(row_g * dst_stride + dst_idx) * D + c] = o;
      if (c == 0) {
        dst_ml[(row_g * dst_stride + dst_idx) * 2] = s_lm[2 * r];
        dst_ml[(row_g * dst_stride + dst_idx) * 2 + 1] = s_lm[2 * r + 1];
      }
    }
  }
}

template <class T, int D, int R, int NK>
__global__ void __launch_bounds__(kDecodeThreads, 1) attn_decode_kernel(const DecodeParams p) {
  constexpr int L = D / 8;                    // lanes per key
  constexpr int KPW = 32 / L;                 // keys per warp step
  constexpr int S = kDecodeWarps * KPW;       // lane groups (slots) per block
  constexpr int KPI = S * NK;                 // keys per block iteration
  static_assert(L >= 1 && L <= 32 && 32 % L == 0, "head dim 8..256");
  __shared__ __align__(16) float s_acc[S * R * D];
  __shared__ float s_ml[S * R * 2];
  __shared__ float s_w[R * kDecodeMergeMax];
  __shared__ float s_lm[R * 2];
  __shared__ float s_pm[R * kDecodeMergeMax * 2];
  __shared__ int s_last;
  __shared__ __align__(16) T s_new[2][D];  // fused rope: the new key and value as the cache holds them
  extern __shared__ __align__(16) uint8_t s_dyn[];  // stage_keys: the staged K rows, then V rows

  // Staging: the position and the cache rows before it are at least two launches old (written
  // before the step's first kernel, or by earlier steps), so they are read before the PDL wait
  // and the chunk's keys stream in under the launch before (the tensor-core kernel does the same
  // with its first tile, attn_decode_mma.cuh).
  const bool stage = p.stage_keys > 0;
  if (!stage) pdl_wait(), pdl_trigger();
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int sub = lane % L, kslot = lane / L, slot = warp * KPW + kslot;
  const int64_t rb = blockIdx.x, split = blockIdx.y, g = blockIdx.z;

  const int64_t pos = *p.d_pos;
  const int64_t n_kv = live_keys(pos, p.n_tok, p.n_ctx);
  const DecodePlan pl = decode_plan_min(n_kv, p.splits, kDecodeUnit, p.min_chunk);
  if (split >= pl.n_chunks) {  // the whole block: no barrier is skipped by part of it
    if (stage) pdl_wait(), pdl_trigger();
    return;
  }
  const int64_t n_rows = p.n_tok * p.group, row0 = rb * R;
  const int rows_here = static_cast<int>(n_rows - row0 < R ? n_rows - row0 : R);
  const int64_t kbeg = split * pl.chunk;
  int64_t kend = kbeg + pl.chunk;
  if (kend > n_kv) kend = n_kv;
  const int64_t last_key = pos + (row0 + rows_here - 1) / p.group;  // the block's last row sees it
  if (kend > last_key + 1) kend = last_key + 1;

  // Staged keys [kbeg, st_end): the chunk's rows before pos, at most stage_keys of them.
  T* const sk = reinterpret_cast<T*>(s_dyn);
  T* const sv = sk + p.stage_keys * D;
  int64_t st_end = kbeg;
  if (stage) {
    st_end = kend < pos ? kend : pos;
    if (st_end > kbeg + p.stage_keys) st_end = kbeg + p.stage_keys;
    if (st_end < kbeg) st_end = kbeg;
    constexpr int kPer = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte pieces of a row
    const int n = static_cast<int>(st_end - kbeg) * kPer;
    const T* k0 = static_cast<const T*>(p.k) + kbeg * p.kv_stride + g * D;
    const T* v0 = static_cast<const T*>(p.v) + kbeg * p.kv_stride + g * D;
    for (int i = tid; i < n; i += kDecodeThreads) {
      const int key = i / kPer, o = (i - key * kPer) * (16 / static_cast<int>(sizeof(T)));
      cp_async16(sk + key * D + o, k0 + key * p.kv_stride + o);
      cp_async16(sv + key * D + o, v0 + key * p.kv_stride + o);
    }
    cp_async_commit();
    if constexpr (kFusedRopeFits<D, R>) {
      if (p.pre_l1 != 0 && p.rope.rq != nullptr && tid < (p.pre_l1 == 1 ? 96 : 64)) {
        // Thread t: 128-byte line t % 32 of the q norm weights, the k norm weights, the rope row.
        const int line = tid & 31, which = tid >> 5;
        const float* base = which == 0   ? p.rope.q_norm_w
                            : which == 1 ? p.rope.k_norm_w
                                         : p.rope.rope_cs + pos * p.rope.n_rot;
        const int64_t n = which == 2 ? p.rope.n_rot : D;
        if (base != nullptr && 32 * line < n) asm volatile("prefetch.global.L1 [%0];" ::"l"(base + 32 * line));
      }
    }
    pdl_wait();
    pdl_trigger();
  }

  // The fused rope: this block's q heads into s_acc; the chunk holding the new key also ropes
  // that key and converts it and the value to the cache type (row block 0 stores them).
  const bool fused = kFusedRopeFits<D, R> && p.rope.rq != nullptr;  // the host asks only where it fits
  if constexpr (kFusedRopeFits<D, R>) {
    if (fused) {
      constexpr int KP = D >= 64 ? D / 64 : 1;
      float co[KP], si[KP];
      rope_detail::load_pairs(p.rope.rope_cs + pos * p.rope.n_rot, p.rope.n_rot, lane, co, si);
      float* buf = s_acc + (R + warp) * D;
      float* kf = s_acc + (R + kDecodeWarps) * D;
      const bool has_new = kbeg <= pos && pos < kend;
      const int n_items = rows_here + (has_new ? 2 : 0);
      for (int it = warp; it < n_items; it += kDecodeWarps) {
        if (it < rows_here) {
          const RowRef rr = row_ref(row0 + it, g, p.group);
          rope_detail::head(p.rope.rq + rr.h * D, s_acc + it * D, D, p.rope.q_norm_w, p.rope.eps, co, si, p.rope.n_rot,
                            p.rope.neox, p.round, buf, lane);
        } else if (it == rows_here) {
          rope_detail::head(p.rope.rk + g * D, kf, D, p.rope.k_norm_w, p.rope.eps, co, si, p.rope.n_rot, p.rope.neox,
                            p.round, buf, lane);
          T* dst = static_cast<T*>(p.rope.k_store) + pos * p.kv_stride + g * D;
          for (int i = lane; i < D; i += 32) {
            s_new[0][i] = from_float<T>(kf[i]);
            if (rb == 0) dst[i] = s_new[0][i];
          }
        } else {
          T* dst = static_cast<T*>(p.rope.v_store) + pos * p.kv_stride + g * D;
          for (int i = lane; i < D; i += 32) {
            s_new[1][i] = from_float<T>(p.rope.rv[g * D + i]);
            if (rb == 0) dst[i] = s_new[1][i];
          }
        }
      }
      __syncthreads();
    }
  }
  if (st_end > kbeg) {  // block-uniform
    cp_async_wait(0);
    __syncthreads();
  }

  // q of this lane's 8 columns, pre-scaled; the last key each row sees (-1: padding row).
  float q[R][8];
  int32_t lim[R];  // n_ctx < 2^31 (check_args)
#pragma unroll
  for (int r = 0; r < R; ++r) {
    lim[r] = -1;
#pragma unroll
    for (int e = 0; e < 8; ++e) q[r][e] = 0.0f;
    if (r < rows_here) {
      const RowRef rr = row_ref(row0 + r, g, p.group);
      lim[r] = static_cast<int32_t>(pos + rr.t);
      const float* qr = fused ? s_acc + r * D + sub * 8 : p.q + rr.t * p.ldq + rr.h * D + sub * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) q[r][e] = qr[e] * p.scale_log2;
    }
  }

  float acc[R][8], m[R], l[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -HUGE_VALF;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
  }

  const T* kc = static_cast<const T*>(p.k) + g * D + sub * 8;
  const T* vc = static_cast<const T*>(p.v) + g * D + sub * 8;
  // K and V of the lane group's NK keys of the step at jw (keys past kend read as zero:
  // never read past the live keys, NaN there would survive p = 0).
  auto load_step = [&](int64_t jw, KvRaw<T>(&kr)[NK], KvRaw<T>(&vr)[NK]) {
#pragma unroll
    for (int u = 0; u < NK; ++u) {
      const int64_t j = jw + kslot + u * KPW;
      if (fused && j == pos && j < kend) {  // the new key: not in the cache yet for this block
        kv_load_shared(&s_new[0][sub * 8], kr[u]);
        kv_load_shared(&s_new[1][sub * 8], vr[u]);
      } else if (j < st_end) {  // staged (st_end <= pos)
        kv_load_shared(sk + (j - kbeg) * D + sub * 8, kr[u]);
        kv_load_shared(sv + (j - kbeg) * D + sub * 8, vr[u]);
      } else if (j < kend) {
        kv_load(kc + j * p.kv_stride, kr[u]);
        kv_load(vc + j * p.kv_stride, vr[u]);
      } else {
        kv_zero(kr[u]);
        kv_zero(vr[u]);
      }
    }
  };
  KvRaw<T> kr[NK], vr[NK];
  // The loop bound is warp-uniform (the shuffles need every lane); keys past kend are masked.
  for (int64_t jw = kbeg + warp * (KPW * NK); jw < kend; jw += KPI) {
    const int64_t j0 = jw + kslot;
    load_step(jw, kr, vr);
    float sf[NK * R];  // s[u][r] = sf[u * R + r]
#pragma unroll
    for (int u = 0; u < NK; ++u) {
      float kf[8];
      kv_float(kr[u], kf);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d = fmaf(q[r][e], kf[e], d);
        sf[u * R + r] = d;
      }
    }
    group_sum<L, NK * R>(sf);  // over the key's L lanes: same bits in each
    float(&s)[NK][R] = *reinterpret_cast<float(*)[NK][R]>(sf);

#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mx = -HUGE_VALF;
#pragma unroll
      for (int u = 0; u < NK; ++u) {
        const int64_t j = j0 + u * KPW;
        if (j >= kend || j > lim[r]) s[u][r] = -HUGE_VALF;
        mx = fmaxf(mx, s[u][r]);
      }
      const float m_new = fmaxf(m[r], mx);
      if (m_new == -HUGE_VALF) {  // no live key for this row yet
#pragma unroll
        for (int u = 0; u < NK; ++u) s[u][r] = 0.0f;
        continue;
      }
      const float alpha = exp2f(m[r] - m_new);  // 0 while m was -inf
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] *= alpha;
#pragma unroll
      for (int u = 0; u < NK; ++u) {
        s[u][r] = exp2f(s[u][r] - m_new);
        l[r] += s[u][r];
      }
    }
#pragma unroll
    for (int u = 0; u < NK; ++u) {
      float vf[8];
      kv_float(vr[u], vf);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] = fmaf(s[u][r], vf[e], acc[r][e]);
    }
  }

  // Merge the lane groups (sum over slots in slot order: M = max m over slots with l > 0,
  // l = sum exp2(m - M) l, o = sum exp2(m - M) acc), then the chunks the same way.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4* dst = reinterpret_cast<float4*>(s_acc + (slot * R + r) * D + sub * 8);
    dst[0] = make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    dst[1] = make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]);
    if (sub == 0) {
      s_ml[(slot * R + r) * 2] = m[r];
      s_ml[(slot * R + r) * 2 + 1] = l[r];
    }
  }
  __syncthreads();
  const bool single = pl.n_chunks == 1;
  for (int i = tid; i < R * D; i += kDecodeThreads) {
    const int r = i / D, c = i % D;
    if (r >= rows_here) break;  // rows are the slow index: the rest are padding too
    float mx = -HUGE_VALF;
    for (int sl = 0; sl < S; ++sl)
      if (s_ml[(sl * R + r) * 2 + 1] > 0.0f) mx = fmaxf(mx, s_ml[(sl * R + r) * 2]);
    float ls = 0.0f, o = 0.0f;
    for (int sl = 0; sl < S; ++sl) {
      const float lw = s_ml[(sl * R + r) * 2 + 1];
      if (lw <= 0.0f) continue;
      const float w = exp2f(s_ml[(sl * R + r) * 2] - mx);
      ls = fmaf(w, lw, ls);
      o = fmaf(w, s_acc[(sl * R + r) * D + c], o);
    }
    const RowRef rr = row_ref(row0 + r, g, p.group);
    if (single) {
      const float y = round_to(p.round, o / ls);  // l > 0: key 0 is live
      p.out[rr.t * p.ldo + rr.h * D + c] = y;
      if (p.out_q8 != nullptr) write_q8<D>(p, rr, c, y);
    } else {
      const int64_t slot_g = (rr.t * p.n_head + rr.h) * p.splits + split;
      p.part_acc[slot_g * D + c] = o;
      if (c == 0) {
        p.part_ml[slot_g * 2] = mx;
        p.part_ml[slot_g * 2 + 1] = ls;
      }
    }
  }
  if (single) return;

  // The last block of each group of chunks merges the group; the last group merger merges the
  // groups (one group: the chunks straight into the output).
  uint32_t* tk = p.tickets + (g * p.row_blocks + rb) * kDecodeTicketsPerHead;
  const int64_t n_groups = ceil_div(pl.n_chunks, kDecodeMergeGroup);
  if (n_groups == 1) {
    if (!take_last(tk, pl.n_chunks, &s_last)) return;
    merge_parts<R, D>(p, g, row0, rows_here, p.part_acc, p.part_ml, p.splits, 0, static_cast<int>(pl.n_chunks),
                      nullptr, nullptr, 0, 0, s_w, s_lm, s_pm);
    return;
  }
  const int64_t grp = split / kDecodeMergeGroup, first = grp * kDecodeMergeGroup;
  const int count = static_cast<int>(pl.n_chunks - first < kDecodeMergeGroup ? pl.n_chunks - first : kDecodeMergeGroup);
  if (!take_last(tk + 1 + grp, count, &s_last)) return;
  merge_parts<R, D>(p, g, row0, rows_here, p.part_acc, p.part_ml, p.splits, first, count, p.group_acc, p.group_ml,
                    kDecodeMaxGroups, grp, s_w, s_lm, s_pm);
  if (!take_last(tk, n_groups, &s_last)) return;
  merge_parts<R, D>(p, g, row0, rows_here, p.group_acc, p.group_ml, kDecodeMaxGroups, 0, static_cast<int>(n_groups),
                    nullptr, nullptr, 0, 0, s_w, s_lm, s_pm);
}

// Dynamic shared memory of a launch: the staged K and V rows.
template <class T, int D>
size_t decode_stage_bytes(int64_t stage_keys) {
  return static_cast<size_t>(2 * stage_keys * D) * sizeof(T);
}

template <class T, int D, int R, int NK>
void launch_decode(const DecodeParams& p, dim3 grid, cudaStream_t s) {
  auto kernel = attn_decode_kernel<T, D, R, NK>;
  const size_t smem = decode_stage_bytes<T, D>(p.stage_keys);
  if (smem > 0) {  // past the default 48 KB: opt in (once per instance, at the largest size asked)
    static std::atomic<size_t> opted{0};
    if (smem > opted.load(std::memory_order_relaxed)) {
      FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      opted.store(smem, std::memory_order_relaxed);
    }
  }
  launch_pdl(kernel, grid, dim3(kDecodeThreads), smem, s, p);
}

// Runtime (kv type, head dim, rows per block) -> template instantiation. keys_per_slot 2 or 4
// overrides NK (0 = kDecodeKeysPerSlot) for the 16-bit caches at head dim 128 (the shape the
// benchmark sweeps).
inline void dispatch_decode(KvType t, int64_t d, int rows, int keys_per_slot, const DecodeParams& p, dim3 grid,
                            cudaStream_t s) {
  auto by_nk = [&](auto tag, auto dim, auto r) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value, R = decltype(r)::value;
    if constexpr (D == 128 && !std::is_same_v<T, float>) {
      if (keys_per_slot == 2) return launch_decode<T, D, R, 2>(p, grid, s);
      if (keys_per_slot == 4) return launch_decode<T, D, R, 4>(p, grid, s);
    }
    launch_decode<T, D, R, kDecodeKeysPerSlot<R>>(p, grid, s);
  };
  auto by_rows = [&](auto tag, auto dim) {
    if (rows <= 1) return by_nk(tag, dim, std::integral_constant<int, 1>{});
    if (rows <= 2) return by_nk(tag, dim, std::integral_constant<int, 2>{});
    if (rows <= 4) return by_nk(tag, dim, std::integral_constant<int, 4>{});
    by_nk(tag, dim, std::integral_constant<int, 8>{});
  };
  auto by_dim = [&](auto tag) {
    if (d == 32) return by_rows(tag, std::integral_constant<int, 32>{});
    if (d == 64) return by_rows(tag, std::integral_constant<int, 64>{});
    if (d == 128) return by_rows(tag, std::integral_constant<int, 128>{});
    by_rows(tag, std::integral_constant<int, 256>{});
  };
  if (t == KvType::kF32) return by_dim(float{});
  if (t == KvType::kBF16) return by_dim(__nv_bfloat16{});
  by_dim(__half{});
}

}  // namespace ft::cuda::attn_detail
