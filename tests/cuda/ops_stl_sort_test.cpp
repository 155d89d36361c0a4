// stl_sort::sort (src/cuda/stl_sort.cuh), the twin moe_route runs on ties, must leave every
// array in exactly the order libstdc++'s std::sort leaves it, tied elements included. Needs
// no GPU.
#include "cuda/stl_sort.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace ft::cuda {
namespace {

// The comparator of engine::moe_route: expert indices, by probability, descending.
struct ByProbDesc {
  const float* p;
  bool operator()(int32_t a, int32_t b) const { return p[a] > p[b]; }
};

std::vector<float> tied_values(int n, int distinct, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, distinct - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(pick(rng)) * 0.125f;
  return v;
}

TEST(CudaOpsStlSort, MatchesStdSortWithTies) {
  std::mt19937 rng(7);
  int differs_from_stable = 0;
  for (int n = 0; n <= 300; ++n) {
    for (int distinct : {1, 2, 3, 8, 64, 100000}) {
      const auto p = tied_values(n, distinct, rng);
      std::vector<int32_t> want(static_cast<size_t>(n)), got, stable;
      std::iota(want.begin(), want.end(), 0);
      got = stable = want;
      std::sort(want.begin(), want.end(), ByProbDesc{p.data()});
      stl_sort::sort(got.data(), n, ByProbDesc{p.data()});
      ASSERT_EQ(got, want) << "n " << n << " distinct " << distinct;
      std::stable_sort(stable.begin(), stable.end(), ByProbDesc{p.data()});
      differs_from_stable += stable != want;
    }
  }
  // The tie order is not trivial: a stable sort would fail this test.
  EXPECT_GT(differs_from_stable, 100);
}

// The GPU router sorts on a stack of exactly stack_need(n) entries in shared memory: the
// bound must hold for every input (guard entries past it must stay untouched), and the order
// must be sort()'s. Sorted, reversed and organ-pipe inputs push the deepest chains.
TEST(CudaOpsStlSort, StackNeedIsEnough) {
  std::mt19937 rng(11);
  for (int n : {1, 2, 17, 33, 128, 129, 256, 1000, 2048}) {
    for (int shape = 0; shape < 6; ++shape) {
      std::vector<float> p;
      if (shape < 3) {
        p = tied_values(n, shape == 0 ? 2 : shape == 1 ? 64 : 100000, rng);
      } else {
        p.resize(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
          p[static_cast<size_t>(i)] = static_cast<float>(shape == 3 ? i : shape == 4 ? n - i : std::min(i, n - i));
      }
      std::vector<int32_t> want(static_cast<size_t>(n)), got;
      std::iota(want.begin(), want.end(), 0);
      got = want;
      std::sort(want.begin(), want.end(), ByProbDesc{p.data()});
      const size_t need = static_cast<size_t>(stl_sort::stack_need(n));
      std::vector<stl_sort::Range<int32_t>> stack(need + 8, stl_sort::Range<int32_t>{-7, -7, -7});
      stl_sort::sort_with(got.data(), n, ByProbDesc{p.data()}, stack.data());
      ASSERT_EQ(got, want) << "n " << n << " shape " << shape;
      for (size_t i = need; i < stack.size(); ++i)
        ASSERT_TRUE(stack[i].first == -7 && stack[i].last == -7 && stack[i].depth == -7) << "n " << n << " entry " << i;
    }
  }
  EXPECT_EQ(stl_sort::stack_need(2048), 23);  // moe_route.cu's kSortStack for 2048 experts
}

TEST(CudaOpsStlSort, HeapsortPathMatchesStdPartialSort) {
  // depth 0 sends every range over 16 elements to std::__partial_sort(first, last, last),
  // which is what std::partial_sort(first, last, last) runs; then the final insertion sort.
  std::mt19937 rng(9);
  for (int n = 17; n <= 200; ++n) {
    const auto p = tied_values(n, 4, rng);
    std::vector<int32_t> want(static_cast<size_t>(n)), got;
    std::iota(want.begin(), want.end(), 0);
    got = want;
    std::partial_sort(want.begin(), want.end(), want.end(), ByProbDesc{p.data()});
    // std::sort's final insertion sort leaves an already sorted array unchanged only if the
    // comparator never moves equal elements: it never does (it moves on "less" only).
    stl_sort::sort(got.data(), n, ByProbDesc{p.data()}, 0);
    ASSERT_EQ(got, want) << "n " << n;
  }
}

}  // namespace
}  // namespace ft::cuda
