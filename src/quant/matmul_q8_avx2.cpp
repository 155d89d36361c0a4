// AVX2 integer kernels of the q8 route (matmul.h, act_quant.h): activations packed as
// Q8_0 or Q8_K int8, weights decoded to int8 in registers, products summed by
// _mm256_maddubs_epi16 (u8 x s8 -> s16 pairs) and _mm256_madd_epi16 (-> s32), then
// scaled in fp32. Each call quantises X once (all tokens) into a thread-local buffer.
//
// Two tile families:
//   Q8_0 activations (NVFP4, MXFP4, Q4_0, Q8_0): per 32-element chunk an int32 vector
//     whose lane i sums elements 4i..4i+3, times an 8-lane fp32 scale (weight scale of
//     those elements x activation d), into an fp32 accumulator.
//   Q8_K activations (Q4_K, Q6_K): 6/8-bit sub-block scales are folded into the int32 sums
//     by madd, so a 256-element block costs one int->fp32 conversion per token.
// Overflow: maddubs pairs stay within s16 (|w| <= 128 for Q8_0 gives 2*128*127 = 32512;
// 4-bit codes give at most 2*63*127 = 16002 for Q6_K).
// Per row and token the Q8_0 family accumulates exactly as ggml's AVX2 vec_dot does (same
// lanes, one fp32 accumulator, same horizontal sum), so with the same activations the
// results are bit-identical to llama.cpp's: the parity configs' prompt logits agree to
// 0..1e-6 under --dtype auto.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul_driver.h"
#include "quant/matmul_kernels.h"

namespace ft::quant::detail {
namespace {

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

const float* const kUe4m3Half = ue4m3_half_table();

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 bytes of nibbles -> 32 int8 through a 16-entry table: low nibbles in the low
// 128-bit half, high nibbles in the high half.
inline __m256i nibbles_lut(const uint8_t* p, __m256i lut) {
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i n = _mm256_and_si256(
      _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(lut, n);
}

inline __m256i lut_e2m1() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kE2M1Doubled)));
}
inline __m256i lut_q4_0() {
  return _mm256_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5,
                          -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
}

// ---- Q8_0-activation decoders: chunk(block, c, w, s) gives 32 int8 weights in element
// order and the fp32 weight scale of each int32 lane (4 elements) -----------------------

struct QNvfp4 {
  static constexpr int kBlock = 64, kBytes = 36, kChunks = 2;
  static void chunk(const uint8_t* b, int c, __m256i& w, __m256& s) {
    // Bytes 16c..16c+15 hold sub-blocks 2c and 2c+1: the table lookup yields qwords
    // [elems 0-7 | 16-23 | 8-15 | 24-31] of the chunk; permute4x64 puts them in order.
    w = _mm256_permute4x64_epi64(nibbles_lut(b + 4 + 16 * c, lut_e2m1()), 0xD8);
    s = _mm256_set_m128(_mm_set1_ps(kUe4m3Half[b[2 * c + 1]]), _mm_set1_ps(kUe4m3Half[b[2 * c]]));
  }
};

// e8m0_half inlined (ggml_e8m0_to_fp32_half): 2^(e-128) with e < 2 as fp32 subnormals.
// The out-of-line call per 32 weights cost 40% of MXFP4 GEMV time.
inline float e8m0_half_inline(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct QMxfp4 {
  static constexpr int kBlock = 32, kBytes = 17, kChunks = 1;
  static void chunk(const uint8_t* b, int, __m256i& w, __m256& s) {
    w = nibbles_lut(b + 1, lut_e2m1());
    s = _mm256_set1_ps(e8m0_half_inline(b[0]));
  }
};

struct QQ4_0 {
  static constexpr int kBlock = 32, kBytes = 18, kChunks = 1;
  static void chunk(const uint8_t* b, int, __m256i& w, __m256& s) {
    w = nibbles_lut(b + 2, lut_q4_0());
    s = _mm256_set1_ps(load_f16(b));
  }
};

struct QQ8_0 {
  static constexpr int kBlock = 32, kBytes = 34, kChunks = 1;
  static void chunk(const uint8_t* b, int, __m256i& w, __m256& s) {
    w = loadu256(b + 2);
    s = _mm256_set1_ps(load_f16(b));
  }
};

// Where one token's packed activations live (act_quant.h PackedActRow).
struct ActRows {
  const uint8_t* base;
  int64_t stride;  // bytes between tokens
  int64_t k;
  const int8_t* qs(int t) const { return reinterpret_cast<const int8_t*>(base + t * stride); }
  const float* d(int t) const { return reinterpret_cast<const float*>(base + t * stride + k); }
  const int16_t* bsums(int t) const {
    return reinterpret_cast<const int16_t*>(base + t * stride + k + 4 * (k / 256));
  }
};

// acc[t*ld + r] += W[r] . X[t] over weight blocks [b0, b0 + nb), r < R, t < T.
template <class D, int R, int T>
__attribute__((noinline)) void tile_q8_0(const uint8_t* w, int64_t row_bytes, const ActRows& x,
                                         int t0, int64_t b0, int64_t nb, float* acc, int64_t ld) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 s[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) s[r][t] = _mm256_setzero_ps();
  const int8_t* xq[T];
  const float* xd[T];
  for (int t = 0; t < T; ++t) {
    xq[t] = x.qs(t0 + t);
    xd[t] = x.d(t0 + t);
  }
  for (int64_t b = b0; b < b0 + nb; ++b) {
    prefetch_next_rows<R, D::kBytes>(w, row_bytes, b);
#pragma GCC unroll 2
    for (int c = 0; c < D::kChunks; ++c) {
      const int64_t e = b * D::kBlock + 32 * c;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i wq;
        __m256 ws;
        D::chunk(w + r * row_bytes + b * D::kBytes, c, wq, ws);
        const __m256i aw = _mm256_sign_epi8(wq, wq);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i a = _mm256_sign_epi8(loadu256(xq[t] + e), wq);
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, a), ones);
          const __m256 da = _mm256_broadcast_ss(xd[t] + b * (D::kBlock / 32) + c);
          s[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(ws, da), s[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[t * ld + r] += hsum(s[r][t]);
}

// ---- Q8_K-activation kernels -----------------------------------------------------------

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// pshufb control that copies int16 word i of each 128-bit lane to all of that lane.
inline __m256i word_bcast(int i) {
  return _mm256_set1_epi16(static_cast<int16_t>((2 * i + 1) << 8 | (2 * i)));
}
// ... word lo of the low lane and word hi of the high lane.
inline __m256i word_pair(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((2 * hi + 1) << 8 | (2 * hi))),
                          _mm_set1_epi16(static_cast<int16_t>((2 * lo + 1) << 8 | (2 * lo))));
}

// Q4_K: w = d*sc[g]*q - dmin*m[g] with q in 0..15 per 32-element sub-block g; chunk j of
// 64 elements is qs[32j..32j+31], low nibbles sub-block 2j, high nibbles 2j+1.
//   sum = d*da * sum_g sc[g]*(q.a)_g  -  dmin*da * sum_g m[g]*(bsums[2g] + bsums[2g+1])
template <int R, int T>
__attribute__((noinline)) void tile_q4_K(const uint8_t* w, int64_t row_bytes, const ActRows& x,
                                         int t0, int64_t b0, int64_t nb, float* acc, int64_t ld) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 s[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) s[r][t] = _mm256_setzero_ps();
  for (int64_t b = b0; b < b0 + nb; ++b) {
    prefetch_next_rows<R, 144>(w, row_bytes, b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * 144;
      alignas(16) uint8_t sm[16];
      k4_unpack_scales(blk + 4, sm);
      const __m128i smv = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
      // Mins as int16 pairs [m0 m0 m1 m1 ...] to madd against the 16 bsums.
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(smv, smv));
      // The 8 scales as int16 in both 128-bit lanes; word_bcast picks one per sub-block.
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(smv));
      const float d = load_f16(blk), dmin = load_f16(blk + 2);
      __m256i sumi[T];
      for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i q = loadu256(blk + 16 + 32 * j);
        const __m256i lo = _mm256_and_si256(q, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i sc_lo = _mm256_shuffle_epi8(sc16, word_bcast(2 * j));
        const __m256i sc_hi = _mm256_shuffle_epi8(sc16, word_bcast(2 * j + 1));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* a = x.qs(t0 + t) + b * 256 + 64 * j;
          const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu256(a)), sc_lo);
          const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu256(a + 32)), sc_hi);
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p0, p1));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const float da = x.d(t0 + t)[b];
        const __m256i bs = loadu256(x.bsums(t0 + t) + 16 * b);
        const __m256i mprod = _mm256_madd_epi16(bs, mins);
        s[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(d * da), s[r][t]);
        s[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mprod), _mm256_set1_ps(dmin * da), s[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[t * ld + r] += hsum(s[r][t]);
}

// Q6_K: element 128h + 32g + l has q = low | high << 4 in 0..63 (low: nibble g>>1 of
// ql[64h + 32(g&1) + l]; high: bits 2g of qh[32h + l]) and scale sc[element / 16]; the
// value is d*sc*(q - 32). The -32 is applied once per block: 32 * sum_j sc[j]*bsums[j].
template <int R, int T>
__attribute__((noinline)) void tile_q6_K(const uint8_t* w, int64_t row_bytes, const ActRows& x,
                                         int t0, int64_t b0, int64_t nb, float* acc, int64_t ld) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  __m256 s[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) s[r][t] = _mm256_setzero_ps();
  for (int64_t b = b0; b < b0 + nb; ++b) {
    prefetch_next_rows<R, 210>(w, row_bytes, b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * row_bytes + b * 210;
      const uint8_t* ql = blk;
      const uint8_t* qh = blk + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
      const float d = load_f16(blk + 208);
      const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
      // Scales 8h..8h+7 as int16 in both lanes, for word_pair.
      const __m256i sch[2] = {
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(sc8)),
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8)))};
      __m256i sumi[T];
      for (int t = 0; t < T; ++t) {
        // Start from -32 * sum_j sc[j] * bsums[j].
        const __m256i bs = loadu256(x.bsums(t0 + t) + 16 * b);
        sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5));
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i qh_v = loadu256(qh + 32 * h);
        const __m256i ql0 = loadu256(ql + 64 * h), ql1 = loadu256(ql + 64 * h + 32);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m256i lowsrc = (g & 1) ? ql1 : ql0;
          const __m256i low =
              _mm256_and_si256((g >> 1) ? _mm256_srli_epi16(lowsrc, 4) : lowsrc, m4);
          // Bits 2g..2g+1 of qh moved to bits 4..5 with one shift (none for g = 2).
          const __m256i hs = g < 2    ? _mm256_slli_epi16(qh_v, 4 - 2 * g)
                             : g == 2 ? qh_v
                                      : _mm256_srli_epi16(qh_v, 2);
          const __m256i q = _mm256_or_si256(low, _mm256_and_si256(hs, m30));
          const __m256i scv = _mm256_shuffle_epi8(sch[h], word_pair(2 * g, 2 * g + 1));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const int8_t* a = x.qs(t0 + t) + b * 256 + 128 * h + 32 * g;
            sumi[t] = _mm256_add_epi32(
                sumi[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, loadu256(a)), scv));
          }
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const float da = x.d(t0 + t)[b];
        s[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(d * da), s[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[t * ld + r] += hsum(s[r][t]);
}

// ---- the loop nest -------------------------------------------------------------------

// Tile functions by family, selected at compile time.
template <class D>
struct Q8_0Family {
  static constexpr int kBlock = D::kBlock, kGemvRows = 4;
  static constexpr GgmlType kDot = GgmlType::Q8_0;
  template <int R, int T>
  static void tile(const uint8_t* w, int64_t rb, const ActRows& x, int t0, int64_t b0, int64_t nb,
                   float* acc, int64_t ld) {
    tile_q8_0<D, R, T>(w, rb, x, t0, b0, nb, acc, ld);
  }
};
struct Q4_KFamily {
  static constexpr int kBlock = 256, kGemvRows = 4;
  static constexpr GgmlType kDot = GgmlType::Q8_K;
  template <int R, int T>
  static void tile(const uint8_t* w, int64_t rb, const ActRows& x, int t0, int64_t b0, int64_t nb,
                   float* acc, int64_t ld) {
    tile_q4_K<R, T>(w, rb, x, t0, b0, nb, acc, ld);
  }
};
struct Q6_KFamily {
  static constexpr int kBlock = 256, kGemvRows = 4;
  static constexpr GgmlType kDot = GgmlType::Q8_K;
  template <int R, int T>
  static void tile(const uint8_t* w, int64_t rb, const ActRows& x, int t0, int64_t b0, int64_t nb,
                   float* acc, int64_t ld) {
    tile_q6_K<R, T>(w, rb, x, t0, b0, nb, acc, ld);
  }
};

// All token groups of one row tile: 4 tokens at a time, then 2, then 1.
template <class F, int R>
void row_tile(const uint8_t* w, int64_t rb, const ActRows& x, int64_t n_tok, int64_t b0, int64_t nb,
              float* acc, int64_t ld) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4)
    F::template tile<R, 4>(w, rb, x, static_cast<int>(t), b0, nb, acc + t * ld, ld);
  if (t + 2 <= n_tok) {
    F::template tile<R, 2>(w, rb, x, static_cast<int>(t), b0, nb, acc + t * ld, ld);
    t += 2;
  }
  if (t < n_tok) F::template tile<R, 1>(w, rb, x, static_cast<int>(t), b0, nb, acc + t * ld, ld);
}

template <class F>
void run_q8(const MatmulArgs& a, int64_t r0, int64_t r1) {
  const int64_t k = a.k, n_rows = r1 - r0, n_tok = a.n_tok;
  // Quantise every token's activations once for this call.
  const int64_t stride = packed_act_bytes(F::kDot, k);
  struct alignas(32) Line {
    uint8_t b[32];
  };
  thread_local std::vector<Line> xbuf;  // 32-byte aligned rows (stride is a multiple of 32)
  xbuf.resize(static_cast<size_t>(stride / 32 * n_tok));
  auto* xb = reinterpret_cast<uint8_t*>(xbuf.data());
  for (int64_t t = 0; t < n_tok; ++t) pack_act(F::kDot, a.x + t * a.ldx, xb + t * stride, k);
  const ActRows x{xb, stride, k};

  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(n_rows * n_tok), 0.0f);
  float* acc = acc_buf.data();
  // k chunks keep the chunk's int8 activations of all tokens within ~256 KiB of L2, so a
  // row tile's weights are read from memory once and its activations from L2.
  const int64_t n_blocks = k / F::kBlock;
  const int64_t chunk = std::max<int64_t>(
      256 / F::kBlock, (256 * 1024 / std::max<int64_t>(n_tok, 1)) / 256 * 256 / F::kBlock);
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t nb = std::min(chunk, n_blocks - c0);
    int64_t r = r0;
    // One token: kGemvRows rows of independent chains (R = 1 measured no faster for Q6_K).
    const int rmax = n_tok == 1 ? F::kGemvRows : 2;
    if (rmax >= 4)
      for (; r + 4 <= r1; r += 4)
        row_tile<F, 4>(a.w + r * a.row_bytes, a.row_bytes, x, n_tok, c0, nb, acc + (r - r0),
                       n_rows);
    if (rmax >= 2)
      for (; r + 2 <= r1; r += 2)
        row_tile<F, 2>(a.w + r * a.row_bytes, a.row_bytes, x, n_tok, c0, nb, acc + (r - r0),
                       n_rows);
    for (; r < r1; ++r)
      row_tile<F, 1>(a.w + r * a.row_bytes, a.row_bytes, x, n_tok, c0, nb, acc + (r - r0), n_rows);
  }
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = r0; r < r1; ++r)
      a.y[t * a.ldy + r] = matmul_finish(a, r, acc[t * n_rows + (r - r0)]);
}

}  // namespace

bool matmul_q8_avx2_has(GgmlType t) {
  switch (t) {
    case GgmlType::NVFP4:
    case GgmlType::MXFP4:
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

void matmul_q8_avx2(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.type) {
    case GgmlType::NVFP4:
      return run_q8<Q8_0Family<QNvfp4>>(a, r0, r1);
    case GgmlType::MXFP4:
      return run_q8<Q8_0Family<QMxfp4>>(a, r0, r1);
    case GgmlType::Q4_0:
      return run_q8<Q8_0Family<QQ4_0>>(a, r0, r1);
    case GgmlType::Q8_0:
      return run_q8<Q8_0Family<QQ8_0>>(a, r0, r1);
    case GgmlType::Q4_K:
      return run_q8<Q4_KFamily>(a, r0, r1);
    case GgmlType::Q6_K:
      return run_q8<Q6_KFamily>(a, r0, r1);
    default:
      break;
  }
}

}  // namespace ft::quant::detail
