// GPU MoE routing (src/cuda/moe_route.h) against engine::moe_route: random logits over
// expert counts and n_used, and exact ties (integer logits, all-equal rows, ties straddling
// the top-k boundary) where the chosen experts and their order come from std::sort's tie
// order. ids must be identical; weights may differ by 2 ulp (exp, see ops_math.cuh).
#include "cuda/moe_route.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/moe.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

void check(const std::vector<float>& logits, int64_t n_expert, int64_t n_tok, int n_used, const std::string& what) {
  SCOPED_TRACE(what + " n_expert " + std::to_string(n_expert) + " n_used " + std::to_string(n_used));
  const int64_t ld = n_expert + 1;
  std::vector<float> l(static_cast<size_t>(n_tok * ld), poison());
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t e = 0; e < n_expert; ++e) l[static_cast<size_t>(t * ld + e)] = logits[static_cast<size_t>(t * n_expert + e)];
  std::vector<int32_t> want_ids(static_cast<size_t>(n_tok * n_used)), order(static_cast<size_t>(n_expert));
  std::vector<float> want_w(want_ids.size()), probs(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tok; ++t)
    engine::moe_route(l.data() + t * ld, n_expert, n_used, probs.data(), order.data(), want_ids.data() + t * n_used,
                      want_w.data() + t * n_used);
  DeviceBuffer dl = to_device(l), dids(want_ids.size() * 4), dw(want_w.size() * 4);
  moe_route(dl.as<float>(), ld, n_expert, n_tok, n_used, dids.as<int32_t>(), dw.as<float>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto ids = to_host<int32_t>(dids, want_ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], want_ids[i]) << "token " << i / n_used << " rank " << i % n_used;
  const Diff d = compare(to_host<float>(dw, want_w.size()), want_w, 2);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
}

TEST(CudaOpsMoeRoute, RandomLogits) {
  FT_OPS_REQUIRE_GPU();
  for (int64_t n_expert : {1, 8, 60, 128, 256})
    for (int n_used : {1, 2, 4, 8}) {
      if (n_used > n_expert) continue;
      const int64_t n_tok = 37;
      check(randn(static_cast<size_t>(n_tok * n_expert), static_cast<uint64_t>(n_expert * 10 + n_used), 2.0f), n_expert,
            n_tok, n_used, "random");
    }
}

TEST(CudaOpsMoeRoute, ExactTies) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(17);
  for (int64_t n_expert : {8, 17, 60, 128, 256})
    for (int n_used : {1, 2, 8}) {
      if (n_used > n_expert) continue;
      const int64_t n_tok = 24;
      // Integer logits from a few values: many exact ties in and around the top k.
      for (int distinct : {1, 2, 3, 5}) {
        std::uniform_int_distribution<int> pick(0, distinct - 1);
        std::vector<float> l(static_cast<size_t>(n_tok * n_expert));
        for (auto& v : l) v = static_cast<float>(pick(rng));
        check(l, n_expert, n_tok, n_used, "ties over " + std::to_string(distinct) + " values");
      }
      // One clear winner, then a tie across the boundary of the top k.
      std::vector<float> l(static_cast<size_t>(n_tok * n_expert), -3.0f);
      for (int64_t t = 0; t < n_tok; ++t) {
        l[static_cast<size_t>(t * n_expert + (t * 5) % n_expert)] = 2.0f;
        for (int64_t j = 0; j < n_used + 1; ++j) l[static_cast<size_t>(t * n_expert + (t + 3 * j + 1) % n_expert)] = 0.5f;
      }
      check(l, n_expert, n_tok, n_used, "boundary tie");
    }
}

}  // namespace
}  // namespace ft::cuda
