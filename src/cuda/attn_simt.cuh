// The SIMT attention kernel (fp32 FMA, any KV type): the decode path (kPartial: one chunk of
// keys per block, partials to the workspace, merged by the combine kernel) and the f32
// prefill path (all keys, normalised output).
//
// Block = 128 threads, one KV head g (blockIdx.y), kRowsPerBlock query rows of that head's
// group (blockIdx.x; attn_plan.cuh row_ref), one chunk of keys (blockIdx.z, decode only).
// Per tile of kT keys:
//   1. stage the K and V rows of head g in shared memory (16-byte loads; rows past the end
//      are zero so that p = 0 never meets a stale NaN);
//   2. scores: each thread owns one key and kRowsQK rows; the q rows are read as broadcasts
//      and the padded K rows (16 bytes) keep the per-lane row reads conflict-free;
//   3. online softmax: one warp per row updates (m, l) and leaves the probabilities and the
//      rescale factor exp(m_old - m_new) in shared memory;
//   4. P*V: each thread owns 8 columns of kRowsPV rows and walks the tile's keys.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention.h"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/round.cuh"

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
  static constexpr int kCG = D / 8;             // 8-column groups (P*V)
  static constexpr int kRG = kThreads / kCG;    // row groups (P*V)
  static constexpr int kRowsPV = kRowsPerBlock / kRG;
  static constexpr int kPLd = kT + 1;  // padded probability row: rows rg and rg+1 on other banks
  static constexpr size_t kSmem = sizeof(float) * kRowsPerBlock * D + 2 * sizeof(T) * kT * kLd +
                                  sizeof(float) * kRowsPerBlock * kPLd + 3 * sizeof(float) * kRowsPerBlock;
  static_assert(kThreads % kT == 0 && kRowsPerBlock % kTpk == 0, "score mapping");
  static_assert(kThreads % kCG == 0 && kRowsPerBlock % kRG == 0, "P*V mapping");
};

template <class T, int D, bool kPartial>
__global__ void __launch_bounds__(128) attn_simt_kernel(const SimtParams p) {
  using S = SimtShape<T, D>;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint8_t smem[];
  float* q_s = reinterpret_cast<float*>(smem);
  T* k_s = reinterpret_cast<T*>(q_s + kRowsPerBlock * D);
  T* v_s = k_s + S::kT * S::kLd;
  float* p_s = reinterpret_cast<float*>(v_s + S::kT * S::kLd);
  float* m_s = p_s + kRowsPerBlock * S::kPLd;
  float* l_s = m_s + kRowsPerBlock;
  float* a_s = l_s + kRowsPerBlock;

  const int tid = static_cast<int>(threadIdx.x);
  const int64_t g = blockIdx.y;
  // Prefill: the last row blocks see the most keys, so they start first.
  const int64_t rb = kPartial ? static_cast<int64_t>(blockIdx.x) : p.row_blocks - 1 - static_cast<int64_t>(blockIdx.x);
  const int64_t n_rows = p.n_tok * p.group;
  const int64_t row0 = rb * kRowsPerBlock;
  const int64_t pos = *p.d_pos;
  const int64_t n_kv_all = live_keys(pos, p.n_tok, p.n_ctx);
  // Keys the block's last row sees (the rows' tokens grow with the row index).
  const int64_t last_row = (row0 + kRowsPerBlock < n_rows ? row0 + kRowsPerBlock : n_rows) - 1;
  const int rows_here = static_cast<int>(last_row - row0 + 1);  // live rows of this block, 1..16
  int64_t kend = pos + last_row / p.group + 1;
  if (kend > n_kv_all) kend = n_kv_all;
  int64_t kbeg = 0;
  if constexpr (kPartial) {
    const DecodePlan pl = decode_plan(n_kv_all, p.splits);
    const int64_t c = blockIdx.z;
    if (c >= pl.n_chunks) return;  // whole block: no barrier is skipped by part of it
    kbeg = c * pl.chunk;
    if (kend > kbeg + pl.chunk) kend = kbeg + pl.chunk;
  }

  for (int i = tid; i < kRowsPerBlock * D; i += S::kThreads) {
    const int64_t row = row0 + i / D;
    float x = 0.0f;
    if (row < n_rows) {
      const RowRef rr = row_ref(row, g, p.group);
      x = p.q[rr.t * p.ldq + rr.h * D + i % D];
    }
    q_s[i] = x;
  }
  if (tid < kRowsPerBlock) {
    m_s[tid] = kNegInf;
    l_s[tid] = 0.0f;
  }
  __syncthreads();

  const int cg = tid % S::kCG, rg = tid / S::kCG;
  float acc[S::kRowsPV][8];
#pragma unroll
  for (int i = 0; i < S::kRowsPV; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] = 0.0f;

  const T* kc = static_cast<const T*>(p.k) + g * D;
  const T* vc = static_cast<const T*>(p.v) + g * D;
  constexpr int kVecPerRow = D * static_cast<int>(sizeof(T)) / 16;
  for (int64_t t0 = kbeg; t0 < kend; t0 += S::kT) {
    const int n_valid = static_cast<int>(kend - t0 < S::kT ? kend - t0 : S::kT);
    // 1. stage
    for (int i = tid; i < S::kT * kVecPerRow; i += S::kThreads) {
      const int r = i / kVecPerRow, c = i % kVecPerRow;
      uint4 kx = make_uint4(0, 0, 0, 0), vx = make_uint4(0, 0, 0, 0);
      if (r < n_valid) {
        const int64_t off = (t0 + r) * p.kv_stride;
        kx = __ldg(reinterpret_cast<const uint4*>(kc + off) + c);
        vx = __ldg(reinterpret_cast<const uint4*>(vc + off) + c);
      }
      reinterpret_cast<uint4*>(k_s + r * S::kLd)[c] = kx;
      reinterpret_cast<uint4*>(v_s + r * S::kLd)[c] = vx;
    }
    __syncthreads();

    // 2. scores
    {
      const int kk = tid % S::kT, part = tid / S::kT;
      float s[S::kRowsQK];
#pragma unroll
      for (int i = 0; i < S::kRowsQK; ++i) s[i] = 0.0f;
      const T* krow = k_s + kk * S::kLd;
#pragma unroll 4
      for (int d = 0; d < D; d += 8) {
        float kx[8];
        load8(krow + d, kx);
#pragma unroll
        for (int i = 0; i < S::kRowsQK; ++i) {
          if (part * S::kRowsQK + i >= rows_here) break;  // warp-uniform: padding rows of a small group
          float qx[8];
          load8(q_s + (part * S::kRowsQK + i) * D + d, qx);
#pragma unroll
          for (int e = 0; e < 8; ++e) s[i] = fmaf(qx[e], kx[e], s[i]);
        }
      }
      const int64_t j = t0 + kk;
#pragma unroll
      for (int i = 0; i < S::kRowsQK; ++i) {
        const int r = part * S::kRowsQK + i;
        const int64_t row = row0 + r;
        const bool live = kk < n_valid && row < n_rows && j <= pos + row / p.group;
        p_s[r * S::kPLd + kk] = live ? s[i] * p.scale : kNegInf;
      }
    }
    __syncthreads();

    // 3. online softmax, one warp per row
    {
      const int warp = tid / 32, lane = tid % 32;
      for (int r = warp; r < kRowsPerBlock; r += S::kThreads / 32) {
        float* pr = p_s + r * S::kPLd;
        const float m_old = m_s[r];
        float mx = kNegInf;
        for (int j = lane; j < S::kT; j += 32) mx = fmaxf(mx, pr[j]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
        const float m_new = fmaxf(m_old, mx);
        float sum = 0.0f;
        for (int j = lane; j < S::kT; j += 32) {
          const float e = m_new == kNegInf ? 0.0f : expf(pr[j] - m_new);
          pr[j] = e;
          sum += e;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
        __syncwarp();  // every lane has read m_s[r] before lane 0 replaces it
        if (lane == 0) {
          const float alpha = m_old == kNegInf ? 0.0f : expf(m_old - m_new);
          a_s[r] = alpha;
          l_s[r] = l_s[r] * alpha + sum;
          m_s[r] = m_new;
        }
      }
    }
    __syncthreads();

    // 4. P*V
#pragma unroll
    for (int i = 0; i < S::kRowsPV; ++i) {
      const float alpha = a_s[rg + i * S::kRG];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[i][e] *= alpha;
    }
#pragma unroll 4
    for (int j = 0; j < S::kT; ++j) {
      float vx[8];
      load8(v_s + j * S::kLd + cg * 8, vx);
#pragma unroll
      for (int i = 0; i < S::kRowsPV; ++i) {
        if (rg + i * S::kRG >= rows_here) break;
        const float pj = p_s[(rg + i * S::kRG) * S::kPLd + j];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[i][e] = fmaf(pj, vx[e], acc[i][e]);
      }
    }
    __syncthreads();  // the next tile overwrites k_s, v_s and p_s
  }

#pragma unroll
  for (int i = 0; i < S::kRowsPV; ++i) {
    const int r = rg + i * S::kRG;
    const int64_t row = row0 + r;
    if (row >= n_rows) continue;
    const RowRef rr = row_ref(row, g, p.group);
    if constexpr (kPartial) {
      const int64_t slot = (rr.t * p.n_head + rr.h) * p.splits + blockIdx.z;
      float4* dst = reinterpret_cast<float4*>(p.part_acc + slot * D + cg * 8);
      dst[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      dst[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
      if (cg == 0) {
        p.part_ml[slot * 2] = m_s[r];
        p.part_ml[slot * 2 + 1] = l_s[r];
      }
    } else {
      const float inv = 1.0f / l_s[r];  // l >= 1: key 0 is live for every row
      float* dst = p.out + rr.t * p.ldo + rr.h * D + cg * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = round_to(p.round, acc[i][e] * inv);
    }
  }
}

// Opts the instantiation into its dynamic shared memory (once) and launches it.
template <class T, int D, bool kPartial>
void launch_simt(const SimtParams& p, dim3 grid, cudaStream_t s) {
  using S = SimtShape<T, D>;
  static const bool attr_set = [] {
    FT_CUDA_CHECK(cudaFuncSetAttribute(attn_simt_kernel<T, D, kPartial>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(S::kSmem)));
    return true;
  }();
  (void)attr_set;
  attn_simt_kernel<T, D, kPartial><<<grid, S::kThreads, S::kSmem, s>>>(p);
  FT_CUDA_CHECK_LAUNCH();
}

// Runtime (kv type, head dim) -> template instantiation.
template <bool kPartial>
void dispatch_simt(KvType t, int64_t d, const SimtParams& p, dim3 grid, cudaStream_t s) {
  auto by_dim = [&](auto tag) {
    using T = decltype(tag);
    if (d == 64) return launch_simt<T, 64, kPartial>(p, grid, s);
    if (d == 128) return launch_simt<T, 128, kPartial>(p, grid, s);
    return launch_simt<T, 256, kPartial>(p, grid, s);
  };
  if (t == KvType::kF32) return by_dim(float{});
  if (t == KvType::kBF16) return by_dim(__nv_bfloat16{});
  return by_dim(__half{});
}

}  // namespace ft::cuda::attn_detail
