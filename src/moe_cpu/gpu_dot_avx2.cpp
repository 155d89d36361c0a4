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
#include "moe_cpu/gpu_dot_rows.h"

namespace ft::moe_cpu::detail {
namespace {

constexpr int kG = 8;  // rows per group (ymm lanes)

// Signed w times signed x, pairs summed to int16 (|w| <= 128, |x| <= 127: no saturation).
inline __m256i mul_pairs(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}
// The 32-bit word at p + off[r] of each of the 8 rows, by scalar loads: gathers are slow
// on AMD Zen (microcoded; the 2-core dev host is an EPYC).
inline __m256i load_words8(const uint8_t* p, const int32_t* offs) {
  uint32_t v[8];
  for (int r = 0; r < 8; ++r) std::memcpy(&v[r], p + offs[r], 4);
  return _mm256_setr_epi32(static_cast<int>(v[0]), static_cast<int>(v[1]), static_cast<int>(v[2]),
                           static_cast<int>(v[3]), static_cast<int>(v[4]), static_cast<int>(v[5]),
                           static_cast<int>(v[6]), static_cast<int>(v[7]));
}
// 2 * ue4m3_half of each int32 (a byte: nvfp4_scales: 0x7F -> 0, 0xFF -> 480), exactly:
// e >= 1: 2^(e - 7) (1 + m / 8) is the fp32 with bits ((b & 0x7F) << 20) + (120 << 23);
// e == 0: m 2^-9 (no denormal inputs, so DAZ would not change it). 9 operations where
// assembling exponent and mantissa apart took 16.
inline __m256 ue4m3_full8(__m256i x) {
  const __m256i t = _mm256_and_si256(x, _mm256_set1_epi32(0x7F));
  const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(t, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(1.0f / 512.0f));  // t = m when e == 0
  const __m256 v = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), t)));
  return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(0x7F))), v);
}
// e8m0_half of the low byte of each int32.
inline __m256 e8m0_half8(__m256i e) {
  const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);  // e < 2
  const __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i lt2 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(big, small, lt2));
}

// Folds the terms of 8 rows as they are made, in term order: lanes > 0: term t into lane
// (t >> unit_log2) & (lanes - 1), then the lane tree; lanes == 0 (NVFP4 packed): each block's
// 4 terms from 0, the blocks added in order.
struct Folder {
  int lanes = 32, unit_log2 = 2;
  int64_t t = 0;
  __m256 acc[32];
  __m256 blk, dot;
  void start() {
    t = 0;
    blk = dot = _mm256_setzero_ps();
    for (int l = 0; l < (lanes > 0 ? lanes : 1); ++l) acc[l] = _mm256_setzero_ps();
  }
  void add(__m256 is, __m256 sc) {
    if (lanes == 0) {
      blk = _mm256_fmadd_ps(is, sc, (t & 3) == 0 ? _mm256_setzero_ps() : blk);
      if ((t & 3) == 3) dot = _mm256_add_ps(dot, blk);
    } else {
      __m256& a = acc[(t >> unit_log2) & (lanes - 1)];
      a = _mm256_fmadd_ps(is, sc, a);
    }
    ++t;
  }
  // One NVFP4 block's 4 terms (all in one lane, or one block sum) as four add() calls fold
  // them, the lane loaded and stored once (gpu_dot_avx512.cpp's Folder16::add4: why).
  void add4(const __m256 (&is)[4], const __m256 (&sc)[4]) {
    if (lanes == 0) {
      __m256 b = _mm256_fmadd_ps(is[0], sc[0], _mm256_setzero_ps());
      b = _mm256_fmadd_ps(is[1], sc[1], b);
      b = _mm256_fmadd_ps(is[2], sc[2], b);
      b = _mm256_fmadd_ps(is[3], sc[3], b);
      dot = _mm256_add_ps(dot, b);
    } else {
      __m256& a = acc[(t >> unit_log2) & (lanes - 1)];
      __m256 v = a;
      v = _mm256_fmadd_ps(is[0], sc[0], v);
      v = _mm256_fmadd_ps(is[1], sc[1], v);
      v = _mm256_fmadd_ps(is[2], sc[2], v);
      v = _mm256_fmadd_ps(is[3], sc[3], v);
      a = v;
    }
    t += 4;
  }
  void finish(float* out) {
    if (lanes == 0) return _mm256_storeu_ps(out, dot);
    for (int o = lanes / 2; o > 0; o /= 2)
      for (int l = 0; l < o; ++l) acc[l] = _mm256_add_ps(acc[l], acc[l + o]);
    _mm256_storeu_ps(out, acc[0]);
  }
};

// Terms of 8 rows (row r at w + off[r]) at once, folded as made. The weights are decoded
// with +12 so that maddubs can take them unsigned: sum((w + 12) x) - 12 sum(x) = sum(w x),
// exact in int32 (xp.sum: the activations' sub-block sums).
void terms_nvfp4_8(const uint8_t* w, const int32_t* offs, const GpuActAux& xp, int64_t nb, Folder& f,
                   const NextGroup& ng) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14, 15, 16,
                                       18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const bool pf_row = gpu_dot_prefetch() == Prefetch::kRow;
  for (int64_t c = 0; c < nb; ++c) {
    ng.step(c);
    const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp.nv_ab.data() + 64 * c));
    const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp.nv_ab.data() + 64 * c + 32));
    __m256i p[8];  // per row: int32 m = bytes 4m..4m+3 of sub-block m / 2
    for (int r = 0; r < 8; ++r) {
      const uint8_t* b = w + offs[r] + 36 * c;
      if (pf_row) _mm_prefetch(reinterpret_cast<const char*>(b + 36 * 16), _MM_HINT_T0);
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4));
      const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
      const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      // Each int16 <= 2 * 24 * 127 per half: the sum of both fits.
      const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
      p[r] = _mm256_madd_epi16(s16, ones);
    }
    // Per row, lane: [s0 s0 s1 s1 | s2 s2 s3 s3]; pairs summed by hadd, then the sub-blocks
    // gathered across rows (12 instructions for 8 rows).
    const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
    auto pick = [](__m256i a, __m256i b, bool odd) {  // lane: [a0 a2 b0 b2] or [a1 a3 b1 b3]
      const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
      return _mm256_castps_si256(odd ? _mm256_shuffle_ps(fa, fb, 0xDD) : _mm256_shuffle_ps(fa, fb, 0x88));
    };
    const __m256i e0 = pick(h01, h23, false), o0 = pick(h01, h23, true);  // rows 0-3: [s0 | s2], [s1 | s3]
    const __m256i e1 = pick(h45, h67, false), o1 = pick(h45, h67, true);  // rows 4-7
    const __m256i ys[4] = {_mm256_permute2x128_si256(e0, e1, 0x20), _mm256_permute2x128_si256(o0, o1, 0x20),
                           _mm256_permute2x128_si256(e0, e1, 0x31), _mm256_permute2x128_si256(o0, o1, 0x31)};
    const __m256i words = load_words8(w + 36 * c, offs);
    __m256 is[4], sc[4];  // the block's terms: one lane (unit_log2 2) or one block sum
    for (int s = 0; s < 4; ++s) {
      const __m256i v = _mm256_sub_epi32(ys[s], _mm256_set1_epi32(12 * xp.sum[4 * c + s]));
      is[s] = _mm256_cvtepi32_ps(v);
      const __m256i byte = _mm256_and_si256(_mm256_srli_epi32(words, 8 * s), _mm256_set1_epi32(0xFF));
      const __m256 sw = ue4m3_full8(byte);
      sc[s] = _mm256_mul_ps(sw, _mm256_set1_ps(xp.dxh[2 * c + (s >> 1)]));
    }
    f.add4(is, sc);
  }
}

// Sums of 8 vectors of 8 int32 each, as one vector in row order.
inline __m256i hsum8(const __m256i (&p)[8]) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]), h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]), h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);  // per half: rows 0-3, 4-7
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Q8_0 / MXFP4 terms (one per 32-element block) of 8 rows at w + off[r], term-major.
// MXFP4 codes are decoded +12 (unsigned maddubs) and 12 sum(x) taken off per block.
// xsum[j]: the sum of activation block j (MXFP4's +12 decoding).
void terms_q8_8(GgmlType type, const uint8_t* w, const int32_t* offs, const GpuActQ8& x, const int32_t* xsum,
                int64_t n32, Folder& f, const NextGroup& ng) {
  const bool q8 = type == GgmlType::Q8_0;
  const int bb = q8 ? 34 : 17;
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14, 15, 16,
                                       18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const bool pf_row = gpu_dot_prefetch() == Prefetch::kRow;
  for (int64_t j = 0; j < n32; ++j) {
    ng.step(j);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * j));
    __m256i p[8];
    for (int r = 0; r < 8; ++r) {
      const uint8_t* b = w + offs[r] + bb * j;
      if (pf_row) _mm_prefetch(reinterpret_cast<const char*>(b + bb * 16), _MM_HINT_T0);
      if (q8) {
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
        p[r] = _mm256_madd_epi16(mul_pairs(wv, xv), ones);
      } else {
        __m128i q;
        std::memcpy(&q, b + 1, 16);
        const __m256i v = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
        p[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4)), xv), ones);
      }
    }
    __m256i sum = hsum8(p);
    const __m256i words = load_words8(w + bb * j, offs);
    __m256 sw;
    if (q8) {
      const __m256i d16 = _mm256_and_si256(words, _mm256_set1_epi32(0xFFFF));
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(d16, d16), 0x08);
      sw = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    } else {
      sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(12 * xsum[j]));
      sw = e8m0_half8(_mm256_and_si256(words, _mm256_set1_epi32(0xFF)));
    }
    f.add(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(sw, _mm256_set1_ps(x.d[j])));
  }
}

// The AVX2 row kernels for the shared driver (gpu_dot_rows.h): rows in lane order.
struct Avx2Rows {
  static constexpr int kG = 8;
  using Folder = moe_cpu::detail::Folder;
  static bool needs_aux(GgmlType type) { return type != GgmlType::Q8_0; }
  static const int* lane_rows(GgmlType) {
    static constexpr int kIdentity[kG] = {0, 1, 2, 3, 4, 5, 6, 7};
    return kIdentity;
  }
  static void terms(GgmlType type, const uint8_t* w, const int32_t* offs, const GpuActQ8& x, const GpuActAux* aux,
                    int64_t k, Folder& f, const NextGroup& ng) {
    if (type == GgmlType::NVFP4)
      terms_nvfp4_8(w, offs, *aux, k / 64, f, ng);
    else
      terms_q8_8(type, w, offs, x, aux ? aux->sum.data() : nullptr, k / 32, f, ng);
  }
};

}  // namespace

bool gpu_dot_q8_rows_avx2(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows,
                          const GpuActQ8& x, int64_t k, float* out) {
  return gpu_dot_q8_row_groups<Avx2Rows>(plan, type, w, row_bytes, n_rows, x, k, out);
}

namespace {

inline void transpose8(__m256 (&v)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace

bool gpu_dot_float_rows_avx2(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x,
                             int64_t k, float* out) {
  if (!gpu_dot_float_supported(type)) return false;
  const bool e2m1 = type == GgmlType::MXFP4 || type == GgmlType::NVFP4;
  thread_local std::vector<float> xs;
  xs.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) xs[i] = e2m1 ? x[i] * 18446744073709551616.0f : x[i];  // 2^64
  const __m256 k2e63 = _mm256_set1_ps(9223372036854775808.0f);                          // 2^63
  for (int64_t g0 = 0; g0 < n_rows; g0 += kG) {
    const uint8_t* rows[kG];
    for (int r = 0; r < kG; ++r) rows[r] = w + std::min<int64_t>(g0 + r, n_rows - 1) * row_bytes;
    __m256 acc[32];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const NextGroup ng(w, row_bytes, g0, kG, n_rows, k / 8);
    for (int64_t p = 0; p < k / 8; ++p) {
      ng.step(p);
      const int64_t e = 8 * p;
      __m256 q[kG];
      alignas(32) float d[kG];
      for (int r = 0; r < kG; ++r) {
        if (type == GgmlType::BF16) {
          const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + 2 * e));
          q[r] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
          d[r] = 1.0f;
        } else if (type == GgmlType::F16) {
          q[r] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + 2 * e)));
          d[r] = 1.0f;
        } else if (type == GgmlType::F32) {
          q[r] = _mm256_loadu_ps(reinterpret_cast<const float*>(rows[r] + 4 * e));
          d[r] = 1.0f;
        } else {
          alignas(32) float t[8];
          gpu_float_piece(type, rows[r], e, t, d[r]);
          q[r] = _mm256_load_ps(t);
        }
      }
      transpose8(q);  // q[i]: element e + i of the 8 rows
      __m256 part = _mm256_setzero_ps();
      for (int i = 0; i < 8; ++i) part = _mm256_fmadd_ps(q[i], _mm256_broadcast_ss(&xs[e + i]), part);
      if (e2m1) part = _mm256_mul_ps(part, k2e63);
      acc[p % 32] = _mm256_fmadd_ps(part, _mm256_load_ps(d), acc[p % 32]);
    }
    for (int o = 16; o > 0; o /= 2)
      for (int l = 0; l < o; ++l) acc[l] = _mm256_add_ps(acc[l], acc[l + o]);
    float o8[kG];
    _mm256_storeu_ps(o8, acc[0]);
    for (int r = 0; r < kG && g0 + r < n_rows; ++r) out[g0 + r] = o8[r];
  }
  return true;
}

void gpu_quantize_act_q8_avx2(const float* x, int64_t k, int8_t* qs, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t j = 0; j < k / 32; ++j) {
    const float* xb = x + 32 * j;
    __m256 v[4];
    // amax: max(acc, |x|) in any order is the sequential max (no NaN is taken: maxps
    // returns its second operand when one is NaN, as std::max(amax, NaN) keeps amax).
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float amax = _mm_cvtss_f32(m4);
    d[j] = f16_to_f32(f32_to_f16(amax / 127.0f));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i)
      q[i] = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // |q| <= 127: the saturating packs are exact; the permute undoes their lane interleave.
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * j), _mm256_permutevar8x32_epi32(p, order));
  }
}

}  // namespace ft::moe_cpu::detail
