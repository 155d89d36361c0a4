// Element decoders of the embedding lookup (embed.cu), host- and device-callable so that
// tests/cuda/ops_embed_decode_test.cpp diffs them against quant::dequantize_row_ref without
// a GPU. decode8(row, e, y) writes elements e..e+7 (e a multiple of 8) of a row in its GGUF
// block layout, bit-exact with dequantize_row_ref: same float operations in the same order
// (d*sc first, then d1*q - m1, ...), none of them contracted into an FMA (ops_math.cuh).
//
// Alignment: F32 reads floats, the fp16 fields (F16, Q8_0, Q4_K, Q6_K) are read as 2-byte
// words; embed() checks that the table and the row stride allow it.
#pragma once

#include <cstdint>

#include "cuda/gemv_formats.cuh"
#include "cuda/ops_math.cuh"
#include "format/ggml_type.h"

namespace ft::cuda::embed_detail {

using gemv_detail::e8m0_half;
using gemv_detail::half_bits_to_float;
using gemv_detail::ue4m3_half;

FT_OPS_HD inline float ld_f16(const uint8_t* p) {
  return half_bits_to_float(*reinterpret_cast<const unsigned short*>(p));
}

// kE2M1Doubled[n] = {0,1,2,3,4,6,8,12, 0,-1,-2,-3,-4,-6,-8,-12}[n] without a table (device
// code has no access to the host array).
FT_OPS_HD inline int e2m1_doubled(uint32_t n) {
  const int mag = static_cast<int>(n & 7);
  const int v = mag < 4 ? mag : (2 + (mag & 1)) << ((mag >> 1) - 1);
  return (n & 8) ? -v : v;
}

template <GgmlType T>
struct Decode;

template <>
struct Decode<GgmlType::F32> {
  static constexpr int kBlock = 1, kAlign = 4;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const float* p = reinterpret_cast<const float*>(row) + e;
    for (int i = 0; i < 8; ++i) y[i] = p[i];
  }
};

template <>
struct Decode<GgmlType::F16> {
  static constexpr int kBlock = 1, kAlign = 2;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    for (int i = 0; i < 8; ++i) y[i] = ld_f16(row + 2 * (e + i));
  }
};

template <>
struct Decode<GgmlType::BF16> {
  static constexpr int kBlock = 1, kAlign = 1;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* p = row + 2 * e;
    for (int i = 0; i < 8; ++i)
      y[i] = ops::bits_float((static_cast<uint32_t>(p[2 * i]) | (static_cast<uint32_t>(p[2 * i + 1]) << 8)) << 16);
  }
};

// Q8_0: d f16 | qs[32] int8; y = q * d.
template <>
struct Decode<GgmlType::Q8_0> {
  static constexpr int kBlock = 32, kAlign = 2;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* b = row + 34 * (e / 32);
    const float d = ld_f16(b);
    const uint8_t* qs = b + 2 + e % 32;
    for (int i = 0; i < 8; ++i) y[i] = ops::mul_rn(static_cast<float>(static_cast<int8_t>(qs[i])), d);
  }
};

// Q4_K: d f16 | dmin f16 | scales[12] | qs[128]; element 64c + 32h + l is nibble h of
// qs[32c + l], sub-block j = 2c + h; y = (d*sc_j) * q - dmin*m_j.
template <>
struct Decode<GgmlType::Q4_K> {
  static constexpr int kBlock = 256, kAlign = 2;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* b = row + 144 * (e / 256);
    const int idx = static_cast<int>(e % 256);
    const int c = idx / 64, h = (idx % 64) / 32, l0 = idx % 32, j = 2 * c + h;
    const uint8_t* sc = b + 4;
    int s, mn;
    if (j < 4) {
      s = sc[j] & 63, mn = sc[j + 4] & 63;
    } else {
      s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
    const float d1 = ops::mul_rn(ld_f16(b), static_cast<float>(s));
    const float m1 = ops::mul_rn(ld_f16(b + 2), static_cast<float>(mn));
    const uint8_t* q = b + 16 + 32 * c + l0;
    for (int i = 0; i < 8; ++i) {
      const int v = h ? (q[i] >> 4) : (q[i] & 0xF);
      y[i] = ops::sub_rn(ops::mul_rn(d1, static_cast<float>(v)), m1);
    }
  }
};

// Q6_K: ql[128] | qh[64] | scales[16] int8 | d f16. Element 128h + 32qq + l: low bits from
// ql[64h + l + 32(qq&1)] (nibble qq>>1), high bits (qh[32h + l] >> 2qq) & 3, scale
// sc[8h + l/16 + 2qq]; y = (d*sc) * (q - 32).
template <>
struct Decode<GgmlType::Q6_K> {
  static constexpr int kBlock = 256, kAlign = 2;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* b = row + 210 * (e / 256);
    const int idx = static_cast<int>(e % 256);
    const int h = idx / 128, qq = (idx % 128) / 32, l0 = idx % 32;
    const uint8_t* ql = b + 64 * h + 32 * (qq & 1) + l0;
    const uint8_t* qh = b + 128 + 32 * h + l0;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l0 / 16 + 2 * qq]);
    const float ds = ops::mul_rn(ld_f16(b + 208), static_cast<float>(sc));
    const int lshift = 4 * (qq >> 1), hshift = 2 * qq;
    for (int i = 0; i < 8; ++i) {
      const int v = (((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4)) - 32;
      y[i] = ops::mul_rn(ds, static_cast<float>(v));
    }
  }
};

// MXFP4: e8m0 | qs[16]; low nibble of qs[j] -> element j, high -> j + 16.
template <>
struct Decode<GgmlType::MXFP4> {
  static constexpr int kBlock = 32, kAlign = 1;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* b = row + 17 * (e / 32);
    const int idx = static_cast<int>(e % 32);
    const float d = e8m0_half(b[0]);
    const uint8_t* qs = b + 1 + idx % 16;
    const int shift = 4 * (idx / 16);
    for (int i = 0; i < 8; ++i)
      y[i] = ops::mul_rn(static_cast<float>(e2m1_doubled((qs[i] >> shift) & 0xF)), d);
  }
};

// NVFP4: d[4] ue4m3 | qs[32]; sub-block s: low nibble of qs[8s + j] -> 16s + j, high -> 16s+8+j.
template <>
struct Decode<GgmlType::NVFP4> {
  static constexpr int kBlock = 64, kAlign = 1;
  FT_OPS_HD static void run(const uint8_t* row, int64_t e, float* y) {
    const uint8_t* b = row + 36 * (e / 64);
    const int idx = static_cast<int>(e % 64);
    const int s = idx / 16, shift = 4 * ((idx % 16) / 8);
    const float d = ue4m3_half(b[s]);
    const uint8_t* qs = b + 4 + 8 * s;
    for (int i = 0; i < 8; ++i)
      y[i] = ops::mul_rn(static_cast<float>(e2m1_doubled((qs[i] >> shift) & 0xF)), d);
  }
};

}  // namespace ft::cuda::embed_detail
