#include "engine/geglu.h"

#include <cmath>
#include <vector>

namespace ft::engine {

float gelu_tanh_f32(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

namespace {

// fp16 bits -> fp16(gelu(fp32 of those bits)), built once like ggml_table_gelu_f16.
const std::vector<uint16_t>& gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1u << 16);
    for (uint32_t i = 0; i < t.size(); ++i)
      t[i] = f32_to_f16(gelu_tanh_f32(f16_to_f32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table;
}

}  // namespace

float gelu(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(gelu_table()[f32_to_f16(x)]);
}

void geglu(const Exec& ex, const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h,
           int64_t ldh) {
  const ActType act = ex.act;
  const int64_t n = n_tok * n_ff;
  gelu_table();  // built before the threads race for it
  ex.pool->parallel_for(n, ex.pool->grain_for(n, 64), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / n_ff, j = i % n_ff;
      const float* g = gu + t * ldgu;
      const float x = g[j];
      // x >= 10: ggml multiplies x itself (no table), which is what gelu() returns.
      h[t * ldh + j] = round_act(act, x <= -10.0f ? 0.0f : gelu(x) * g[n_ff + j]);
    }
  });
}

void gelu_mul(const Exec& ex, float* x, int64_t ldx, const float* m, int64_t ldm, int64_t n,
              int64_t n_tok) {
  const ActType act = ex.act;
  gelu_table();
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t i = 0; i < n; ++i) {
      float* v = x + t * ldx + i;
      *v = round_act(act, round_act(act, gelu(*v)) * m[t * ldm + i]);
    }
}

}  // namespace ft::engine
