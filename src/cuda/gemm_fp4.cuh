// NVFP4 fast path of the fused GEMM kernel (gemm_fused.cu), host- and device-callable so
// that tests/cuda/gemm_decode_test.cpp checks it against dequantize_row_ref without a GPU.
//
// An NVFP4 byte holds two elements 8 apart (low nibble element j of a 16-element sub-block,
// high nibble element j + 8). Instead of decoding nibbles one by one, the fast path keeps
// each byte's two weights side by side in the shared tile -- the "pair layout" of a
// 32-element k step: column c holds element fp4_pair_elem(c) -- and stages X in the same
// column order, which leaves every dot product unchanged (the sum runs over the same
// (w, x) pairs). A byte then becomes one 16-bit pair by a 256-entry table lookup (the E2M1
// values, exact in bf16 and f16) and one paired multiply by the sub-block scale (ue4m3 has
// 4 significant bits, E2M1 2, so the product is exact in both types and within their
// normal range: 2^-10 .. 2688). Per 8 weights: 4 lookups + 4 multiplies instead of ~50
// integer and fp32 operations on the generic path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/gemm_decode.cuh"  // gemv_formats.cuh and its names in gemm_detail (ue4m3_half)
#include "cuda/gemv_formats.cuh"

namespace ft::cuda::gemm_detail {

// Element (0..31) of a k step held by pair-layout column c (0..31).
FT_HD inline int fp4_pair_elem(int c) {
  const int sl = c >> 4, cc = c & 15;
  return 16 * sl + (cc >> 1) + 8 * (cc & 1);
}

// A T pair <-> its 32 bits (low half: the first element), through the raw structs (the
// pair types are not trivially copyable).
template <class T>
FT_HD inline uint32_t bits2(const std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>& v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162_raw r = v;
    return static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
  } else {
    const __half2_raw r = v;
    return static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
  }
}
template <class T>
FT_HD inline std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2> pair2(uint32_t b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162_raw r;
    r.x = static_cast<unsigned short>(b & 0xFFFF);
    r.y = static_cast<unsigned short>(b >> 16);
    return __nv_bfloat162(r);
  } else {
    __half2_raw r;
    r.x = static_cast<unsigned short>(b & 0xFFFF);
    r.y = static_cast<unsigned short>(b >> 16);
    return __half2(r);
  }
}

template <class T>
FT_HD inline uint32_t pack2_t(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return bits2<T>(__floats2bfloat162_rn(lo, hi));
  } else {
    return bits2<T>(__floats2half2_rn(lo, hi));
  }
}

template <class T>
FT_HD inline uint32_t mul2_t(uint32_t a, uint32_t b) {
  return bits2<T>(__hmul2(pair2<T>(a), pair2<T>(b)));
}

FT_HD inline float e2m1_value(uint32_t n) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (n & 8) ? -mag[n & 7] : mag[n & 7];
}

// Table entry for byte v: (E2M1(low nibble), E2M1(high nibble)) as a T pair.
template <class T>
FT_HD inline uint32_t e2m1_pair(uint32_t v) {
  return pack2_t<T>(e2m1_value(v & 15), e2m1_value(v >> 4));
}

// Thread part wp (0..3) of k step kt of an NVFP4 row: pair-layout columns 8wp .. 8wp+7 as 4
// T pairs. table: the 256 e2m1_pair entries.
template <class T>
FT_HD inline void nvfp4_pairs(const uint8_t* row, int64_t kt, int wp, const uint32_t* table, uint32_t* out) {
  const uint8_t* b = row + (kt >> 1) * 36;  // 36-byte blocks of 64 elements: a step is half a block
  const int s = 2 * static_cast<int>(kt & 1) + (wp >> 1);
  const uint8_t* q = b + 4 + 8 * s + 4 * (wp & 1);  // 4-aligned (rows are; 36-byte blocks)
#ifdef __CUDA_ARCH__
  const uint32_t qs = *reinterpret_cast<const uint32_t*>(q);
#else
  uint32_t qs;
  std::memcpy(&qs, q, 4);
#endif
  const float sc = 2.0f * ue4m3_half(b[s]);          // the full ue4m3 scale, exact
  const uint32_t scp = pack2_t<T>(sc, sc);
FT_UNROLL
  for (int i = 0; i < 4; ++i) out[i] = mul2_t<T>(table[(qs >> (8 * i)) & 0xFF], scp);
}

// Part xq (0..3) of the X staging in pair layout: from the 32 floats x[0..31] of one row's
// k step, columns 16*(xq/2) + 8*(xq%2) .. +7 as 4 T pairs (x[j + m], x[j + 8 + m]) with
// j = 16*(xq/2) + 4*(xq%2).
template <class T>
FT_HD inline void x_pairs(const float* x, int xq, uint32_t* out) {
  const int j = 16 * (xq >> 1) + 4 * (xq & 1);
#ifdef __CUDA_ARCH__
  // x is 16-byte aligned (the kernel's requirement on X), j a multiple of 4.
  const float4 a = *reinterpret_cast<const float4*>(x + j), b = *reinterpret_cast<const float4*>(x + j + 8);
#else
  float4 a, b;
  std::memcpy(&a, x + j, 16);
  std::memcpy(&b, x + j + 8, 16);
#endif
  out[0] = pack2_t<T>(a.x, b.x);
  out[1] = pack2_t<T>(a.y, b.y);
  out[2] = pack2_t<T>(a.z, b.z);
  out[3] = pack2_t<T>(a.w, b.w);
}

// x_pairs for the split precisions (gemm.h kBF16x2/x3, T = bf16): out[q] holds part q of
// each value (part 0 = bf16(v), part 1 = bf16(v - part 0), ...; exact differences), NP = 1
// is x_pairs itself.
template <class T, int NP>
FT_HD inline void x_pairs_split(const float* x, int xq, uint32_t (*out)[4]) {
  if constexpr (NP == 1) {
    x_pairs<T>(x, xq, out[0]);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "split parts are bf16");
    const int j = 16 * (xq >> 1) + 4 * (xq & 1);
#ifdef __CUDA_ARCH__
    const float4 a4 = *reinterpret_cast<const float4*>(x + j), b4 = *reinterpret_cast<const float4*>(x + j + 8);
#else
    float4 a4, b4;
    std::memcpy(&a4, x + j, 16);
    std::memcpy(&b4, x + j + 8, 16);
#endif
    float a[4] = {a4.x, a4.y, a4.z, a4.w}, b[4] = {b4.x, b4.y, b4.z, b4.w};
FT_UNROLL
    for (int q = 0; q < NP; ++q) {
FT_UNROLL
      for (int i = 0; i < 4; ++i) {
        out[q][i] = pack2_t<T>(a[i], b[i]);
        if (q + 1 < NP) {  // the residuals for the next part (exact in fp32)
          a[i] -= __bfloat162float(__float2bfloat16_rn(a[i]));
          b[i] -= __bfloat162float(__float2bfloat16_rn(b[i]));
        }
      }
    }
  }
}

}  // namespace ft::cuda::gemm_detail
