// Tensor-core causal prefill for bf16/f16 caches at head_dim 64 and 128 (mma.sync m16n8k16,
// fp32 accumulate; sm_80+). Head dim 256 and the f32 cache take the SIMT kernel. The per-lane
// code lives in attn_mma_lane.cuh (host-callable, run on the CPU by the tests); this file
// adds the warp-collective instructions and the launch.
//
// Block = 4 warps, a tile of 64 query rows (row i of KV head g = token i / group, head
// g*group + i % group: the group's heads share every K/V tile), 16 rows per warp. Per tile
// of 64 keys: K and V staged in padded shared memory, S = Q K^T in registers, online softmax
// on the accumulators (each row's 64 scores live in the 4 lanes of a quad), O += P V with P
// taken straight from the S registers and V fragments from ldmatrix.trans.
//
// Precision: Q (fp32) and P (fp32) are split into hi + lo in the cache type and both halves
// are multiplied (2 MMAs instead of 1), so the products carry ~16 (bf16) / ~22 (f16)
// mantissa bits instead of 8 / 11: one bf16 rounding of Q alone moves the scores by ~1e-3
// and the output by ~1e-3 of |v|, far from the fp32 twin, while the split keeps the error
// near 1e-5 of |v| (see tests/cuda/attention_test.cpp). K and V are exact in the cache type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attn_mma_lane.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt_phases.cuh"
#include "cuda/check.h"

namespace ft::cuda::attn_detail {

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                         __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(const void* p, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

template <class T, int D>
__global__ void __launch_bounds__(128) attn_mma_kernel(const SimtParams p) {
  constexpr int kLd = MmaShape<T, D>::kLd;
  extern __shared__ __align__(16) uint8_t smem[];
  const MmaSmem<T, D> sm = MmaSmem<T, D>::carve(smem);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const MmaBlock b = mma_block(p, blockIdx.x, blockIdx.y);

  mma_stage_q<T, D>(tid, p, b, sm);
  MmaLane<D> st;
  mma_lane_init<D>(warp, lane, p, b, st);
  const T* qh_w = sm.qh + warp * 16 * kLd;
  const T* ql_w = sm.ql + warp * 16 * kLd;

  for (int64_t t0 = 0; t0 < b.kend; t0 += kMmaKeys) {
    const int n_valid = static_cast<int>(b.kend - t0 < kMmaKeys ? b.kend - t0 : kMmaKeys);
    __syncthreads();  // the previous tile's K/V reads are done (and, first time, Q is staged)
    mma_stage_kv<T, D>(tid, p, b, t0, n_valid, sm);
    __syncthreads();

    // S = Q K^T: 8 key n-tiles of 8, D/16 k-steps, hi and lo halves of Q.
    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ah[4], al[4];
      mma_frag_a<T, D>(qh_w, lane, kk, ah);
      mma_frag_a<T, D>(ql_w, lane, kk, al);
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        uint32_t b0, b1;
        mma_frag_k<T, D>(sm.k, lane, kk, n, b0, b1);
        mma16816(s[n], ah, b0, b1, T{});
        mma16816(s[n], al, b0, b1, T{});
      }
    }

    float mx[2];
    mma_mask_max<D>(lane, t0, p.scale, st, s, mx);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 2));
    }
    mma_softmax<D>(mx, st, s);

    // O += P V: the k-step over keys 16kk.. takes its A fragment from n-tiles 2kk and 2kk+1.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      uint32_t ph[4], pl[4];
      mma_frag_p<T>(s, kk, ph, pl);
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(mma_v_row<T, D>(sm.v, lane, kk, n), b0, b1, b2, b3);
        mma16816(st.o[n], ph, b0, b1, T{});
        mma16816(st.o[n], pl, b0, b1, T{});
        mma16816(st.o[n + 1], ph, b2, b3, T{});
        mma16816(st.o[n + 1], pl, b2, b3, T{});
      }
    }
  }

  float l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = st.l[h] + __shfl_xor_sync(0xFFFFFFFFu, st.l[h], 1);
    l[h] += __shfl_xor_sync(0xFFFFFFFFu, l[h], 2);
  }
  mma_store<D>(lane, p, b, st, l);
}

template <class T, int D>
void launch_mma(const SimtParams& p, dim3 grid, cudaStream_t s) {
  using S = MmaShape<T, D>;
  static const bool attr_set = [] {
    FT_CUDA_CHECK(cudaFuncSetAttribute(attn_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(S::kSmem)));
    return true;
  }();
  (void)attr_set;
  attn_mma_kernel<T, D><<<grid, 128, S::kSmem, s>>>(p);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda::attn_detail
