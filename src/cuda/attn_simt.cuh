// The SIMT attention kernel (fp32 FMA, any KV type): the decode path (kPartial: one chunk of
// keys per block, partials to the workspace, merged by the combine kernel) and the f32 /
// hd-256 prefill path (all keys, normalised output). Its phases, their layout and their CPU
// run are in attn_simt_phases.cuh; this file adds the barriers, the warp-parallel softmax
// and the launches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention.h"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt_phases.cuh"
#include "cuda/check.h"

namespace ft::cuda::attn_detail {

// Phase 3 on the device: one warp per row, lanes over the tile's keys (softmax_row is the
// serial twin with the same formulas).
template <class T, int D>
__device__ __forceinline__ void softmax_rows_warp(int tid, const SimtSmem<T, D>& sm) {
  using S = SimtShape<T, D>;
  const int warp = tid / 32, lane = tid % 32;
  for (int r = warp; r < kRowsPerBlock; r += S::kThreads / 32) {
    float* pr = sm.p + r * S::kPLd;
    const float m_old = sm.m[r];
    float mx = -HUGE_VALF;
    for (int j = lane; j < S::kT; j += 32) mx = fmaxf(mx, pr[j]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
    const float m_new = fmaxf(m_old, mx);
    float sum = 0.0f;
    for (int j = lane; j < S::kT; j += 32) {
      const float e = m_new == -HUGE_VALF ? 0.0f : expf(pr[j] - m_new);
      pr[j] = e;
      sum += e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
    __syncwarp();  // every lane has read m[r] before lane 0 replaces it
    if (lane == 0) {
      const float alpha = m_old == -HUGE_VALF ? 0.0f : expf(m_old - m_new);
      sm.a[r] = alpha;
      sm.l[r] = sm.l[r] * alpha + sum;
      sm.m[r] = m_new;
    }
  }
}

template <class T, int D, bool kPartial>
__global__ void __launch_bounds__(128) attn_simt_kernel(const SimtParams p) {
  using S = SimtShape<T, D>;
  extern __shared__ __align__(16) uint8_t smem[];
  const SimtSmem<T, D> sm = SimtSmem<T, D>::carve(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const SimtBlock b = simt_block<kPartial>(p, blockIdx.x, blockIdx.y, blockIdx.z);
  if (b.idle) return;  // the whole block: no barrier is skipped by part of it

  simt_stage_q<T, D>(tid, p, b, sm);
  __syncthreads();
  float acc[S::kRowsPV][8];
#pragma unroll
  for (int i = 0; i < S::kRowsPV; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] = 0.0f;
  for (int64_t t0 = b.kbeg; t0 < b.kend; t0 += S::kT) {
    const int n_valid = static_cast<int>(b.kend - t0 < S::kT ? b.kend - t0 : S::kT);
    simt_stage_kv<T, D>(tid, p, b, t0, n_valid, sm);
    __syncthreads();
    simt_scores<T, D>(tid, p, b, t0, n_valid, sm);
    __syncthreads();
    softmax_rows_warp<T, D>(tid, sm);
    __syncthreads();
    simt_pv<T, D>(tid, b, sm, acc);
    __syncthreads();  // the next tile overwrites k, v and p
  }
  simt_epilogue<T, D, kPartial>(tid, p, b, sm, acc);
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
    if (d == 32) return launch_simt<T, 32, kPartial>(p, grid, s);
    if (d == 64) return launch_simt<T, 64, kPartial>(p, grid, s);
    if (d == 128) return launch_simt<T, 128, kPartial>(p, grid, s);
    return launch_simt<T, 256, kPartial>(p, grid, s);
  };
  if (t == KvType::kF32) return by_dim(float{});
  if (t == KvType::kBF16) return by_dim(__nv_bfloat16{});
  return by_dim(__half{});
}

}  // namespace ft::cuda::attn_detail
