// Tensor-core causal prefill for bf16/f16 caches at head_dim 64 and 128 (mma.sync m16n8k16,
// fp32 accumulate; sm_80+). Head dim 256 and the f32 cache take the SIMT kernel.
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

#include "cuda/attn_plan.cuh"
#include "cuda/attn_simt.cuh"
#include "cuda/attn_types.cuh"
#include "cuda/check.h"
#include "cuda/round.cuh"

namespace ft::cuda::attn_detail {

inline constexpr int kMmaRows = 64;  // query rows per block
inline constexpr int kMmaKeys = 64;  // keys per tile

template <class T, int D>
struct MmaShape {
  static constexpr int kLd = D + 8;  // padded row (elements): 32-bit fragment loads and ldmatrix rows conflict-free
  static constexpr size_t kSmem = sizeof(T) * (2 * kMmaRows + 2 * kMmaKeys) * kLd;
};

// Two fp32 values -> one 32-bit register of the cache type (first value in the low half).
__device__ __forceinline__ uint32_t pack2(__nv_bfloat16, float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t pack2(__half, float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}
// x = hi + lo with hi, lo in the cache type: the two halves of the split products.
template <class T>
__device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo) {
  const T ah = from_float<T>(a), bh = from_float<T>(b);
  hi = pack2(T{}, static_cast<float>(ah), static_cast<float>(bh));
  lo = pack2(T{}, a - static_cast<float>(ah), b - static_cast<float>(bh));
}

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

__device__ __forceinline__ uint32_t lds32(const void* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <class T, int D>
__global__ void __launch_bounds__(128) attn_mma_kernel(const SimtParams p) {
  using S = MmaShape<T, D>;
  constexpr int kLd = S::kLd;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(16) uint8_t smem[];
  T* qh_s = reinterpret_cast<T*>(smem);
  T* ql_s = qh_s + kMmaRows * kLd;
  T* k_s = ql_s + kMmaRows * kLd;
  T* v_s = k_s + kMmaKeys * kLd;

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int gq = lane / 4, cq = lane % 4;  // fragment row group and column pair
  const int64_t g = blockIdx.y;
  const int64_t rb = p.row_blocks - 1 - static_cast<int64_t>(blockIdx.x);  // most keys first
  const int64_t n_rows = p.n_tok * p.group;
  const int64_t row0 = rb * kMmaRows;
  const int64_t pos = *p.d_pos;
  const int64_t n_kv_all = live_keys(pos, p.n_tok, p.n_ctx);
  const int64_t last_row = (row0 + kMmaRows < n_rows ? row0 + kMmaRows : n_rows) - 1;
  int64_t kend = pos + last_row / p.group + 1;
  if (kend > n_kv_all) kend = n_kv_all;

  // Q rows -> hi/lo halves in shared memory (padding rows are zero).
  for (int i = tid; i < kMmaRows * D / 2; i += 128) {
    const int r = i / (D / 2), c = 2 * (i % (D / 2));
    const int64_t row = row0 + r;
    float a = 0.0f, b = 0.0f;
    if (row < n_rows) {
      const RowRef rr = row_ref(row, g, p.group);
      const float* src = p.q + rr.t * p.ldq + rr.h * D + c;
      a = src[0];
      b = src[1];
    }
    uint32_t hi, lo;
    split2<T>(a, b, hi, lo);
    *reinterpret_cast<uint32_t*>(qh_s + r * kLd + c) = hi;
    *reinterpret_cast<uint32_t*>(ql_s + r * kLd + c) = lo;
  }

  // This lane's two rows (gq and gq + 8 of the warp's 16) and the keys they may see.
  const int64_t my_row[2] = {row0 + warp * 16 + gq, row0 + warp * 16 + gq + 8};
  int64_t lim[2];  // keys j < lim are visible
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    lim[h] = my_row[h] < n_rows ? pos + my_row[h] / p.group + 1 : 0;
    if (lim[h] > kend) lim[h] = kend;  // staged rows past kend are zeros, not keys
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sum

  const T* kc = static_cast<const T*>(p.k) + g * D;
  const T* vc = static_cast<const T*>(p.v) + g * D;
  constexpr int kVecPerRow = D * static_cast<int>(sizeof(T)) / 16;
  const T* qh_w = qh_s + warp * 16 * kLd;
  const T* ql_w = ql_s + warp * 16 * kLd;

  for (int64_t t0 = 0; t0 < kend; t0 += kMmaKeys) {
    const int n_valid = static_cast<int>(kend - t0 < kMmaKeys ? kend - t0 : kMmaKeys);
    __syncthreads();  // the previous tile's K/V reads are done (and, first time, Q is staged)
    for (int i = tid; i < kMmaKeys * kVecPerRow; i += 128) {
      const int r = i / kVecPerRow, c = i % kVecPerRow;
      uint4 kx = make_uint4(0, 0, 0, 0), vx = make_uint4(0, 0, 0, 0);
      if (r < n_valid) {
        const int64_t off = (t0 + r) * p.kv_stride;
        kx = __ldg(reinterpret_cast<const uint4*>(kc + off) + c);
        vx = __ldg(reinterpret_cast<const uint4*>(vc + off) + c);
      }
      reinterpret_cast<uint4*>(k_s + r * kLd)[c] = kx;
      reinterpret_cast<uint4*>(v_s + r * kLd)[c] = vx;
    }
    __syncthreads();

    // S = Q K^T: 8 key n-tiles of 8, D/16 k-steps, hi and lo halves of Q.
    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c0 = kk * 16 + 2 * cq;
      uint32_t ah[4], al[4];
      ah[0] = lds32(qh_w + gq * kLd + c0);
      ah[1] = lds32(qh_w + (gq + 8) * kLd + c0);
      ah[2] = lds32(qh_w + gq * kLd + c0 + 8);
      ah[3] = lds32(qh_w + (gq + 8) * kLd + c0 + 8);
      al[0] = lds32(ql_w + gq * kLd + c0);
      al[1] = lds32(ql_w + (gq + 8) * kLd + c0);
      al[2] = lds32(ql_w + gq * kLd + c0 + 8);
      al[3] = lds32(ql_w + (gq + 8) * kLd + c0 + 8);
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        const T* kr = k_s + (n * 8 + gq) * kLd + c0;
        const uint32_t b0 = lds32(kr), b1 = lds32(kr + 8);
        mma16816(s[n], ah, b0, b1, T{});
        mma16816(s[n], al, b0, b1, T{});
      }
    }

    // Mask, scale, online softmax. Element e of n-tile n: row h = e / 2, key n*8 + 2*cq + e % 2.
    float mx[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const int64_t j = t0 + n * 8 + 2 * cq + e % 2;
        const float v = j < lim[h] ? s[n][e] * p.scale : kNegInf;
        s[n][e] = v;
        mx[h] = fmaxf(mx[h], v);
      }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 2));
      const float m_new = fmaxf(m[h], mx[h]);
      alpha[h] = m_new == kNegInf ? 0.0f : expf(m[h] - m_new);
      m[h] = m_new;
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const float pe = m[h] == kNegInf ? 0.0f : expf(s[n][e] - m[h]);
        s[n][e] = pe;
        sum[h] += pe;
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    // O += P V: the k-step over keys 16kk.. takes its A fragment from n-tiles 2kk and 2kk+1.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      uint32_t ph[4], pl[4];
      split2<T>(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
      split2<T>(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
      split2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
      split2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
      const T* vrow = v_s + (kk * 16 + lane % 16) * kLd + (lane / 16) * 8;
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(vrow + n * 8, b0, b1, b2, b3);
        mma16816(o[n], ph, b0, b1, T{});
        mma16816(o[n], pl, b0, b1, T{});
        mma16816(o[n + 1], ph, b2, b3, T{});
        mma16816(o[n + 1], pl, b2, b3, T{});
      }
    }
  }

  // Row sums over the quad, normalise, round, store.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xFFFFFFFFu, l[h], 1);
    l[h] += __shfl_xor_sync(0xFFFFFFFFu, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (my_row[h] >= n_rows) continue;
    const RowRef rr = row_ref(my_row[h], g, p.group);
    const float inv = 1.0f / l[h];  // l >= 1: key 0 is visible to every row
    float* dst = p.out + rr.t * p.ldo + rr.h * D + 2 * cq;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      dst[n * 8] = round_to(p.round, o[n][2 * h] * inv);
      dst[n * 8 + 1] = round_to(p.round, o[n][2 * h + 1] * inv);
    }
  }
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
