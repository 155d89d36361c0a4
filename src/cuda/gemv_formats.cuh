// Block formats of the decode GEMV (gemv.cu), host- and device-callable so that a CPU test
// can diff every decoder against quant::dequantize_row_ref without a GPU.
//
// A staged chunk holds 1024 consecutive elements of one row in the GGUF block layout; a
// "unit" is 32 consecutive elements of it (lane u of a warp decodes unit u) and a "piece" is
// 8 consecutive elements of a unit. piece(c, u, p, q, d, m) yields the raw values q[0..7] of
// elements 32u + 8p + i such that w = d*q - m (m only where kHasMin). kE2M1 formats return
// E2M1(code) * 2^-126 (see e2m1x4) and a half-scale d: the caller multiplies X by 2^64 and
// the partial sum by 2^63.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FT_HD __host__ __device__
#else
#define FT_HD
#endif
#if defined(__CUDA_ARCH__)  // device pass only: host compilers warn on unknown pragmas
#define FT_UNROLL _Pragma("unroll")
#else
#define FT_UNROLL
#endif

namespace ft::cuda::gemv_detail {

FT_HD inline float as_float(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

FT_HD inline float half_bits_to_float(unsigned short v) {
  __half_raw r;
  r.x = v;
  return __half2float(__half(r));
}

FT_HD inline float ld_f16(const uint8_t* p) { return half_bits_to_float(*reinterpret_cast<const unsigned short*>(p)); }

// ue4m3_half / e8m0_half of dequant.cpp, bit for bit.
FT_HD inline float ue4m3_half(uint32_t x) {
  // Branch-free (selects): with random or mixed scale bytes a branch diverges per lane.
  const uint32_t e = (x >> 3) & 0xF, m = x & 7;
  const float sub = static_cast<float>(m) * (1.0f / 1024.0f);
  const float normal = as_float(((e + 119) << 23) | (m << 20));  // exponent e - 8 + 127
  const float v = e == 0 ? sub : normal;
  return (x == 0 || x == 0x7F) ? 0.0f : v;
}
FT_HD inline float e8m0_half(uint32_t e) {
  if (e < 2) return as_float(0x00200000u << e);
  return as_float((e - 1) << 23);
}

// E2M1 nibble n -> E2M1(n) * 2^-126 (see the file comment).
FT_HD inline float e2m1_scaled(uint32_t n) {
  return as_float(((n & 7u) << 22) | ((n & 8u) << 28));
}
// Left shift by S, right shift for negative S.
template <int S>
FT_HD inline uint32_t shl(uint32_t x) {
  if constexpr (S >= 0) return x << S;
  else return x >> -S;
}

// The nibbles at bits SH..SH+3 of each byte of w (SH = 0: low nibbles, 4: high), as
// E2M1 * 2^-126. Nibbles 16 bits apart are first gathered into one word V with each 16-bit
// half holding [sign at bit 15, magnitude at bits 6-8]; then the low half's float is V << 16
// and the high half's V & 0xFFFF0000: 3 integer ops per element instead of 4-5.
template <int SH>
FT_HD inline void e2m1x4(uint32_t w, float* q) {
  const uint32_t v02 = (shl<6 - SH>(w) & 0x01C001C0u) | (shl<12 - SH>(w) & 0x80008000u);   // bytes 0, 2
  const uint32_t v13 = (shl<-2 - SH>(w) & 0x01C001C0u) | (shl<4 - SH>(w) & 0x80008000u);   // bytes 1, 3
  q[0] = as_float(v02 << 16);
  q[1] = as_float(v13 << 16);
  q[2] = as_float(v02 & 0xFFFF0000u);
  q[3] = as_float(v13 & 0xFFFF0000u);
}

// Each format: block geometry and piece(): the 8 raw values q of piece p (elements 8p..8p+7)
// of unit u in a staged chunk c, with w = d*q - m for every element of the piece.
struct FmtF32 {
  static constexpr int kBlockElems = 1, kBlockBytes = 4;
  static constexpr bool kE2M1 = false, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const float4* s = reinterpret_cast<const float4*>(c + 128 * u + 32 * p);
    const float4 a = s[0], b = s[1];
    q[0] = a.x, q[1] = a.y, q[2] = a.z, q[3] = a.w, q[4] = b.x, q[5] = b.y, q[6] = b.z, q[7] = b.w;
    d = 1.0f, m = 0.0f;
  }
};

struct FmtF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  static constexpr bool kE2M1 = false, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint4 v = *reinterpret_cast<const uint4*>(c + 64 * u + 16 * p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
FT_UNROLL
    for (int i = 0; i < 4; ++i) {
      q[2 * i] = half_bits_to_float(static_cast<unsigned short>(w[i] & 0xFFFF));
      q[2 * i + 1] = half_bits_to_float(static_cast<unsigned short>(w[i] >> 16));
    }
    d = 1.0f, m = 0.0f;
  }
};

struct FmtBF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  static constexpr bool kE2M1 = false, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint4 v = *reinterpret_cast<const uint4*>(c + 64 * u + 16 * p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
FT_UNROLL
    for (int i = 0; i < 4; ++i) {
      q[2 * i] = as_float(w[i] << 16);
      q[2 * i + 1] = as_float(w[i] & 0xFFFF0000u);
    }
    d = 1.0f, m = 0.0f;
  }
};

// Q8_0: d f16 | qs[32] int8; one block per unit.
struct FmtQ8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static constexpr bool kE2M1 = false, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 34 * u;
    const unsigned short* qs = reinterpret_cast<const unsigned short*>(b + 2 + 8 * p);  // 2-aligned
FT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const uint32_t v = qs[i];
      q[2 * i] = static_cast<float>(static_cast<int8_t>(v & 0xFF));
      q[2 * i + 1] = static_cast<float>(static_cast<int8_t>(v >> 8));
    }
    d = ld_f16(b), m = 0.0f;
  }
};

// MXFP4: e8m0 | qs[16]; low nibble of byte j -> element j, high -> j+16; one block per unit.
struct FmtMXFP4 {
  static constexpr int kBlockElems = 32, kBlockBytes = 17;
  static constexpr bool kE2M1 = true, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 17 * u;
    const uint8_t* qs = b + 1 + 8 * (p & 1);
    const int shift = 4 * (p >> 1);
FT_UNROLL
    for (int i = 0; i < 8; ++i) q[i] = e2m1_scaled(static_cast<uint32_t>(qs[i]) >> shift);
    d = e8m0_half(b[0]), m = 0.0f;
  }
};

// NVFP4: d[4] ue4m3 | qs[32]; sub-block s = qs[8s..8s+7], low nibble -> 16s+j, high -> 16s+8+j.
// A unit is half a block (sub-blocks 2h, 2h+1); pieces: s lo, s hi, s+1 lo, s+1 hi.
struct FmtNVFP4 {
  static constexpr int kBlockElems = 64, kBlockBytes = 36;
  static constexpr bool kE2M1 = true, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 36 * (u >> 1);
    const int s = 2 * (u & 1) + (p >> 1);
    const uint32_t* qw = reinterpret_cast<const uint32_t*>(b + 4 + 8 * s);  // 4-aligned
    const int shift = 4 * (p & 1);  // p varies across lanes: shift, don't branch
    e2m1x4<0>(qw[0] >> shift, q);
    e2m1x4<0>(qw[1] >> shift, q + 4);
    d = ue4m3_half(b[s]), m = 0.0f;
  }
};

// Q4_K: d f16 | dmin f16 | scales[12] | qs[128]; a unit is sub-block j = u % 8 of block u / 8:
// qs[32*(j/2) + l], low nibble for even j, high for odd; w = d*sc_j * q - dmin*m_j.
struct FmtQ4_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  static constexpr bool kE2M1 = false, kHasMin = true;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 144 * (u >> 3);
    const int j = u & 7;
    const uint8_t* sc = b + 4;
    int s, mn;
    if (j < 4) {
      s = sc[j] & 63, mn = sc[j + 4] & 63;
    } else {
      s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
    const uint2 v = *reinterpret_cast<const uint2*>(b + 16 + 32 * (j >> 1) + 8 * p);  // 8-aligned
    const int shift = 4 * (j & 1);
    const uint32_t w0 = v.x >> shift, w1 = v.y >> shift;
FT_UNROLL
    for (int i = 0; i < 4; ++i) {
      q[i] = static_cast<float>((w0 >> (8 * i)) & 0xF);
      q[4 + i] = static_cast<float>((w1 >> (8 * i)) & 0xF);
    }
    d = ld_f16(b) * static_cast<float>(s);
    m = ld_f16(b + 2) * static_cast<float>(mn);
  }
};

// Q6_K: ql[128] | qh[64] | scales[16] int8 | d f16; a unit is 32 elements 128h + 32qq + l of
// block u / 8 (h = j/4, qq = j%4), l = 8p + i; scale sc[8h + l/16 + 2qq]; w = d*sc * (q - 32).
struct FmtQ6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static constexpr bool kE2M1 = false, kHasMin = false;
  FT_HD static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 210 * (u >> 3);
    const int j = u & 7, h = j >> 2, qq = j & 3;
    const uint8_t* ql = b + 64 * h + 32 * (qq & 1) + 8 * p;
    const uint8_t* qh = b + 128 + 32 * h + 8 * p;
    const int lshift = 4 * (qq >> 1), hshift = 2 * qq;
FT_UNROLL
    for (int i = 0; i < 8; ++i) {
      const int v = ((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4);
      q[i] = static_cast<float>(v - 32);
    }
    d = ld_f16(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + 8 * h + (p >> 1) + 2 * qq]));
    m = 0.0f;
  }
};

}  // namespace ft::cuda::gemv_detail
