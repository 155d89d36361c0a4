// AVX2 exact-mode rows (gpu_dot.h): the same integer sums and the same fp32 operations in
// the same order as the scalar mirror, 8 rows at a time.
//
// Per row the GPU's sum is a sequence of terms (is_i, sc_i) -- an exact integer sum over a
// 16- (NVFP4) or 32-element (Q8_0, MXFP4) block of codes times int8 activations, and the
// fp32 product of the weight and activation block scales -- folded by fmas into lane
// accumulators (lane of term i = (i / terms per unit) mod lanes, in term order) and then the
// lane tree; or (NVFP4 packed) each block's 4 terms from 0, the blocks summed in order.
// The integer sums are exact in any order, so they are taken with maddubs/madd; the fp32
// fold runs with rows in the 8 lanes of a ymm (term-major buffers), the same fma per row.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "moe_cpu/gpu_dot.h"

namespace ft::moe_cpu::detail {
namespace {

constexpr int kG = 8;  // rows per group (ymm lanes)

float as_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
float ue4m3_half(uint32_t x) {
  const uint32_t e = (x >> 3) & 0xF, m = x & 7;
  const float sub = static_cast<float>(m) * (1.0f / 1024.0f);
  const float normal = as_float(((e + 119) << 23) | (m << 20));
  const float v = e == 0 ? sub : normal;
  return (x == 0 || x == 0x7F) ? 0.0f : v;
}
float e8m0_half(uint32_t e) {
  if (e < 2) return as_float(0x00200000u << e);
  return as_float((e - 1) << 23);
}

struct Tables {
  float ue4m3_full[256];  // nvfp4_scales: 2 * ue4m3_half
  float e8m0[256];
  Tables() {
    for (int i = 0; i < 256; ++i) {
      ue4m3_full[i] = 2.0f * ue4m3_half(static_cast<uint32_t>(i));
      e8m0[i] = e8m0_half(static_cast<uint32_t>(i));
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

// 2 * E2M1 as int8 per code (e2m1x8_i8).
inline __m256i e2m1_lut() {
  return _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2,
                          -3, -4, -6, -8, -12);
}
// Signed w times signed x, pairs summed to int16 (|w| <= 128, |x| <= 127: no saturation).
inline __m256i mul_pairs(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Terms of one row into is[i * kG + r], sc[i * kG + r].
void terms_nvfp4(const uint8_t* row, const GpuActQ8& x, const float* dxh, int64_t nb, float* is, float* sc, int r) {
  const __m256i lut = e2m1_lut(), m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const float* tab = tables().ue4m3_full;
  for (int64_t c = 0; c < nb; ++c) {
    const uint8_t* b = row + 36 * c;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4));
    const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    // Per 128-bit lane: unpacklo = [sub-block 0 | 2] in element order, unpackhi = [1 | 3].
    const __m256i wa = _mm256_shuffle_epi8(lut, _mm256_unpacklo_epi64(lo, hi));
    const __m256i wb = _mm256_shuffle_epi8(lut, _mm256_unpackhi_epi64(lo, hi));
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * c));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 64 * c + 32));
    const __m256i xa = _mm256_permute2x128_si256(x0, x1, 0x20), xb = _mm256_permute2x128_si256(x0, x1, 0x31);
    const __m256i pa = _mm256_madd_epi16(mul_pairs(wa, xa), ones), pb = _mm256_madd_epi16(mul_pairs(wb, xb), ones);
    __m256i h = _mm256_hadd_epi32(pa, pb);  // lane: [s0 s0 s1 s1] | [s2 s2 s3 s3]
    h = _mm256_hadd_epi32(h, h);            // lane: [s0 s1 ..] | [s2 s3 ..]
    const __m128i s4 = _mm_unpacklo_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    alignas(16) int32_t si[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(si), s4);
    for (int s = 0; s < 4; ++s) {
      is[(4 * c + s) * kG + r] = static_cast<float>(si[s]);
      sc[(4 * c + s) * kG + r] = tab[b[s]] * dxh[2 * c + (s >> 1)];
    }
  }
}

void terms_q8_0(const uint8_t* row, const GpuActQ8& x, int64_t n32, float* is, float* sc, int r) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t j = 0; j < n32; ++j) {
    const uint8_t* b = row + 34 * j;
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * j));
    is[j * kG + r] = static_cast<float>(hsum_i32(_mm256_madd_epi16(mul_pairs(w, xv), ones)));
    uint16_t d;
    std::memcpy(&d, b, 2);
    sc[j * kG + r] = f16_to_f32(d) * x.d[j];
  }
}

void terms_mxfp4(const uint8_t* row, const GpuActQ8& x, int64_t n32, float* is, float* sc, int r) {
  const __m256i lut = e2m1_lut(), m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const float* tab = tables().e8m0;
  for (int64_t j = 0; j < n32; ++j) {
    const uint8_t* b = row + 17 * j;
    __m128i q;
    std::memcpy(&q, b + 1, 16);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);  // [low nibbles | high nibbles]
    const __m256i w = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * j));
    is[j * kG + r] = static_cast<float>(hsum_i32(_mm256_madd_epi16(mul_pairs(w, xv), ones)));
    sc[j * kG + r] = tab[b[0]] * x.d[j];
  }
}

// Folds n_t terms per row for kG rows: lane of term i = (i / per_unit) % lanes, then the
// lane tree; out[r] = lane 0.
void fold_lanes(const float* is, const float* sc, int64_t n_t, int per_unit, int lanes, float* out) {
  __m256 acc[32];
  for (int l = 0; l < lanes; ++l) acc[l] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_t; ++i) {
    const int l = static_cast<int>((i / per_unit) % lanes);
    acc[l] = _mm256_fmadd_ps(_mm256_load_ps(is + i * kG), _mm256_load_ps(sc + i * kG), acc[l]);
  }
  for (int o = lanes / 2; o > 0; o /= 2)
    for (int l = 0; l < o; ++l) acc[l] = _mm256_add_ps(acc[l], acc[l + o]);
  _mm256_storeu_ps(out, acc[0]);
}

// NVFP4 packed: each block's 4 terms from 0, the blocks summed in order from 0.
void fold_packed(const float* is, const float* sc, int64_t nb, float* out) {
  __m256 dot = _mm256_setzero_ps();
  for (int64_t c = 0; c < nb; ++c) {
    __m256 a = _mm256_setzero_ps();
    for (int s = 0; s < 4; ++s)
      a = _mm256_fmadd_ps(_mm256_load_ps(is + (4 * c + s) * kG), _mm256_load_ps(sc + (4 * c + s) * kG), a);
    dot = _mm256_add_ps(dot, a);
  }
  _mm256_storeu_ps(out, dot);
}

}  // namespace

bool gpu_dot_q8_rows_avx2(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows,
                          const GpuActQ8& x, int64_t k, float* out) {
  const bool nv = type == GgmlType::NVFP4;
  if (!nv && type != GgmlType::Q8_0 && type != GgmlType::MXFP4) return false;
  const int64_t n_t = nv ? k / 16 : k / 32;
  thread_local std::vector<float> is, sc, dxh;
  is.resize(static_cast<size_t>(n_t * kG) + 8);
  sc.resize(is.size());
  float* pis = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(is.data()) + 31) & ~uintptr_t{31});
  float* psc = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(sc.data()) + 31) & ~uintptr_t{31});
  if (nv) {
    dxh.resize(static_cast<size_t>(k / 32));
    for (int64_t j = 0; j < k / 32; ++j) dxh[j] = x.d[j] * 0.5f;
  }
  for (int64_t g0 = 0; g0 < n_rows; g0 += kG) {
    for (int r = 0; r < kG; ++r) {
      const uint8_t* row = w + std::min<int64_t>(g0 + r, n_rows - 1) * row_bytes;  // pad with the last row
      if (nv)
        terms_nvfp4(row, x, dxh.data(), k / 64, pis, psc, r);
      else if (type == GgmlType::Q8_0)
        terms_q8_0(row, x, k / 32, pis, psc, r);
      else
        terms_mxfp4(row, x, k / 32, pis, psc, r);
    }
    float o[kG];
    if (nv && plan.kind == GpuDot::kNvfp4Packed)
      fold_packed(pis, psc, k / 64, o);
    else if (nv)
      fold_lanes(pis, psc, n_t, 4, plan.kind == GpuDot::kNvfp4Slab ? 32 : plan.lanes, o);
    else
      fold_lanes(pis, psc, n_t, 2, plan.lanes, o);
    for (int r = 0; r < kG && g0 + r < n_rows; ++r) out[g0 + r] = o[r];
  }
  return true;
}

}  // namespace ft::moe_cpu::detail
