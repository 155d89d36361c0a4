#include "engine/linear.h"

#include <algorithm>

#include "core/error.h"

namespace ft::engine {

void Linear::add(const model::ScaledTensor& w, const model::Tensor& bias) {
  add(w.w, w.scale, bias);
}

void Linear::add(const model::Tensor& w, float scale, const model::Tensor& bias) {
  if (!parts_.empty() && w.ne[0] != k_)
    fail("tensor '{}' has {} columns, but the projection it is fused with has {}", w.name, w.ne[0], k_);
  LinearPart p;
  p.w = w;
  p.scale = scale;
  p.bias = bias ? bias.f32() : nullptr;
  p.row0 = rows_;
  k_ = w.ne[0];
  rows_ += w.ne[1];
  parts_.push_back(p);
}

bool Linear::same_type() const {
  for (const auto& p : parts_)
    if (p.w.type != parts_[0].w.type) return false;
  return true;
}

std::vector<float> Linear::row_scales() const {
  std::vector<float> s(static_cast<size_t>(rows_), 1.0f);
  for (const auto& p : parts_) std::fill_n(s.begin() + p.row0, p.rows(), p.scale);
  return s;
}

namespace {

// Computes output rows [r0, r1) of part p (rows relative to the part).
template <bool kRef>
void run_part(const LinearPart& p, ActType act, quant::ActQuant aq, const float* x, int64_t ldx, int64_t n_tok,
              float* y, int64_t ldy, int64_t r0, int64_t r1) {
  quant::MatmulArgs a;
  a.type = p.w.type;
  a.w = p.w.data;
  a.row_bytes = p.w.row_bytes();
  a.k = p.w.ne[0];
  a.x = x;
  a.ldx = ldx;
  a.n_tok = n_tok;
  a.y = y + p.row0;
  a.ldy = ldy;
  a.scale = p.scale;
  // With a bias the rounding waits until the bias is added (one rounding, not two).
  a.round = p.bias ? quant::Round::kNone : round_of(act);
  a.act_quant = aq;
  a.n_rows = p.rows();  // each part is its own matrix in llama.cpp
  if constexpr (kRef)
    quant::matmul_ref(a, r0, r1);
  else
    quant::matmul(a, r0, r1);
  if (p.bias) {
    for (int64_t t = 0; t < n_tok; ++t) {
      float* yt = y + t * ldy + p.row0;
      for (int64_t r = r0; r < r1; ++r) yt[r] = round_act(act, yt[r] + p.bias[r]);
    }
  }
}

// Calls run_part for every part overlapping the global row range [r0, r1).
template <bool kRef>
void run_rows(const Linear& l, ActType act, quant::ActQuant aq, const float* x, int64_t ldx, int64_t n_tok, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  for (const auto& p : l.parts()) {
    const int64_t a = std::max(r0, p.row0), b = std::min(r1, p.row0 + p.rows());
    if (a < b) run_part<kRef>(p, act, aq, x, ldx, n_tok, y, ldy, a - p.row0, b - p.row0);
  }
}

}  // namespace

void linear(const Exec& ex, const Linear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
            int64_t ldy) {
  const ActType act = ex.act;
  // Chunks of a multiple of 16 rows: the kernels block rows by 4-16, and a few chunks per
  // thread even out threads that were descheduled.
  const int64_t grain = ex.pool->grain_for(l.rows(), 16);
  ex.pool->parallel_for(l.rows(), grain, [&](int64_t r0, int64_t r1, int) {
    run_rows<false>(l, act, ex.act_quant, x, ldx, n_tok, y, ldy, r0, r1);
  });
}

void linear_ref(ActType act, const Linear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
                int64_t ldy) {
  run_rows<true>(l, act, quant::ActQuant::kNone, x, ldx, n_tok, y, ldy, 0, l.rows());
}

}  // namespace ft::engine
