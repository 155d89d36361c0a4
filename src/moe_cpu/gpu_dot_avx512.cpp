// AVX-512 exact-mode rows (gpu_dot.h): the same integer sums and the same fp32 operations in
// the same order as the scalar mirror, 16 rows at a time (F, BW, VL and VNNI; selected at run
// time by gpu_dot_isa(), so the binary still runs on AVX2-only machines).
//
// Integer path (NVFP4, Q8_0, MXFP4): a row's terms (exact int32 block sums times the fp32
// product of the block scales) are folded by fmas in term order, exactly as in the AVX2 rows
// (gpu_dot_avx2.cpp), with 16 rows in the lanes of a zmm. The block sums are taken with
// vpdpbusd on two rows per zmm (rows i and i + 8; MXFP4: four rows' raw code bytes, low and
// high nibbles against the block's two activation halves), weights made unsigned by an offset whose
// multiple of the activation sum is taken off afterwards (exact in int32), and then gathered
// across rows by permutes; which row ends in which lane is worked out once (lane_rows_*) by
// running the same permutes on row numbers.
// Float path (BF16 only): one row at a time, its 8-element pieces 16 to a zmm, so that each
// piece's fma chain runs in one lane and the lane accumulators (piece mod 32) are two zmm.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*()
// placeholders (GCC bug 105593); the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "moe_cpu/gpu_dot.h"
#include "moe_cpu/gpu_dot_rows.h"

namespace ft::moe_cpu::detail {
namespace {

constexpr int kG = 16;  // rows per group (zmm lanes)

using LaneRows = std::array<int, kG>;

// Lane l of pair_sum(a, b): l < 8: a[2l] + a[2l + 1]; else b[2(l - 8)] + b[2(l - 8) + 1].
inline __m512i pair_sum(__m512i a, __m512i b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
}
// The row tags of pair_sum's lanes (both lanes of a pair belong to one row).
constexpr std::array<int, 16> pair_tags(const std::array<int, 16>& a, const std::array<int, 16>& b) {
  std::array<int, 16> r{};
  for (int l = 0; l < 16; ++l) r[l] = l < 8 ? a[2 * l] : b[2 * (l - 8)];
  return r;
}
// z[i] for i < 8 holds row i in lanes 0-7 and row i + 8 in lanes 8-15.
constexpr std::array<std::array<int, 16>, 8> z_tags() {
  std::array<std::array<int, 16>, 8> z{};
  for (int i = 0; i < 8; ++i)
    for (int l = 0; l < 16; ++l) z[i][l] = l < 8 ? i : i + 8;
  return z;
}

// Q8_0 / MXFP4: 8 lanes per row (one 32-block) reduced by three pair_sum levels to one lane.
inline __m512i reduce_rows8(const __m512i (&z)[8]) {
  const __m512i p0 = pair_sum(z[0], z[1]), p1 = pair_sum(z[2], z[3]);
  const __m512i p2 = pair_sum(z[4], z[5]), p3 = pair_sum(z[6], z[7]);
  return pair_sum(pair_sum(p0, p1), pair_sum(p2, p3));
}
constexpr LaneRows lane_rows_q8() {
  const auto z = z_tags();
  const auto r = pair_tags(pair_tags(pair_tags(z[0], z[1]), pair_tags(z[2], z[3])),
                           pair_tags(pair_tags(z[4], z[5]), pair_tags(z[6], z[7])));
  LaneRows out{};
  for (int l = 0; l < 16; ++l) out[l] = r[l];
  return out;
}

// NVFP4: lanes 2s, 2s + 1 of each row's 8 hold sub-block s. One pair_sum level leaves each
// 128-bit chunk of p[i] one row's 4 sub-blocks; a 4 x 4 transpose per chunk gives o[s] with
// sub-block s of 16 rows.
inline void reduce_rows_nvfp4(const __m512i (&z)[8], __m512i (&o)[4]) {
  const __m512i p0 = pair_sum(z[0], z[1]), p1 = pair_sum(z[2], z[3]);
  const __m512i p2 = pair_sum(z[4], z[5]), p3 = pair_sum(z[6], z[7]);
  const __m512i t0 = _mm512_unpacklo_epi32(p0, p1), t1 = _mm512_unpackhi_epi32(p0, p1);
  const __m512i t2 = _mm512_unpacklo_epi32(p2, p3), t3 = _mm512_unpackhi_epi32(p2, p3);
  o[0] = _mm512_unpacklo_epi64(t0, t2);
  o[1] = _mm512_unpackhi_epi64(t0, t2);
  o[2] = _mm512_unpacklo_epi64(t1, t3);
  o[3] = _mm512_unpackhi_epi64(t1, t3);
}
constexpr LaneRows lane_rows_nvfp4() {
  const auto z = z_tags();
  const std::array<int, 16> p[4] = {pair_tags(z[0], z[1]), pair_tags(z[2], z[3]), pair_tags(z[4], z[5]),
                                    pair_tags(z[6], z[7])};
  // o[s] chunk q = (p0, p1, p2, p3) element s of chunk q: lane 4q + i is p[i]'s chunk q.
  LaneRows out{};
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 4; ++i) out[4 * q + i] = p[i][4 * q];
  return out;
}

// MXFP4: z[k] (k < 4) holds 4 rows, row k + 4c in its 128-bit chunk c, 4 lanes each; two
// pair_sum levels leave one lane per row.
inline __m512i reduce_rows4(const __m512i (&z)[4]) {
  return pair_sum(pair_sum(z[0], z[1]), pair_sum(z[2], z[3]));
}
constexpr LaneRows lane_rows_mxfp4() {
  std::array<std::array<int, 16>, 4> z{};
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 16; ++l) z[k][l] = k + 4 * (l / 4);
  const auto r = pair_tags(pair_tags(z[0], z[1]), pair_tags(z[2], z[3]));
  LaneRows out{};
  for (int l = 0; l < 16; ++l) out[l] = r[l];
  return out;
}

// Compile-time constants: nothing in this file may run before the CPU is known to have AVX-512.
constexpr LaneRows kRowsMx = lane_rows_mxfp4();
constexpr LaneRows kRowsQ8 = lane_rows_q8();
constexpr LaneRows kRowsNv = lane_rows_nvfp4();

// 2 * ue4m3_half of each int32 (a byte), as the AVX2 decoder: e >= 1 from the bits
// ((b & 0x7F) << 20) + (120 << 23), e == 0 as m 2^-9, 0x7F -> 0.
inline __m512 ue4m3_full16(__m512i x) {
  const __m512i t = _mm512_and_si512(x, _mm512_set1_epi32(0x7F));
  const __m512 normal = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(t, 20), _mm512_set1_epi32(120 << 23)));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(1.0f / 512.0f));
  const __m512 v = _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(t, _mm512_set1_epi32(8)), normal, sub);
  return _mm512_maskz_mov_ps(_mm512_cmpneq_epi32_mask(x, _mm512_set1_epi32(0x7F)), v);
}
// e8m0_half of the low byte of each int32.
inline __m512 e8m0_half16(__m512i e) {
  const __m512i small = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);  // e < 2
  const __m512i big = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __mmask16 lt2 = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(lt2, big, small));
}

// The AVX2 Folder with 16 rows: terms folded in term order into lane
// (t >> unit_log2) & (lanes - 1), then the lane tree; lanes == 0 (NVFP4 packed): each
// block's 4 terms from 0, the blocks added in order.
struct Folder16 {
  int lanes = 32, unit_log2 = 2;
  int64_t t = 0;
  __m512 acc[32];
  __m512 blk, dot;
  void start() {
    t = 0;
    blk = dot = _mm512_setzero_ps();
    for (int l = 0; l < (lanes > 0 ? lanes : 1); ++l) acc[l] = _mm512_setzero_ps();
  }
  void add(__m512 is, __m512 sc) {
    if (lanes == 0) {
      blk = _mm512_fmadd_ps(is, sc, (t & 3) == 0 ? _mm512_setzero_ps() : blk);
      if ((t & 3) == 3) dot = _mm512_add_ps(dot, blk);
    } else {
      __m512& a = acc[(t >> unit_log2) & (lanes - 1)];
      a = _mm512_fmadd_ps(is, sc, a);
    }
    ++t;
  }
  // The 4 terms of one NVFP4 block (unit_log2 2: one lane, or lanes 0: one block sum) as
  // four add() calls would fold them, with the lane loaded and stored once: the fma chain
  // stays in registers instead of going through the stack array four times (session 9: those
  // stores were the hottest instructions of the rows; dev host, one thread, L2-resident
  // experts: see terms_nvfp4_16).
  void add4(const __m512 (&is)[4], const __m512 (&sc)[4]) {
    if (lanes == 0) {
      __m512 b = _mm512_fmadd_ps(is[0], sc[0], _mm512_setzero_ps());
      b = _mm512_fmadd_ps(is[1], sc[1], b);
      b = _mm512_fmadd_ps(is[2], sc[2], b);
      b = _mm512_fmadd_ps(is[3], sc[3], b);
      dot = _mm512_add_ps(dot, b);
    } else {
      __m512& a = acc[(t >> unit_log2) & (lanes - 1)];
      __m512 v = a;
      v = _mm512_fmadd_ps(is[0], sc[0], v);
      v = _mm512_fmadd_ps(is[1], sc[1], v);
      v = _mm512_fmadd_ps(is[2], sc[2], v);
      v = _mm512_fmadd_ps(is[3], sc[3], v);
      a = v;
    }
    t += 4;
  }
  void finish(float* out) {
    if (lanes == 0) return _mm512_storeu_ps(out, dot);
    for (int o = lanes / 2; o > 0; o /= 2)
      for (int l = 0; l < o; ++l) acc[l] = _mm512_add_ps(acc[l], acc[l + o]);
    _mm512_storeu_ps(out, acc[0]);
  }
};

inline __m512i load_2x256(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}
inline __m512i bcast_256(const int8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// E2M1 codes + 12 (unsigned for vpdpbusd: sum((w + 12) x) - 12 sum(x) = sum(w x)).
inline __m512i e2m1_lut12() {
  return _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// NVFP4 terms of 16 rows (physical row r at w + offs[r]; lane l is row rows[l]). PF_ROW:
// Prefetch::kRow (a template argument, so the other modes' loop has no test per row).
template <bool PF_ROW>
void terms_nvfp4_16(const uint8_t* w, const int32_t* offs, __m512i lane_off, const GpuActAux& xp, int64_t nb,
                    Folder16& f, const NextGroup& ng) {
  const __m512i lut = e2m1_lut12(), m4 = _mm512_set1_epi8(0x0F);
  constexpr bool pf_row = PF_ROW;
  // A block's 4 sub-block terms go to one lane in every NVFP4 plan (unit_log2 2), so they
  // are folded together (Folder16::add4), in the same order as one add() each (the
  // driver, gpu_dot_rows.h, sets unit_log2 2 for NVFP4).
  for (int64_t c = 0; c < nb; ++c) {
    ng.step(c);
    const __m512i xl = bcast_256(xp.nv_ab.data() + 64 * c), xh = bcast_256(xp.nv_ab.data() + 64 * c + 32);
    __m512i z[8];
    for (int i = 0; i < 8; ++i) {
      const uint8_t* b0 = w + offs[i] + 36 * c;
      const uint8_t* b1 = w + offs[i + 8] + 36 * c;
      if (pf_row) {
        _mm_prefetch(reinterpret_cast<const char*>(b0 + 36 * 16), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b1 + 36 * 16), _MM_HINT_T0);
      }
      const __m512i v = load_2x256(b0 + 4, b1 + 4);
      const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
      const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
      z[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
    }
    __m512i ys[4];
    reduce_rows_nvfp4(z, ys);
    const __m512i words = _mm512_i32gather_epi32(lane_off, w + 36 * c, 1);
    __m512 is[4], sc[4];
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_sub_epi32(ys[s], _mm512_set1_epi32(12 * xp.sum[4 * c + s]));
      const __m512i byte = _mm512_and_si512(_mm512_srli_epi32(words, 8 * s), _mm512_set1_epi32(0xFF));
      const __m512 sw = ue4m3_full16(byte);
      is[s] = _mm512_cvtepi32_ps(v);
      sc[s] = _mm512_mul_ps(sw, _mm512_set1_ps(xp.dxh[2 * c + (s >> 1)]));
    }
    f.add4(is, sc);
  }
}

// Q8_0 terms (one per 32-element block) of 16 rows: codes made unsigned by + 128 (xor 0x80),
// 128 sum(x) taken off; two rows per zmm.
void terms_q8_0_16(const uint8_t* w, const int32_t* offs, __m512i lane_off, const GpuActQ8& x, const int32_t* xsum,
                   int64_t n32, Folder16& f, const NextGroup& ng) {
  constexpr int bb = 34;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const bool pf_row = gpu_dot_prefetch() == Prefetch::kRow;
  for (int64_t j = 0; j < n32; ++j) {
    ng.step(j);
    const __m512i xv = bcast_256(x.qs + 32 * j);
    __m512i z[8];
    for (int i = 0; i < 8; ++i) {
      const uint8_t* b0 = w + offs[i] + bb * j;
      const uint8_t* b1 = w + offs[i + 8] + bb * j;
      if (pf_row) {
        _mm_prefetch(reinterpret_cast<const char*>(b0 + bb * 16), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b1 + bb * 16), _MM_HINT_T0);
      }
      z[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(load_2x256(b0 + 2, b1 + 2), flip), xv);
    }
    const __m512i sum = _mm512_sub_epi32(reduce_rows8(z), _mm512_set1_epi32(128 * xsum[j]));
    const __m512i words = _mm512_i32gather_epi32(lane_off, w + bb * j, 1);
    const __m512 sw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
    f.add(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(sw, _mm512_set1_ps(x.d[j])));
  }
}

// MXFP4 terms of 16 rows: four rows' 16 code bytes per zmm, as they lie (no expansion):
// low nibbles (elements 0-15, decoded + 12) against the block's first 16 activations, high
// nibbles (16-31) against the last 16, 12 sum(x) taken off. Per 16 rows and block: 8 pshufb,
// 12 inserts and 6 cross-lane permutes, where two rows per zmm with the nibbles expanded in
// place took 8 pshufb, 16 inserts / qword permutes and 14 cross-lane permutes (counted from
// the source; MXFP4 was the slowest format on the H200 host, 55% of read, so possibly bound
// by these port-5 operations; not measured there yet).
void terms_mxfp4_16(const uint8_t* w, const int32_t* offs, __m512i lane_off, const GpuActQ8& x, const int32_t* xsum,
                    int64_t n32, Folder16& f, const NextGroup& ng) {
  constexpr int bb = 17;
  const __m512i lut = e2m1_lut12(), m4 = _mm512_set1_epi8(0x0F);
  const bool pf_row = gpu_dot_prefetch() == Prefetch::kRow;
  for (int64_t j = 0; j < n32; ++j) {
    ng.step(j);
    const __m512i xlo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 32 * j)));
    const __m512i xhi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 32 * j + 16)));
    __m512i z[4];
    for (int k = 0; k < 4; ++k) {
      const uint8_t* b[4];
      for (int c = 0; c < 4; ++c) {
        b[c] = w + offs[k + 4 * c] + bb * j + 1;
        if (pf_row) _mm_prefetch(reinterpret_cast<const char*>(b[c] + bb * 16), _MM_HINT_T0);
      }
      __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0])));
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1])), 1);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[2])), 2);
      v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[3])), 3);
      const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
      const __m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
      z[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
    }
    const __m512i sum = _mm512_sub_epi32(reduce_rows4(z), _mm512_set1_epi32(12 * xsum[j]));
    const __m512i words = _mm512_i32gather_epi32(lane_off, w + bb * j, 1);
    const __m512 sw = e8m0_half16(_mm512_and_si512(words, _mm512_set1_epi32(0xFF)));
    f.add(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(sw, _mm512_set1_ps(x.d[j])));
  }
}

// The AVX-512 row kernels for the shared driver (gpu_dot_rows.h): lane l of the folded
// terms is row rows[l] of the group (the reductions' order), its scale word gathered from
// the row's offset.
struct Avx512Rows {
  static constexpr int kG = moe_cpu::detail::kG;
  using Folder = Folder16;
  static bool needs_aux(GgmlType) { return true; }
  static const int* lane_rows(GgmlType type) {
    return (type == GgmlType::NVFP4 ? kRowsNv : type == GgmlType::MXFP4 ? kRowsMx : kRowsQ8).data();
  }
  static void terms(GgmlType type, const uint8_t* w, const int32_t* offs, const GpuActQ8& x, const GpuActAux* aux,
                    int64_t k, Folder& f, const NextGroup& ng) {
    const int* rows = lane_rows(type);
    alignas(64) int32_t loffs[kG];  // lane l
    for (int l = 0; l < kG; ++l) loffs[l] = offs[rows[l]];
    const __m512i lane_off = _mm512_load_si512(loffs);
    if (type == GgmlType::NVFP4 && gpu_dot_prefetch() == Prefetch::kRow)
      terms_nvfp4_16<true>(w, offs, lane_off, *aux, k / 64, f, ng);
    else if (type == GgmlType::NVFP4)
      terms_nvfp4_16<false>(w, offs, lane_off, *aux, k / 64, f, ng);
    else if (type == GgmlType::MXFP4)
      terms_mxfp4_16(w, offs, lane_off, x, aux->sum.data(), k / 32, f, ng);
    else
      terms_q8_0_16(w, offs, lane_off, x, aux->sum.data(), k / 32, f, ng);
  }
};

}  // namespace

bool gpu_dot_q8_rows_avx512(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes,
                            int64_t n_rows, const GpuActQ8& x, int64_t k, float* out) {
  return gpu_dot_q8_row_groups<Avx512Rows>(plan, type, w, row_bytes, n_rows, x, k, out);
}

bool gpu_dot_float_rows_avx512(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x,
                               int64_t k, float* out) {
  if (type != GgmlType::BF16 || k % 32 != 0) return false;
  // Group g: pieces 16 g .. 16 g + 15; lane l = 4 c + j holds piece 16 g + 4 j + c (the
  // order the transposes below leave), xt[g][i][l] its element i of x.
  const int64_t n_pc = k / 8, n_g = (n_pc + 15) / 16;
  thread_local std::vector<float> xt;
  xt.assign(static_cast<size_t>(n_g * 128), 0.0f);
  for (int64_t g = 0; g < n_g; ++g)
    for (int l = 0; l < 16; ++l) {
      const int64_t p = 16 * g + 4 * (l % 4) + l / 4;
      if (p >= n_pc) continue;
      for (int i = 0; i < 8; ++i) xt[static_cast<size_t>(128 * g + 16 * i + l)] = x[8 * p + i];
    }
  // Lane t of the un-permuted accumulators (piece mod 16 = t) is lane 4 (t % 4) + t / 4.
  const __m512i unperm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i hi16 = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int tail_q = static_cast<int>((n_pc % 16) / 4);  // quarters (4 pieces) of a partial last group
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const NextGroup ng(w, row_bytes, r, 1, n_rows, n_g);  // the next row
    for (int64_t g = 0; g < n_g; ++g) {
      ng.step(g);
      const bool part = g == n_g - 1 && tail_q != 0;
      __m512i e[4], o[4];
      for (int j = 0; j < 4; ++j) {
        const __m512i v = part && j >= tail_q ? _mm512_setzero_si512()
                                              : _mm512_loadu_si512(row + 2 * (128 * g + 32 * j));
        e[j] = _mm512_slli_epi32(v, 16);     // elements 2d of each piece, as fp32
        o[j] = _mm512_and_si512(v, hi16);   // elements 2d + 1
      }
      // Per 128-bit chunk c, a 4 x 4 transpose: fe[d] lane 4 c + j = element 2d of piece 4 j + c.
      __m512 fe[4], fo[4];
      auto transpose = [](const __m512i (&a)[4], __m512 (&t)[4]) {
        const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
        t[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi64(t0, t2));
        t[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi64(t0, t2));
        t[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi64(t1, t3));
        t[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi64(t1, t3));
      };
      transpose(e, fe);
      transpose(o, fo);
      const float* xg = xt.data() + 128 * g;
      __m512 p = _mm512_setzero_ps();
      for (int d = 0; d < 4; ++d) {
        p = _mm512_fmadd_ps(fe[d], _mm512_loadu_ps(xg + 16 * (2 * d)), p);
        p = _mm512_fmadd_ps(fo[d], _mm512_loadu_ps(xg + 16 * (2 * d + 1)), p);
      }
      // acc = fma(part, 1, acc) = acc + part; lanes of missing pieces untouched.
      const __mmask16 m = part ? static_cast<__mmask16>(0x1111 * ((1u << tail_q) - 1)) : static_cast<__mmask16>(0xFFFF);
      __m512& a = acc[g & 1];
      a = _mm512_mask_add_ps(a, m, a, p);
    }
    // The xor lane tree over the 32 accumulators (piece mod 32 = 16 h + t).
    __m512 v = _mm512_add_ps(_mm512_permutexvar_ps(unperm, acc[0]), _mm512_permutexvar_ps(unperm, acc[1]));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xEE));  // lanes i += i + 8
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x55));  // i += i + 4
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xEE));        // i += i + 2
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x55));        // i += i + 1
    out[r] = _mm512_cvtss_f32(v);
  }
  return true;
}

}  // namespace ft::moe_cpu::detail
