// RoPE and RMSNorm against straightforward double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/norm.h"
#include "engine/rope.h"
#include "test_util.h"

namespace ft::engine {
namespace {

// README §C.4 written out directly, in double.
void rope_ref(const model::RopeParams& p, const float* ff, int64_t pos, bool neox, float* x,
              int64_t hd) {
  const int n = p.n_rot;
  const std::vector<float> in(x, x + hd);
  double lo = 0, hi = 0;
  auto corr = [&](double beta) {
    return n * std::log(p.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log((double)p.freq_base));
  };
  if (p.ext_factor != 0) {
    lo = std::max(0.0, std::floor(corr(p.beta_fast)));
    hi = std::min(n - 1.0, std::ceil(corr(p.beta_slow)));
  }
  for (int i = 0; i < n / 2; ++i) {
    const double extrap = pos * std::pow((double)p.freq_base, -2.0 * i / n) / (ff ? ff[i] : 1.0);
    const double interp = p.freq_scale * extrap;
    double theta = interp, ms = p.attn_factor;
    if (p.ext_factor != 0) {
      const double ramp = (1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0)) * p.ext_factor;
      theta = interp * (1 - ramp) + extrap * ramp;
      ms *= 1 + 0.1 * std::log(1 / p.freq_scale);
    }
    const int a = neox ? i : 2 * i, b = neox ? i + n / 2 : 2 * i + 1;
    const double c = std::cos(theta) * ms, s = std::sin(theta) * ms;
    x[a] = static_cast<float>(in[a] * c - in[b] * s);
    x[b] = static_cast<float>(in[a] * s + in[b] * c);
  }
}

struct RopeCase {
  bool neox;
  int n_rot;
  bool ff;
  bool yarn;
};

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesReference) {
  const RopeCase c = GetParam();
  const int64_t hd = 64, n_head = 3, n_tok = 5, pos0 = 37;
  model::RopeParams p;
  p.type = c.neox ? model::RopeType::kNeox : model::RopeType::kNorm;
  p.n_rot = c.n_rot;
  p.freq_base = 10000.0f;
  p.n_ctx_orig = 64;
  if (c.yarn) {
    p.freq_scale = 0.25f;
    p.ext_factor = 1.0f;
  }
  std::vector<float> ff(c.n_rot / 2);
  for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.5f * static_cast<float>(i % 5);
  const float* ffp = c.ff ? ff.data() : nullptr;

  auto x = test::randn(n_tok * n_head * hd, 1);
  auto ref = x;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t h = 0; h < n_head; ++h) rope_ref(p, ffp, pos0 + t, c.neox, ref.data() + (t * n_head + h) * hd, hd);

  ThreadPool pool(2);
  Exec ex{&pool, ActType::kF32};
  RopeCache rc;
  rc.build(p, ffp, pos0, n_tok);
  rope_apply(ex, rc, x.data(), n_head * hd, n_tok, n_head, hd);
  // fp32 angle recurrence vs double pow: rounding-level differences grow with position.
  EXPECT_LT(test::max_abs_diff(x, ref), 2e-4f);
  // Elements past n_rot are untouched.
  if (c.n_rot < hd) {
    const auto orig = test::randn(n_tok * n_head * hd, 1);
    for (int64_t i = c.n_rot; i < hd; ++i) EXPECT_EQ(x[i], orig[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeTest,
                         ::testing::Values(RopeCase{false, 64, false, false}, RopeCase{true, 64, false, false},
                                           RopeCase{false, 64, true, false}, RopeCase{true, 32, false, false},
                                           RopeCase{true, 64, false, true}, RopeCase{false, 64, true, true}));

// NORM and NEOX rotate different pairs: the same input gives different outputs.
TEST(Rope, NormAndNeoxDiffer) {
  model::RopeParams p;
  p.n_rot = 8;
  p.n_ctx_orig = 64;
  std::vector<float> a = test::randn(8, 3), b = a;
  rope_ref(p, nullptr, 5, false, a.data(), 8);
  rope_ref(p, nullptr, 5, true, b.data(), 8);
  EXPECT_GT(test::max_abs_diff(a, b), 1e-2f);
}

// Position 0 is the identity (theta = 0) without yarn.
TEST(Rope, PositionZeroIsIdentity) {
  model::RopeParams p;
  p.n_rot = 16;
  p.type = model::RopeType::kNeox;
  ThreadPool pool(1);
  Exec ex{&pool, ActType::kF32};
  RopeCache rc;
  rc.build(p, nullptr, 0, 1);
  auto x = test::randn(16, 4), y = x;
  rope_apply(ex, rc, y.data(), 16, 1, 1, 16);
  EXPECT_EQ(x, y);
}

TEST(RmsNorm, MatchesReference) {
  const int64_t n = 300, rows = 4;
  const auto x = test::randn(n * rows, 5, 3.0f);
  const auto w = test::randn(n, 6);
  ThreadPool pool(2);
  for (ActType act : {ActType::kF32, ActType::kBF16}) {
    Exec ex{&pool, act};
    std::vector<float> y(n * rows), yn(n * rows);
    rmsnorm(ex, x.data(), n, w.data(), n, 1e-5f, rows, y.data(), n);
    rmsnorm(ex, x.data(), n, nullptr, n, 1e-5f, rows, yn.data(), n);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += (double)x[r * n + i] * x[r * n + i];
      const double sc = 1.0 / std::sqrt(ss / n + 1e-5);
      for (int64_t i = 0; i < n; ++i) {
        const double want = x[r * n + i] * sc * w[i];
        const double tol = act == ActType::kF32 ? 1e-5 : 1e-2 * std::fabs(want) + 1e-6;
        ASSERT_NEAR(y[r * n + i], want, tol);
        ASSERT_NEAR(yn[r * n + i], x[r * n + i] * sc, act == ActType::kF32 ? 1e-5 : 1e-2 * std::fabs(x[r * n + i] * sc) + 1e-6);
        if (act == ActType::kBF16) {
          ASSERT_EQ(y[r * n + i], round_act(act, y[r * n + i]));
        }
      }
    }
  }
}

TEST(RmsNorm, PerHead) {
  const int64_t hd = 16, nh = 3, n_tok = 2, ld = 64;
  auto x = test::randn(n_tok * ld, 7);
  const auto w = test::randn(hd, 8);
  auto want = x;
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t h = 0; h < nh; ++h) {
      rmsnorm_row(want.data() + t * ld + h * hd, w.data(), hd, 1e-6f, want.data() + t * ld + h * hd, ActType::kF32);
    }
  }
  ThreadPool pool(2);
  Exec ex{&pool, ActType::kF32};
  rmsnorm_heads(ex, x.data(), ld, n_tok, nh, hd, w.data(), 1e-6f);
  EXPECT_EQ(x, want);  // untouched tail of each row included
}

}  // namespace
}  // namespace ft::engine
