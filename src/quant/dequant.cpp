// Scalar reference decoders, one per type, written from shared/spec/gguf-format.md §3-4.
// Bit-exactness with ggml depends on doing the same float operations in the same order
// (e.g. Q4_K computes d*sc and dmin*m first, then d1*q - m1), so each formula below
// keeps ggml's association; tests/oracle/quant_oracle_test.cpp checks them against
// ggml's own to_float on random blocks.
#include "quant/dequant.h"

#include <array>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/iq_tables.h"

namespace ft::quant {

const int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float ue4m3_half(uint8_t x) {
  // 0x7F is E4M3's NaN, which ggml decodes as 0; bit 7 is ignored (0xFF decodes as 240).
  if (x == 0x00 || x == 0x7F) return 0.0f;
  const uint32_t e = (x >> 3) & 0xF;
  const uint32_t m = x & 7;
  if (e == 0) return static_cast<float>(m) * (1.0f / 1024.0f);  // m * 2^-9 * 0.5, exact
  // (1 + m/8) * 2^(e-7) * 0.5 = float with exponent e-8 and mantissa m<<20 (exact).
  return bits_to_f32(((e - 8 + 127) << 23) | (m << 20));
}

float e8m0_half(uint8_t e) {
  // 2^(e-128): e >= 2 is a normal float with exponent field e-1; e = 0, 1 are subnormals.
  if (e < 2) return bits_to_f32(0x00200000u << e);
  return bits_to_f32(static_cast<uint32_t>(e - 1) << 23);
}

const float* ue4m3_half_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int i = 0; i < 256; ++i) a[static_cast<size_t>(i)] = ue4m3_half(static_cast<uint8_t>(i));
    return a;
  }();
  return t.data();
}

namespace {

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void deq_f32(const uint8_t* s, float* y, int64_t n) { std::memcpy(y, s, static_cast<size_t>(n) * 4); }

void deq_f16(const uint8_t* s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = load_f16(s + 2 * i);
}

void deq_bf16(const uint8_t* s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    y[i] = bf16_to_f32(h);
  }
}

// Q8_0: d f16 | qs[32] int8.
void deq_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Q4_0: d f16 | qs[16]; low nibble -> element j, high nibble -> j+16; value (q-8)*d.
void deq_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: d f16 | m f16 | qs[16]; value q*d + m.
void deq_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0: d f16 | qh u32 | qs[16]; 5th bit of element j is bit j of qh; value (q-16)*d.
void deq_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int q0 = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int q1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(q0 - 16) * d;
    y[j + 16] = static_cast<float>(q1 - 16) * d;
  }
}

// Q5_1: d f16 | m f16 | qh u32 | qs[16]; value q*d + m.
void deq_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int q0 = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int q1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(q0) * d + m;
    y[j + 16] = static_cast<float>(q1) * d + m;
  }
}

// 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K from the packed scales[12].
inline void k4_scale_min(int j, const uint8_t* sc, int& scale, int& min) {
  if (j < 4) {
    scale = sc[j] & 63;
    min = sc[j + 4] & 63;
  } else {
    scale = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
    min = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

// Q4_K: d f16 | dmin f16 | scales[12] | qs[128]; 4 chunks of 64 = two sub-blocks of 32
// sharing qs[32c..32c+31] (low nibbles, then high nibbles).
void deq_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    k4_scale_min(2 * c, scales, sc0, m0);
    k4_scale_min(2 * c + 1, scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      y[64 * c + l] = d0 * static_cast<float>(q[l] & 0xF) - mm0;
      y[64 * c + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - mm1;
    }
  }
}

// Q5_K: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]; bit 2c / 2c+1 of qh[l] is the
// 5th bit of element 64c+l / 64c+32+l.
void deq_q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c) {
    int sc0, m0, sc1, m1;
    k4_scale_min(2 * c, scales, sc0, m0);
    k4_scale_min(2 * c + 1, scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const int lo = (q[l] & 0xF) + (((qh[l] >> (2 * c)) & 1) << 4);
      const int hi = (q[l] >> 4) + (((qh[l] >> (2 * c + 1)) & 1) << 4);
      y[64 * c + l] = d0 * static_cast<float>(lo) - mm0;
      y[64 * c + 32 + l] = d1 * static_cast<float>(hi) - mm1;
    }
  }
}

// Q6_K: ql[128] | qh[64] | scales[16] int8 | d f16 (last). Two halves of 128.
void deq_q6_k(const uint8_t* b, float* y) {
  const float d = load_f16(b + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * h);
    float* o = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      // (d * scale) * q, as ggml associates it.
      o[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      o[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      o[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      o[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// IQ3_XXS: d f16 | grid indices[64] | 8 x u32 (7-bit sign index x4, 4-bit scale on top).
void deq_iq3_xxs(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* idx = b + 2;
  const uint8_t* ss = b + 2 + 64;
  const uint32_t* grid = iq3xxs_grid();
  const uint8_t* ksigns = iq_ksigns();
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, ss + 4 * ib, 4);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = ksigns[(aux >> (7 * l)) & 127];
      const uint32_t g1 = grid[idx[8 * ib + 2 * l]];
      const uint32_t g2 = grid[idx[8 * ib + 2 * l + 1]];
      float* o = y + 32 * ib + 8 * l;
      for (int j = 0; j < 4; ++j) {
        const float m1 = static_cast<float>((g1 >> (8 * j)) & 0xFF);
        const float m2 = static_cast<float>((g2 >> (8 * j)) & 0xFF);
        o[j] = db * m1 * ((signs >> j) & 1 ? -1.0f : 1.0f);
        o[j + 4] = db * m2 * ((signs >> (j + 4)) & 1 ? -1.0f : 1.0f);
      }
    }
  }
}

// MXFP4: e (E8M0) | qs[16]; low nibble -> element j, high -> j+16.
void deq_mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_half(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kE2M1Doubled[qs[j] & 0xF]) * d;
    y[j + 16] = static_cast<float>(kE2M1Doubled[qs[j] >> 4]) * d;
  }
}

// NVFP4: d[4] (UE4M3 per 16) | qs[32]; sub-block s uses qs[8s..8s+7], low nibble ->
// element 16s+j, high -> 16s+j+8.
void deq_nvfp4(const uint8_t* b, float* y) {
  const uint8_t* qs = b + 4;
  for (int s = 0; s < 4; ++s) {
    const float d = ue4m3_half(b[s]);
    for (int j = 0; j < 8; ++j) {
      const uint8_t q = qs[8 * s + j];
      y[16 * s + j] = static_cast<float>(kE2M1Doubled[q & 0xF]) * d;
      y[16 * s + j + 8] = static_cast<float>(kE2M1Doubled[q >> 4]) * d;
    }
  }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder block_decoder(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return deq_q8_0;
    case GgmlType::Q4_0: return deq_q4_0;
    case GgmlType::Q4_1: return deq_q4_1;
    case GgmlType::Q5_0: return deq_q5_0;
    case GgmlType::Q5_1: return deq_q5_1;
    case GgmlType::Q4_K: return deq_q4_k;
    case GgmlType::Q5_K: return deq_q5_k;
    case GgmlType::Q6_K: return deq_q6_k;
    case GgmlType::IQ3_XXS: return deq_iq3_xxs;
    case GgmlType::MXFP4: return deq_mxfp4;
    case GgmlType::NVFP4: return deq_nvfp4;
    default: return nullptr;
  }
}

}  // namespace

bool has_ref_dequant(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || block_decoder(t) != nullptr;
}

void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case GgmlType::F32: return deq_f32(s, dst, n);
    case GgmlType::F16: return deq_f16(s, dst, n);
    case GgmlType::BF16: return deq_bf16(s, dst, n);
    default: break;
  }
  const BlockDecoder dec = block_decoder(t);
  if (dec == nullptr) fail("dequantize_row_ref: no decoder for tensor type {}", type_name(t));
  const auto& tr = traits(t);
  if (n % tr.block_size != 0) {
    fail("dequantize_row_ref: {} elements is not a multiple of the {} block size {}", n, type_name(t), tr.block_size);
  }
  for (int64_t i = 0; i < n / tr.block_size; ++i) dec(s + i * tr.type_size, dst + i * tr.block_size);
}

}  // namespace ft::quant
