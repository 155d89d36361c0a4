// The GPU sampler's sort keys (src/cuda/sample_keys.cuh) on the host: ascending keys must be
// the CPU sampler's candidate order (logit descending, id ascending, -0 == +0), and a key
// must give back its logit and id. Needs no GPU.
#include "cuda/sample_keys.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace ft::cuda::sample_detail {
namespace {

TEST(CudaOpsSampleKeys, OrderIsLogitDescendingThenId) {
  std::mt19937 rng(3);
  std::vector<float> pool = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, 3.5f, -3.5f,
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  std::normal_distribution<float> nd(0.0f, 10.0f);
  for (int i = 0; i < 50; ++i) pool.push_back(nd(rng));
  for (int64_t n_vocab : {2, 1000, 262144}) {
    const int b = id_bits(n_vocab);
    EXPECT_GE(int64_t{1} << b, n_vocab);
    std::uniform_int_distribution<int64_t> id(0, n_vocab - 1);
    std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
    for (int rep = 0; rep < 20000; ++rep) {
      const float la = pool[pick(rng)], lb = pool[pick(rng)];
      const auto ia = static_cast<int32_t>(id(rng)), ib = static_cast<int32_t>(id(rng));
      const bool cpu_before = la > lb || (la == lb && ia < ib);  // engine/sampler.cpp by_logit
      ASSERT_EQ(make_key(la, ia, b) < make_key(lb, ib, b), cpu_before) << la << "/" << ia << " vs " << lb << "/" << ib;
      const uint64_t k = make_key(la, ia, b);
      ASSERT_EQ(key_id(k, b), ia);
      ASSERT_EQ(key_logit(k, b), la);  // -0 comes back as +0, which compares equal
    }
  }
}

TEST(CudaOpsSampleKeys, PenaltyAsCpu) {
  EXPECT_EQ(penalise(2.0f, 1.3f), 2.0f / 1.3f);
  EXPECT_EQ(penalise(-2.0f, 1.3f), -2.0f * 1.3f);
  EXPECT_EQ(penalise(0.0f, 1.3f), 0.0f);
}

}  // namespace
}  // namespace ft::cuda::sample_detail
