// AVX-512 (F/BW/VL/DQ) matmul kernels: fp32 activations, fp32 accumulation, 16 lanes.
// Same structure as matmul_avx2.cpp; the FP4 types look their E2M1 values up with
// vpermps over a 16-entry fp32 table (one instruction per 16 weights) instead of
// pshufb + sign extension + convert.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*()
// placeholders (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

struct F32Vec {
  static constexpr int kBlock = 16, kBytes = 64, kChunks = 1;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m512 chunk(St s, int) { return _mm512_loadu_ps(reinterpret_cast<const float*>(s)); }
};

struct DecF32 {
  static constexpr int kBlock = 64, kBytes = 256, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m512 chunk(St s, int c) { return _mm512_loadu_ps(reinterpret_cast<const float*>(s) + 16 * c); }
};

struct DecF16 {
  static constexpr int kBlock = 64, kBytes = 128, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m512 chunk(St s, int c) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32 * c)));
  }
};

struct DecBF16 {
  static constexpr int kBlock = 64, kBytes = 128, kChunks = 4;
  using St = const uint8_t*;
  static St load(const uint8_t* b) { return b; }
  static __m512 chunk(St s, int c) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32 * c)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
};

struct DecQ8_0 {
  static constexpr int kBlock = 32, kBytes = 34, kChunks = 2;
  struct St {
    const uint8_t* q;
    float d;
  };
  static St load(const uint8_t* b) { return {b + 2, load_f16(b)}; }
  static __m512 chunk(const St& s, int c) {
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load16(s.q + 16 * c)));
    return _mm512_mul_ps(q, _mm512_set1_ps(s.d));
  }
};

struct DecQ4_K {
  static constexpr int kBlock = 256, kBytes = 144, kChunks = 16;
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
  static __m512 chunk(const St& s, int c) {
    // Elements 16c..16c+15: 64-chunk c/4; parts 0,1 are low nibbles, 2,3 high.
    const int part = c % 4;
    const int sb = 2 * (c / 4) + (part >= 2);
    __m512i q = _mm512_cvtepu8_epi32(load16(s.qs + 32 * (c / 4) + 16 * (part % 2)));
    q = part >= 2 ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, _mm512_set1_epi32(0xF));
    return _mm512_fmsub_ps(_mm512_set1_ps(s.d[sb]), _mm512_cvtepi32_ps(q), _mm512_set1_ps(s.m[sb]));
  }
};

struct DecQ6_K {
  static constexpr int kBlock = 256, kBytes = 210, kChunks = 16;
  struct St {
    const uint8_t* b;
    float ds[16];
  };
  static St load(const uint8_t* b) {
    St s;
    s.b = b;
    const float d = load_f16(b + 208);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    _mm512_storeu_ps(s.ds, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc))));
    return s;
  }
  static __m512 chunk(const St& s, int c) {
    // Elements 128h + 32g + l0 .. +15 (see matmul_avx2.cpp DecQ6_K).
    const int h = c / 8, g = (c % 8) / 2, l0 = 16 * (c % 2);
    __m512i lo = _mm512_cvtepu8_epi32(load16(s.b + 64 * h + 32 * (g & 1) + l0));
    lo = (g >> 1) ? _mm512_srli_epi32(lo, 4) : _mm512_and_si512(lo, _mm512_set1_epi32(0xF));
    __m512i hi = _mm512_cvtepu8_epi32(load16(s.b + 128 + 32 * h + l0));
    hi = _mm512_and_si512(_mm512_srli_epi32(hi, 2 * g), _mm512_set1_epi32(3));
    const __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(s.ds[8 * h + l0 / 16 + 2 * g]));
  }
};

// The doubled E2M1 values as fp32; vpermps uses only the low 4 bits of each index lane,
// so zero-extended code bytes need no masking.
inline __m512 e2m1_table() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

struct DecMXFP4 {
  static constexpr int kBlock = 32, kBytes = 17, kChunks = 2;
  struct St {
    __m512i codes;  // the 16 code bytes, one per lane
    __m512 tbl;     // e2m1_table() * block scale
  };
  static St load(const uint8_t* b) {
    return {_mm512_cvtepu8_epi32(load16(b + 1)), _mm512_mul_ps(e2m1_table(), _mm512_set1_ps(e8m0_half(b[0])))};
  }
  static __m512 chunk(const St& s, int c) {
    return _mm512_permutexvar_ps(c == 0 ? s.codes : _mm512_srli_epi32(s.codes, 4), s.tbl);
  }
};

struct DecNVFP4 {
  static constexpr int kBlock = 64, kBytes = 36, kChunks = 4;
  struct St {
    const uint8_t* b;
  };
  static St load(const uint8_t* b) { return {b}; }
  static __m512 chunk(const St& s, int c) {
    // Sub-block c: [8 low nibbles, 8 high nibbles] of bytes 4+8c.. is element order.
    const __m128i v = load8(s.b + 4 + 8 * c);
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)));
    const __m512 tbl = _mm512_mul_ps(e2m1_table(), _mm512_set1_ps(kUe4m3Half[s.b[c]]));
    return _mm512_permutexvar_ps(codes, tbl);
  }
};

struct Avx512 {
  static constexpr int kMaxT = 8;
  using F32Vec = ::ft::quant::detail::F32Vec;

  template <class D, int R, int T>
  __attribute__((noinline)) static void tile(const uint8_t* w, int64_t row_bytes, const float* x, int64_t ldx, int64_t n_blocks, float* acc,
                   int64_t ld_acc) {
    __m512 s[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      prefetch_next_rows<R, D::kBytes>(w, row_bytes, b);
      typename D::St st[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) st[r] = D::load(w + r * row_bytes + b * D::kBytes);
      const float* xb = x + b * D::kBlock;
#pragma GCC unroll 16
      for (int c = 0; c < D::kChunks; ++c) {
        __m512 wv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) wv[r] = D::chunk(st[r], c);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m512 xv = _mm512_loadu_ps(xb + t * ldx + 16 * c);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) s[r][t] = _mm512_fmadd_ps(wv[r], xv, s[r][t]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t * ld_acc + r] += _mm512_reduce_add_ps(s[r][t]);
  }
};

}  // namespace

void matmul_avx512(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case GgmlType::F32: return run_direct<Avx512, DecF32>(a, r0, r1);
    case GgmlType::F16: return run_direct<Avx512, DecF16>(a, r0, r1);
    case GgmlType::BF16: return run_direct<Avx512, DecBF16>(a, r0, r1);
    case GgmlType::Q8_0: return run_direct<Avx512, DecQ8_0>(a, r0, r1);
    case GgmlType::Q4_K: return run_direct<Avx512, DecQ4_K>(a, r0, r1);
    case GgmlType::Q6_K: return run_direct<Avx512, DecQ6_K>(a, r0, r1);
    case GgmlType::MXFP4: return run_direct<Avx512, DecMXFP4>(a, r0, r1);
    case GgmlType::NVFP4: return run_direct<Avx512, DecNVFP4>(a, r0, r1);
    default: return run_via_ref<Avx512>(a, r0, r1);
  }
}

}  // namespace ft::quant::detail
