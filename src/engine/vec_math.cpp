#include "engine/vec_math.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/cpu_features.h"

namespace ft::engine {
namespace {

// The bodies are compiled twice: plainly (std::fma is then a libm call, exact in software
// or through glibc's FMA ifunc) and inlined into clones built for AVX2+FMA, where std::fma
// is one instruction. Both round every step the same way, so they give the same bits.
#define FT_VEC_INLINE inline __attribute__((always_inline))

FT_VEC_INLINE float exp_v_body(float x) {
  const float shift = 0x1.8p23f;  // adding it rounds x/ln2 to an integer in the low bits
  const float z = std::fma(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));  // x - n ln2
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));  // 2^n
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);  // e^b - 1
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  // 2^n outside the normal range: scale in two steps (or saturate to 0 / inf past 192).
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

FT_VEC_INLINE float silu_body(float x) { return x / (1.0f + exp_v_body(0.0f - x)); }

FT_VEC_INLINE float dot_body(const float* x, const float* y, int64_t n) {
  float acc[4][8] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int a = 0; a < 4; ++a)
      for (int l = 0; l < 8; ++l) acc[a][l] = std::fma(x[i + 8 * a + l], y[i + 8 * a + l], acc[a][l]);
  for (int l = 0; l < 8; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < 8; ++l) acc[0][l] += acc[1][l];
  float t[4];
  for (int l = 0; l < 4; ++l) t[l] = acc[0][l] + acc[0][l + 4];
  float s = (t[0] + t[1]) + (t[2] + t[3]);
  // The tail's products rounded, then added (fma(a, b, -0) is the rounded product, and
  // the compiler cannot contract it with the add in the FMA clone).
  for (; i < n; ++i) s += std::fma(x[i], y[i], -0.0f);
  return s;
}

FT_VEC_INLINE void mad_body(float* y, const float* x, float v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], v, y[i]);
}

FT_VEC_INLINE double exp_sum_body(float* x, int64_t i0, int64_t n, float max, bool padded) {
  double sum = 0.0;
  const int64_t n8 = padded ? (n + 7) / 8 * 8 : n / 8 * 8;
  for (int64_t g = i0 / 8 * 8; g < n8; g += 8) {
    float y[8];
    for (int l = 0; l < 8; ++l) {
      const int64_t i = g + l;
      y[l] = i >= i0 && i < n ? (x[i] = exp_v_body(x[i] - max)) : 0.0f;
    }
    const float a = y[0] + y[4], b = y[1] + y[5], c = y[2] + y[6], d = y[3] + y[7];
    sum += static_cast<double>((a + c) + (b + d));
  }
  for (int64_t i = std::max(n8, i0); i < n; ++i) sum += static_cast<double>(x[i] = std::exp(x[i] - max));
  return sum;
}

#define FT_HW __attribute__((target("avx2,fma")))
FT_HW float exp_v_hw(float x) { return exp_v_body(x); }
FT_HW float silu_hw(float x) { return silu_body(x); }
FT_HW float dot_hw(const float* x, const float* y, int64_t n) { return dot_body(x, y, n); }
FT_HW void mad_hw(float* y, const float* x, float v, int64_t n) { mad_body(y, x, v, n); }
FT_HW double exp_sum_hw(float* x, int64_t i0, int64_t n, float max, bool padded) {
  return exp_sum_body(x, i0, n, max, padded);
}

const bool kHw = isa_supported(Isa::kAvx2);

}  // namespace

float exp_v(float x) { return kHw ? exp_v_hw(x) : exp_v_body(x); }
float silu(float x) { return kHw ? silu_hw(x) : silu_body(x); }
float dot_f32(const float* x, const float* y, int64_t n) { return kHw ? dot_hw(x, y, n) : dot_body(x, y, n); }
void mad_f32(float* y, const float* x, float v, int64_t n) {
  if (kHw)
    mad_hw(y, x, v, n);
  else
    mad_body(y, x, v, n);
}

double exp_sum(float* x, int64_t i0, int64_t n, float max, bool padded) {
  return kHw ? exp_sum_hw(x, i0, n, max, padded) : exp_sum_body(x, i0, n, max, padded);
}

}  // namespace ft::engine
