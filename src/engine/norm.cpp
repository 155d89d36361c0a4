#include "engine/norm.h"

#include <cmath>

namespace ft::engine {

void rmsnorm_row(const float* x, const float* w, int64_t n, float eps, float* y, ActType act) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = round_act(act, x[i] * scale * w[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = round_act(act, x[i] * scale);
  }
}

void rmsnorm(const Exec& ex, const float* x, int64_t ldx, const float* w, int64_t n, float eps,
             int64_t n_rows, float* y, int64_t ldy) {
  const ActType act = ex.act;
  ex.pool->parallel_for(n_rows, ex.pool->grain_for(n_rows), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) rmsnorm_row(x + r * ldx, w, n, eps, y + r * ldy, act);
  });
}

void rmsnorm_heads(const Exec& ex, float* x, int64_t ld, int64_t n_tok, int64_t n_head, int64_t hd,
                   const float* w, float eps) {
  const ActType act = ex.act;
  const int64_t n = n_tok * n_head;
  ex.pool->parallel_for(n, ex.pool->grain_for(n), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = x + (i / n_head) * ld + (i % n_head) * hd;
      rmsnorm_row(row, w, hd, eps, row, act);
    }
  });
}

}  // namespace ft::engine
