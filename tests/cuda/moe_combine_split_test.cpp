// cuda::moe_combine_split against its scalar twin, bit for bit: routes split between the two
// sources in several patterns (all GPU, all CPU, alternating, random), 1..8 ranks, every
// rounding, a row stride wider than n_embd (the padding must stay untouched). The host-only
// case shows what the kernel exists for: two partial sums added give other bits.
#include "cuda/moe_combine_split.h"

#include <gtest/gtest.h>

#include <vector>

#include "cuda/check.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

std::vector<int32_t> sides(int64_t n, int pattern, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const bool cpu = pattern == 0 ? false : pattern == 1 ? true : pattern == 2 ? (i % 2 == 1) : (rng() % 3 == 0);
    v[static_cast<size_t>(i)] = cpu ? static_cast<int32_t>(i % 7) : -1;
  }
  return v;
}

TEST(CudaMoeCombineSplit, MatchesTwin) {
  FT_OPS_REQUIRE_GPU();
  struct C {
    int64_t n_tok;
    int n_used;
    int64_t n_embd;
  };
  const C cases[] = {{1, 8, 2048}, {3, 4, 300}, {8, 8, 128}, {2, 1, 64}, {5, 6, 1000}};
  for (const RoundCase& rc : kRounds) {
    for (const C& c : cases) {
      for (int pattern = 0; pattern < 4; ++pattern) {
        SCOPED_TRACE(std::string(rc.name) + " n_tok " + std::to_string(c.n_tok) + " n_used " +
                     std::to_string(c.n_used) + " n_embd " + std::to_string(c.n_embd) + " pattern " +
                     std::to_string(pattern));
        const int64_t n = c.n_tok * c.n_used, ldx = c.n_embd + 5;
        const auto yg = randn(static_cast<size_t>(n * c.n_embd), 1 + static_cast<uint64_t>(n));
        const auto yc = randn(static_cast<size_t>(n * c.n_embd), 2 + static_cast<uint64_t>(n));
        const auto w = randn(static_cast<size_t>(n), 3, 0.3f);
        const auto from_c = sides(n, pattern, 4 + static_cast<uint64_t>(c.n_embd));
        const auto x0 = randn(static_cast<size_t>(c.n_tok * ldx), 5, 4.0f);
        std::vector<float> want = x0;
        moe_combine_split_ref(yg.data(), yc.data(), from_c.data(), w.data(), c.n_tok, c.n_used, c.n_embd,
                              want.data(), ldx, rc.gpu);
        DeviceBuffer dyg = to_device(yg), dyc = to_device(yc), dw = to_device(w), dfrom = to_device(from_c),
                     dx = to_device(x0);
        moe_combine_split(dyg.as<float>(), dyc.as<float>(), dfrom.as<int32_t>(), dw.as<float>(), c.n_tok, c.n_used,
                          c.n_embd, dx.as<float>(), ldx, rc.gpu, nullptr);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        const Diff d = compare(to_host<float>(dx, x0.size()), want, 0);
        ASSERT_EQ(d.bad, 0) << d.first_bad;
      }
    }
  }
}

TEST(CudaMoeCombineSplit, RankOrderDiffersFromTwoPartialSums) {
  // Host only: the rank-order sum vs "GPU ranks summed, CPU ranks summed, then added".
  const int64_t n_tok = 4, n_embd = 512;
  const int n_used = 8;
  const int64_t n = n_tok * n_used;
  const auto yg = randn(static_cast<size_t>(n * n_embd), 11), yc = randn(static_cast<size_t>(n * n_embd), 12);
  const auto w = randn(static_cast<size_t>(n), 13, 0.3f);
  const auto from_c = sides(n, 2, 0);
  std::vector<float> split(static_cast<size_t>(n_tok * n_embd), 0.0f);
  moe_combine_split_ref(yg.data(), yc.data(), from_c.data(), w.data(), n_tok, n_used, n_embd, split.data(), n_embd,
                        Round::kNone);
  int differ = 0;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t i = 0; i < n_embd; ++i) {
      float g = 0.0f, c = 0.0f;
      for (int j = 0; j < n_used; ++j) {
        const int64_t s = t * n_used + j;
        if (from_c[static_cast<size_t>(s)] >= 0)
          c += yc[static_cast<size_t>(s * n_embd + i)] * w[static_cast<size_t>(s)];
        else
          g += yg[static_cast<size_t>(s * n_embd + i)] * w[static_cast<size_t>(s)];
      }
      differ += (g + c) != split[static_cast<size_t>(t * n_embd + i)];
    }
  EXPECT_GT(differ, 0);
}

}  // namespace
}  // namespace ft::cuda
