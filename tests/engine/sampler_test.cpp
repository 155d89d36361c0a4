#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ft::engine {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.0f, 2.0f, 1.5f};

TEST(Sampler, GreedyIsFirstArgmax) {
  SamplerParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(kLogits.data(), 8), 1);
  EXPECT_EQ(argmax(kLogits.data(), 8), 1);
}

TEST(Sampler, TopK1AndTinyTopPAreGreedy) {
  for (int mode = 0; mode < 2; ++mode) {
    SamplerParams p;
    p.temperature = 5.0f;
    p.top_k = mode == 0 ? 1 : 0;
    p.top_p = mode == 1 ? 1e-6f : 1.0f;
    p.min_p = 0.0f;
    Sampler s(p);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(kLogits.data(), 8), 1);
  }
}

TEST(Sampler, SeedIsReproducibleAndMatters) {
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  auto run = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> v;
    for (int i = 0; i < 64; ++i) v.push_back(s.sample(kLogits.data(), 8));
    return v;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

// top-k 3 at a high temperature only ever returns the three largest logits (1, 4, 2), and the
// frequencies follow softmax(logits / T) over them.
TEST(Sampler, TopKAndTemperatureDistribution) {
  SamplerParams p;
  p.temperature = 2.0f;
  p.top_k = 3;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 3;
  Sampler s(p);
  std::vector<int> count(8, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) count[s.sample(kLogits.data(), 8)]++;
  EXPECT_EQ(count[1] + count[4] + count[2], n);
  const double z = 2 * std::exp(3.0 / 2) + std::exp(2.5 / 2);
  EXPECT_NEAR(count[1] / double(n), std::exp(1.5) / z, 0.02);
  EXPECT_NEAR(count[2] / double(n), std::exp(1.25) / z, 0.02);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // keep tokens with p >= 0.5 * p_max: logits >= 3 - ln 2 = 2.31
  Sampler s(p);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = s.sample(kLogits.data(), 8);
    EXPECT_TRUE(t == 1 || t == 4 || t == 2) << t;
  }
}

TEST(Sampler, RepetitionPenaltyMovesGreedyChoice) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  s.accept(1);
  s.accept(4);  // both 3.0 logits become 1.5: 2.5 (id 2) wins
  EXPECT_EQ(s.sample(kLogits.data(), 8), 2);
}

}  // namespace
}  // namespace ft::engine
