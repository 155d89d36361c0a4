// AVX2 + FMA + F16C matmul kernels: fp32 activations, fp32 accumulation. Each decoder
// turns one block of weights into 8-wide fp32 vectors in registers; the tile kernel
// reuses each decoded vector across T tokens (matmul_driver.h has the loop nest).
#include <immintrin.h>

#include <cstring>

#include "quant/dequant.h"
#include "quant/matmul_driver.h"

namespace ft::quant::detail {
namespace {

// F16C's conversion equals ft::f16_to_f32 for every input (tests/quant/fp16_test.cpp)
// and is one instruction instead of a dozen on the per-block scale path.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Looked up once at start-up: calling ue4m3_half_table() per sub-block cost a call and a
// guard check per 16 weights.
const float* const kUe4m3Half = ue4m3_half_table();

inline __m128i load8(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm_cvtsi64_si128(v);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- decoders: St load(block), __m256 chunk(st, c) for c < kChunks -------------------

struct F32Vec {  // one vector per block, for rows already in fp32
  static constexpr int kBlock = 8, kBytes = 32, kChunks = 1;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m256 chunk(St s, int) { return _mm256_loadu_ps(reinterpret_cast<const float*>(s)); }
};

struct DecF32 {
  static constexpr int kBlock = 32, kBytes = 128, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m256 chunk(St s, int c) { return _mm256_loadu_ps(reinterpret_cast<const float*>(s) + 8 * c); }
};

struct DecF16 {
  static constexpr int kBlock = 32, kBytes = 64, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m256 chunk(St s, int c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * c)));
  }
};

struct DecBF16 {
  static constexpr int kBlock = 32, kBytes = 64, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m256 chunk(St s, int c) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
};

struct DecQ8_0 {
  static constexpr int kBlock = 32, kBytes = 34, kChunks = 4;
  struct St {
    const uint8_t* q;
    float d;
  };
  static St load(const uint8_t* b) { return {b + 2, load_f16(b)}; }
  static __m256 chunk(const St& s, int c) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load8(s.q + 8 * c)));
    return _mm256_mul_ps(q, _mm256_set1_ps(s.d));
  }
};

// Q4_K: w = (d*sc) * q - (dmin*m) per 32-element sub-block, as one FMA per vector.
struct DecQ4_K {
  static constexpr int kBlock = 256, kBytes = 144, kChunks = 32;
  struct St {
    const uint8_t* qs;
    float d[8], m[8];
  };
  static St load(const uint8_t* b) {
    St s;
    s.qs = b + 16;
    // 8 scales and 8 mins in one vector pass; the scalar loop was ~100 instructions per
    // block, as many as the 256 weights' own decode.
    alignas(16) uint8_t sm[16];
    k4_unpack_scales(b + 4, sm);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm));
    const __m256 dd = _mm256_set1_ps(load_f16(b)), dm = _mm256_set1_ps(load_f16(b + 2));
    _mm256_storeu_ps(s.d, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))));
    _mm256_storeu_ps(s.m, _mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)))));
    return s;
  }
  static __m256 chunk(const St& s, int c) {
    // Elements 8c..8c+7: 64-chunk c/8; its first 32 are low nibbles, the next 32 high.
    const int part = c % 8;
    const int sb = 2 * (c / 8) + (part >= 4);
    __m256i q = _mm256_cvtepu8_epi32(load8(s.qs + 32 * (c / 8) + 8 * (part % 4)));
    q = part >= 4 ? _mm256_srli_epi32(q, 4) : _mm256_and_si256(q, _mm256_set1_epi32(0xF));
    return _mm256_fmsub_ps(_mm256_set1_ps(s.d[sb]), _mm256_cvtepi32_ps(q), _mm256_set1_ps(s.m[sb]));
  }
};

// Q6_K: element 128h + 32g + l has low bits from ql[64h + 32(g&1) + l] (nibble g>>1),
// high bits (qh[32h + l] >> 2g) & 3 and scale scales[8h + l/16 + 2g].
struct DecQ6_K {
  static constexpr int kBlock = 256, kBytes = 210, kChunks = 32;
  struct St {
    const uint8_t* b;
    float ds[16];
  };
  static St load(const uint8_t* b) {
    St s;
    s.b = b;
    const float d = load_f16(b + 208);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    _mm256_storeu_ps(s.ds, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_storeu_ps(s.ds + 8,
                     _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
    return s;
  }
  static __m256 chunk(const St& s, int c) {
    const int h = c / 16, g = (c % 16) / 4, l0 = 8 * (c % 4);
    __m256i lo = _mm256_cvtepu8_epi32(load8(s.b + 64 * h + 32 * (g & 1) + l0));
    lo = (g >> 1) ? _mm256_srli_epi32(lo, 4) : _mm256_and_si256(lo, _mm256_set1_epi32(0xF));
    __m256i hi = _mm256_cvtepu8_epi32(load8(s.b + 128 + 32 * h + l0));
    hi = _mm256_and_si256(_mm256_srli_epi32(hi, 2 * g), _mm256_set1_epi32(3));
    const __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(s.ds[8 * h + l0 / 16 + 2 * g]));
  }
};

// E2M1 codes -> doubled values as int8, through one pshufb.
inline __m128i e2m1_lut() { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kE2M1Doubled)); }

struct DecMXFP4 {
  static constexpr int kBlock = 32, kBytes = 17, kChunks = 4;
  struct St {
    const uint8_t* qs;
    float d;
  };
  static St load(const uint8_t* b) { return {b + 1, e8m0_half(b[0])}; }
  static __m256 chunk(const St& s, int c) {
    // Elements 8c..8c+7: bytes 8(c%2).. of qs, low nibbles for c < 2, high for c >= 2.
    __m128i v = load8(s.qs + 8 * (c % 2));
    if (c >= 2) v = _mm_srli_epi16(v, 4);
    v = _mm_shuffle_epi8(e2m1_lut(), _mm_and_si128(v, _mm_set1_epi8(0xF)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_set1_ps(s.d));
  }
};

struct DecNVFP4 {
  static constexpr int kBlock = 64, kBytes = 36, kChunks = 8;
  struct St {
    const uint8_t* b;
  };
  static St load(const uint8_t* b) { return {b}; }
  static __m256 chunk(const St& s, int c) {
    // Sub-block c/2: low nibbles of its 8 bytes are its first 8 elements, high the rest.
    __m128i v = load8(s.b + 4 + 8 * (c / 2));
    if (c % 2) v = _mm_srli_epi16(v, 4);
    v = _mm_shuffle_epi8(e2m1_lut(), _mm_and_si128(v, _mm_set1_epi8(0xF)));
    const float d = kUe4m3Half[s.b[c / 2]];
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), _mm256_set1_ps(d));
  }
};

// ---- the tile kernel ---------------------------------------------------------------

struct Avx2 {
  static constexpr int kMaxT = 4;
  using F32Vec = ::ft::quant::detail::F32Vec;

  template <class D, int R, int T>
  __attribute__((noinline)) static void tile(const uint8_t* w, int64_t row_bytes, const float* x, int64_t ldx, int64_t n_blocks, float* acc,
                   int64_t ld_acc) {
    __m256 s[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      prefetch_next_rows<R, D::kBytes>(w, row_bytes, b);
      typename D::St st[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) st[r] = D::load(w + r * row_bytes + b * D::kBytes);
      const float* xb = x + b * D::kBlock;
#pragma GCC unroll 32
      for (int c = 0; c < D::kChunks; ++c) {
        __m256 wv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) wv[r] = D::chunk(st[r], c);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256 xv = _mm256_loadu_ps(xb + t * ldx + 8 * c);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) s[r][t] = _mm256_fmadd_ps(wv[r], xv, s[r][t]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[t * ld_acc + r] += hsum(s[r][t]);
  }
};

}  // namespace

void matmul_avx2(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case GgmlType::F32: return run_direct<Avx2, DecF32>(a, r0, r1);
    case GgmlType::F16: return run_direct<Avx2, DecF16>(a, r0, r1);
    case GgmlType::BF16: return run_direct<Avx2, DecBF16>(a, r0, r1);
    case GgmlType::Q8_0: return run_direct<Avx2, DecQ8_0>(a, r0, r1);
    case GgmlType::Q4_K: return run_direct<Avx2, DecQ4_K>(a, r0, r1);
    case GgmlType::Q6_K: return run_direct<Avx2, DecQ6_K>(a, r0, r1);
    case GgmlType::MXFP4: return run_direct<Avx2, DecMXFP4>(a, r0, r1);
    case GgmlType::NVFP4: return run_direct<Avx2, DecNVFP4>(a, r0, r1);
    default: return run_via_ref<Avx2>(a, r0, r1);
  }
}

}  // namespace ft::quant::detail
