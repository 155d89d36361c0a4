#include "core/threadpool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ft {

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> max_tid{0};
        pool.parallel_for(n, grain, [&](int64_t a, int64_t b, int tid) {
          EXPECT_LT(a, b);
          if (threads > 1) {
            EXPECT_LE(b - a, grain);
          }
          for (int64_t i = a; i < b; ++i) hits[i]++;
          int m = max_tid.load();
          while (tid > m && !max_tid.compare_exchange_weak(m, tid)) {
          }
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain;
        EXPECT_LT(max_tid.load(), threads);
      }
    }
  }
}

// Thousands of back-to-back loops right after construction (a decode step runs hundreds):
// a worker that starts late or misses a wake-up would hang here.
TEST(ThreadPool, ManyShortLoopsRightAfterStart) {
  for (int rep = 0; rep < 10; ++rep) {
    ThreadPool pool(2);
    std::atomic<int64_t> sum{0};
    for (int loop = 0; loop < 200; ++loop)
      pool.parallel_for(8, 1, [&](int64_t a, int64_t b, int) { sum += b - a; });
    EXPECT_EQ(sum.load(), 200 * 8);
  }
}

TEST(ThreadPool, GrainAndCores) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.grain_for(1000, 16, 4), 64);  // 1000/16 = 62.5 -> 63 -> 64
  EXPECT_GE(pool.grain_for(1, 16), 1);
  EXPECT_GE(physical_cores(), 1);
}

}  // namespace ft
