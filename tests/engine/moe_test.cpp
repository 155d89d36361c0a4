#include "engine/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "test_util.h"

namespace ft::engine {
namespace {

TEST(MoeRoute, SoftmaxTopKRenormalised) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f};
  std::vector<float> probs(6);
  std::vector<int32_t> order(6), ids(3);
  std::vector<float> w(3);
  moe_route(logits.data(), 6, 3, probs.data(), order.data(), ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 1, 3}));
  double z = 0;
  for (float l : logits) z += std::exp(l);
  const double p5 = std::exp(3.0) / z, p1 = std::exp(2.0) / z, p3 = std::exp(1.5) / z;
  EXPECT_NEAR(w[0], p5 / (p5 + p1 + p3), 1e-6);
  EXPECT_NEAR(w[1], p1 / (p5 + p1 + p3), 1e-6);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0f, 1e-6);
}

// Exact ties: ggml-cpu's argsort is std::sort with a '>' comparator over 0..n-1; for the
// small expert counts of the tiny test models (<= 16, insertion sort) equal probabilities
// keep ascending expert order. llama.cpp gives the same ids (checked by the parity test).
TEST(MoeRoute, TiesResolveLikeLlamaCpp) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> probs(8), w(4);
  std::vector<int32_t> order(8), ids(4);
  moe_route(logits.data(), 8, 4, probs.data(), order.data(), ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 4, 0}));
  EXPECT_FLOAT_EQ(w[0], w[1]);
  EXPECT_FLOAT_EQ(w[1], w[2]);
}

ExpertWeights make_experts(GgmlType t, int64_t n_expert, int64_t n_embd, int64_t n_ff,
                           std::vector<uint8_t> (&store)[3], std::vector<float> (&scales)[3]) {
  ExpertWeights w;
  w.n_expert = n_expert;
  w.n_embd = n_embd;
  w.n_ff = n_ff;
  w.gate.w = test::make_weight(t, n_embd, n_ff, n_expert, 21, store[0]);
  w.up.w = test::make_weight(t, n_embd, n_ff, n_expert, 22, store[1]);
  w.down.w = test::make_weight(t, n_ff, n_embd, n_expert, 23, store[2]);
  for (int i = 0; i < 3; ++i) {
    scales[i].resize(n_expert);
    for (int64_t e = 0; e < n_expert; ++e) scales[i][e] = std::pow(10.0f, -1.0f - (e + i) % 3);
  }
  w.gate.scale = scales[0].data();
  w.up.scale = scales[1].data();
  w.down.scale = scales[2].data();
  return w;
}

// The grouped, multi-threaded CPU experts against the token-by-token scalar twin, for a
// decode step (one token) and a prefill batch where several tokens share experts.
TEST(MoeExperts, CpuMatchesReference) {
  const int64_t E = 6, n_embd = 128, n_ff = 64;
  const int n_used = 3;
  std::vector<uint8_t> store[3];
  std::vector<float> scales[3];
  const ExpertWeights w = make_experts(GgmlType::NVFP4, E, n_embd, n_ff, store, scales);
  auto moe = make_cpu_experts(w);
  EXPECT_EQ(moe->backend(), "cpu");
  ThreadPool pool(3);
  for (int64_t n_tok : {1, 7}) {
    const auto x = test::randn(n_tok * n_embd, 30 + n_tok);
    std::vector<int32_t> ids(n_tok * n_used);
    std::vector<float> wts(n_tok * n_used);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int r = 0; r < n_used; ++r) {
        ids[t * n_used + r] = static_cast<int32_t>((t * 2 + r * 3) % E);
        wts[t * n_used + r] = 0.5f / (r + 1);
      }
    for (ActType act : {ActType::kF32, ActType::kBF16}) {
      std::vector<float> out(n_tok * n_embd), ref(n_tok * n_embd);
      moe->forward(Exec{&pool, act}, x.data(), n_embd, n_tok, ids.data(), wts.data(), n_used,
                   out.data(), n_embd);
      moe_experts_ref(act, w, x.data(), n_embd, n_tok, ids.data(), wts.data(), n_used, ref.data(), n_embd);
      const float tol = (act == ActType::kF32 ? 1e-4f : 2e-2f) * test::max_abs(ref);
      EXPECT_LT(test::max_abs_diff(out, ref), tol) << n_tok << " " << act_type_name(act);
    }
  }
}

// The per-expert scales matter: dropping them changes the output a lot.
TEST(MoeExperts, ScalesAreApplied) {
  const int64_t E = 4, n_embd = 64, n_ff = 64;
  std::vector<uint8_t> store[3];
  std::vector<float> scales[3];
  ExpertWeights w = make_experts(GgmlType::NVFP4, E, n_embd, n_ff, store, scales);
  ExpertWeights w1 = w;
  w1.gate.scale = w1.up.scale = w1.down.scale = nullptr;
  const auto x = test::randn(n_embd, 40);
  const std::vector<int32_t> ids = {2, 0};
  const std::vector<float> wts = {0.7f, 0.3f};
  std::vector<float> a(n_embd), b(n_embd);
  ThreadPool pool(2);
  make_cpu_experts(w)->forward(Exec{&pool, ActType::kF32}, x.data(), n_embd, 1, ids.data(), wts.data(), 2, a.data(), n_embd);
  make_cpu_experts(w1)->forward(Exec{&pool, ActType::kF32}, x.data(), n_embd, 1, ids.data(), wts.data(), 2, b.data(), n_embd);
  EXPECT_GT(test::max_abs_diff(a, b), 0.5f * test::max_abs(b));
}

}  // namespace
}  // namespace ft::engine
