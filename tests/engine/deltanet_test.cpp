// Gated DeltaNet (engine/deltanet.h, conv1d.h) against slow, obviously-correct references
// written from the spec (shared/spec/arch/qwen35.md §3.2) in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/threadpool.h"
#include "engine/conv1d.h"
#include "engine/deltanet.h"
#include "test_util.h"

namespace ft::engine {
namespace {

using Mat = std::vector<std::vector<double>>;  // [row = value index][col = key index]

// S = e^g S;  u = beta (v - S k);  S = S + u k^T;  o = S q / sqrt(d), as matrix algebra.
std::vector<double> ref_step(Mat& S, const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, double g, double beta) {
  const size_t d = q.size();
  for (auto& row : S)
    for (auto& x : row) x *= std::exp(g);
  std::vector<double> Sk(d, 0.0), u(d), o(d, 0.0);
  for (size_t r = 0; r < d; ++r)
    for (size_t c = 0; c < d; ++c) Sk[r] += S[r][c] * k[c];
  for (size_t r = 0; r < d; ++r) u[r] = beta * (v[r] - Sk[r]);
  for (size_t r = 0; r < d; ++r)
    for (size_t c = 0; c < d; ++c) S[r][c] += u[r] * k[c];
  for (size_t r = 0; r < d; ++r) {
    for (size_t c = 0; c < d; ++c) o[r] += S[r][c] * q[c];
    o[r] /= std::sqrt(static_cast<double>(d));
  }
  return o;
}

std::vector<double> to_d(const float* p, size_t n) { return std::vector<double>(p, p + n); }

TEST(DeltaRule, StepMatchesMatrixReference) {
  const int64_t d = 32;
  std::vector<float> S(static_cast<size_t>(d * d), 0.0f);
  Mat Sref(d, std::vector<double>(d, 0.0));
  for (int step = 0; step < 12; ++step) {
    auto q = test::randn(d, 100 + step), k = test::randn(d, 200 + step), v = test::randn(d, 300 + step);
    const float g = -0.05f - 0.1f * static_cast<float>(step % 5), beta = 0.2f + 0.05f * static_cast<float>(step);
    std::vector<float> o(d);
    delta_rule_step(S.data(), q.data(), k.data(), v.data(), g, beta, d, o.data());
    const auto oref = ref_step(Sref, to_d(q.data(), d), to_d(k.data(), d), to_d(v.data(), d), g, beta);
    for (int64_t r = 0; r < d; ++r) {
      ASSERT_NEAR(o[r], oref[r], 1e-4 * (1 + std::fabs(oref[r]))) << "step " << step << " row " << r;
      for (int64_t c = 0; c < d; ++c) ASSERT_NEAR(S[r * d + c], Sref[r][c], 1e-4 * (1 + std::fabs(Sref[r][c])));
    }
  }
}

// One layer's token mixing straight from the spec: the conv over the whole history, L2
// norms, gates, value head j reading key head j mod H_k, gated RMSNorm.
std::vector<double> ref_layer(const DeltaNetShape& s, const DeltaNetWeights& w, const std::vector<float>& in,
                              int64_t n_tok) {
  const int64_t d = s.d_head, Hk = s.n_k_heads, Hv = s.n_v_heads, K = s.d_conv;
  const int64_t conv_dim = s.conv_dim(), value_dim = s.value_dim(), ld = s.in_dim();
  std::vector<Mat> S(Hv, Mat(d, std::vector<double>(d, 0.0)));
  std::vector<double> out(static_cast<size_t>(n_tok * value_dim));
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* row = in.data() + t * ld;
    std::vector<double> y(conv_dim);
    for (int64_t c = 0; c < conv_dim; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t tt = t - (K - 1) + j;  // inputs before the sequence are 0
        if (tt >= 0) sum += w.conv1d[c * K + j] * in[tt * ld + c];
      }
      y[c] = sum / (1 + std::exp(-sum));
    }
    auto head = [&](int64_t off) {
      std::vector<double> h(y.begin() + off, y.begin() + off + d);
      return h;
    };
    auto l2 = [&](std::vector<double> h) {
      double ss = 0;
      for (double x : h) ss += x * x;
      for (double& x : h) x /= std::sqrt(ss + s.eps);
      return h;
    };
    for (int64_t j = 0; j < Hv; ++j) {
      const int64_t i = j % Hk;
      const double beta = 1 / (1 + std::exp(-row[conv_dim + value_dim + j]));
      const double g = std::log1p(std::exp(row[conv_dim + value_dim + Hv + j] + w.dt_bias[j])) * w.a[j];
      auto o = ref_step(S[j], l2(head(i * d)), l2(head(Hk * d + i * d)), head(2 * Hk * d + j * d), g, beta);
      double ss = 0;
      for (double x : o) ss += x * x;
      const double rms = std::sqrt(ss / d + s.eps);
      for (int64_t r = 0; r < d; ++r) {
        const double z = row[conv_dim + j * d + r];
        out[t * value_dim + j * d + r] = o[r] / rms * w.norm[r] * z / (1 + std::exp(-z));
      }
    }
  }
  return out;
}

struct Layer {
  DeltaNetShape s{2, 4, 16, 4, 1e-6f};  // H_v = 2 H_k: the tiled head mapping matters
  std::vector<float> conv1d, dt, a, norm;
  DeltaNetWeights w;
  Layer() {
    conv1d = test::randn(s.conv_dim() * s.d_conv, 1, 0.5f);
    dt = test::randn(s.n_v_heads, 2);
    a = test::randn(s.n_v_heads, 3);
    for (auto& x : a) x = -0.1f - std::fabs(x);
    norm = test::randn(s.d_head, 4, 0.3f);
    for (auto& x : norm) x += 1.0f;
    w = {conv1d.data(), dt.data(), a.data(), norm.data()};
  }
};

// Runs deltanet over n_tok tokens in the given batch sizes, state carried between calls.
std::vector<float> run(const Layer& L, const std::vector<float>& in, const std::vector<int64_t>& batches, int threads) {
  ThreadPool pool(threads);
  const Exec ex{&pool, ActType::kF32};
  const DeltaNetShape& s = L.s;
  DeltaNetState st(s, {1}, 64);
  int64_t n_tok = 0;
  for (int64_t b : batches) n_tok += b;
  std::vector<float> out(static_cast<size_t>(n_tok * s.value_dim()));
  int64_t t0 = 0;
  for (int64_t b : batches) {
    deltanet(ex, s, L.w, st.conv(0), st.ssm(0), in.data() + t0 * s.in_dim(), s.in_dim(), b,
             out.data() + t0 * s.value_dim(), s.value_dim(), st.y.data());
    t0 += b;
  }
  return out;
}

TEST(DeltaNet, LayerMatchesSpecReference) {
  const Layer L;
  const int64_t n_tok = 40;
  const auto in = test::randn(n_tok * L.s.in_dim(), 9);
  const auto out = run(L, in, {n_tok}, 3);
  const auto ref = ref_layer(L.s, L.w, in, n_tok);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << "element " << i;
}

TEST(DeltaNet, BatchSplitAndThreadsGiveIdenticalOutput) {
  // The state must carry everything: a prompt in one batch, in pieces, or token by token
  // gives the same bits.
  const Layer L;
  const int64_t n_tok = 24;
  const auto in = test::randn(n_tok * L.s.in_dim(), 11);
  const auto whole = run(L, in, {n_tok}, 1);
  EXPECT_EQ(whole, run(L, in, {5, 1, 3, 15}, 2));
  EXPECT_EQ(whole, run(L, in, std::vector<int64_t>(n_tok, 1), 3));
}

TEST(DeltaNetState, ResetZeroesAndOnlyRecurrentLayersGetState) {
  const DeltaNetShape s{2, 4, 16, 4, 1e-6f};
  DeltaNetState st(s, {1, 0, 1}, 8);
  EXPECT_EQ(st.bytes(), 2 * sizeof(float) * static_cast<size_t>(s.conv_dim() * 3 + 4 * 16 * 16));
  st.ssm(2)[5] = 1.0f;
  st.conv(0)[3] = 2.0f;
  st.reset();
  EXPECT_EQ(st.ssm(2)[5], 0.0f);
  EXPECT_EQ(st.conv(0)[3], 0.0f);
}

TEST(Conv1d, RollingStateEqualsFullHistory) {
  const int64_t n_ch = 5, k = 4, n_tok = 9;
  const auto x = test::randn(n_ch * n_tok, 21), w = test::randn(n_ch * k, 22);
  ThreadPool pool(2);
  const Exec ex{&pool, ActType::kF32};
  std::vector<float> state(n_ch * (k - 1), 0.0f), y(n_ch * n_tok);
  conv1d_causal_silu(ex, x.data(), n_ch, 4, n_ch, w.data(), k, state.data(), y.data(), n_ch);
  conv1d_causal_silu(ex, x.data() + 4 * n_ch, n_ch, n_tok - 4, n_ch, w.data(), k, state.data(), y.data() + 4 * n_ch,
                     n_ch);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t c = 0; c < n_ch; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j)
        if (t - (k - 1) + j >= 0) sum += w[c * k + j] * x[(t - (k - 1) + j) * n_ch + c];
      ASSERT_NEAR(y[t * n_ch + c], sum / (1 + std::exp(-sum)), 1e-5) << "t " << t << " c " << c;
    }
  // The state holds the last k-1 raw inputs.
  for (int64_t c = 0; c < n_ch; ++c)
    for (int64_t j = 0; j < k - 1; ++j) EXPECT_EQ(state[c * (k - 1) + j], x[(n_tok - (k - 1) + j) * n_ch + c]);
}

}  // namespace
}  // namespace ft::engine
