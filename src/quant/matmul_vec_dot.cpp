// The q8 route for F32 / F16 / BF16 weights where llama.cpp's CPU backend takes one dot
// product per (row, token) instead of llamafile's tiled sgemm: one token (sgemm needs two),
// a matrix whose row count is not a multiple of 4, or k not a multiple of 8. Our fp32
// kernels sum in the sgemm's order (8 lanes, fused, folded at the end); these are the
// x86 AVX2 vec_dot orders, so the results are bit-identical to llama.cpp's:
//   F32   ggml_vec_dot_f32: 4 x 8 fused lanes over steps of 32, folded (0+2, 1+3), (0+1),
//         lane pairs (l, l+4), then (0+1) + (2+3); the tail's rounded products added to
//         that fp32 sum;
//   F16   the same lanes and folding; the tail added in double;
//   BF16  4 x 8 lanes over steps of 32 (its mul + add, contracted to one fused step by the
//         build), folded as (0+2) + (1+3), lane pairs (l, l+4), then (0+2) + (1+3); the
//         tail's rounded products added in double.
// Each step is a correctly rounded IEEE operation (std::fma included), so the plain and
// the AVX2+FMA-clone builds of these loops give the same bits.
// The activations are rounded to the weight type first (act_quant.h), so the products
// are those of ggml's converted copy.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"

#include "core/cpu_features.h"
#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul_kernels.h"

namespace ft::quant::detail {
namespace {

#define FT_VD_INLINE inline __attribute__((always_inline))

// Lanes a[32] folded as ggml's GGML_F32x8_REDUCE.
FT_VD_INLINE float reduce_f32x8(float* a) {
  for (int l = 0; l < 8; ++l) {
    a[l] += a[16 + l];
    a[8 + l] += a[24 + l];
  }
  for (int l = 0; l < 8; ++l) a[l] += a[8 + l];
  const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
  return (t0 + t1) + (t2 + t3);
}

// Weight element i of a raw row, widened to fp32 (exact for all three types).
template <GgmlType T>
FT_VD_INLINE float load_w(const uint8_t* row, int64_t i) {
  uint16_t h;
  if constexpr (T == GgmlType::F32) {
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
  } else {
    std::memcpy(&h, row + 2 * i, 2);
    if constexpr (T == GgmlType::BF16)
      return bf16_to_f32(h);
    else
      return f16_to_f32(h);
  }
}

template <GgmlType T>
FT_VD_INLINE double dot_row(const uint8_t* w, const float* x, int64_t n) {
  float a[32] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 32; ++l) a[l] = std::fma(load_w<T>(w, i + l), x[i + l], a[l]);
  if constexpr (T == GgmlType::BF16) {
    float c[8], g[4];
    for (int l = 0; l < 8; ++l) c[l] = (a[l] + a[16 + l]) + (a[8 + l] + a[24 + l]);
    for (int l = 0; l < 4; ++l) g[l] = c[l + 4] + c[l];
    double d = static_cast<double>((g[0] + g[2]) + (g[1] + g[3]));
    for (; i < n; ++i) d += static_cast<double>(load_w<T>(w, i) * x[i]);
    return d;
  } else {
    const float s = reduce_f32x8(a);
    if constexpr (T == GgmlType::F16) {
      double d = s;
      for (; i < n; ++i) d += static_cast<double>(load_w<T>(w, i) * x[i]);
      return d;
    } else {
      // Rounded products added one by one; fma(a, b, -0) is the rounded product, written
      // so that the compiler cannot contract it with the add in the FMA clone.
      float f = s;
      for (; i < n; ++i) f += std::fma(load_w<T>(w, i), x[i], -0.0f);
      return f;
    }
  }
}

// Rows [r0, r1) of one weight type, all tokens (x already rounded to the type).
template <GgmlType T>
FT_VD_INLINE void rows_body(const MatmulArgs& a, const float* x, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < a.n_tok; ++t)
      a.y[t * a.ldy + r] = matmul_finish(a, r, static_cast<float>(dot_row<T>(a.w + r * a.row_bytes, x + t * a.k, a.k)));
}

FT_VD_INLINE void run_body(const MatmulArgs& a, const float* x, int64_t r0, int64_t r1) {
  switch (a.type) {
    case GgmlType::BF16: return rows_body<GgmlType::BF16>(a, x, r0, r1);
    case GgmlType::F16: return rows_body<GgmlType::F16>(a, x, r0, r1);
    default: return rows_body<GgmlType::F32>(a, x, r0, r1);
  }
}

__attribute__((target("avx2,fma"))) void run_hw(const MatmulArgs& a, const float* x, int64_t r0, int64_t r1) {
  run_body(a, x, r0, r1);
}

const bool kHw = isa_supported(Isa::kAvx2);

}  // namespace

bool ggml_takes_vec_dot(const MatmulArgs& a) {
  if (a.type != GgmlType::F32 && a.type != GgmlType::F16 && a.type != GgmlType::BF16) return false;
  return a.n_tok < 2 || (a.n_rows > 0 && a.n_rows % 4 != 0) || a.k % 8 != 0;
}

void matmul_vec_dot(const MatmulArgs& a, int64_t r0, int64_t r1) {
  thread_local std::vector<float> xr;
  xr.resize(static_cast<size_t>(a.n_tok * a.k));
  for (int64_t t = 0; t < a.n_tok; ++t) round_trip_act(act_dot_type(a.type), a.x + t * a.ldx, xr.data() + t * a.k, a.k);
  if (kHw)
    run_hw(a, xr.data(), r0, r1);
  else
    run_body(a, xr.data(), r0, r1);
}

}  // namespace ft::quant::detail
