// time_calls: warm-up then exactly `iters` timed calls; with a stop flag, calls until it is
// raised (here by the call itself); the rates follow from calls and seconds.
#include "core/time_calls.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

TEST(TimeCalls, WarmupThenTimedCalls) {
  int n = 0;
  const CallTiming t = time_calls([&] { ++n; }, 7, 3);
  EXPECT_EQ(t.calls, 7);
  EXPECT_EQ(n, 10);
  EXPECT_GE(t.seconds, 0.0);
}

TEST(TimeCalls, MinimumWarmupTime) {
  int n = 0;
  const CallTiming t = time_calls([&] { ++n; }, 2, 1, 0.02);
  EXPECT_GT(n, 3);  // 20 ms of an increment is far more than one call
  EXPECT_EQ(t.calls, 2);
}

TEST(TimeCalls, StopFlagEndsTheLoop) {
  std::atomic<bool> stop{false};
  int n = 0;
  const CallTiming t = time_calls(
      [&] {
        if (++n == 12) stop = true;
      },
      1000, 2, 0.0, &stop);
  EXPECT_EQ(t.calls, 10);  // calls 3..12 are timed; the 12th raised the flag
}

TEST(TimeCalls, Rates) {
  CallTiming t;
  EXPECT_EQ(t.us_per_call(), 0.0);
  EXPECT_EQ(t.gbs(100), 0.0);
  t.calls = 4;
  t.seconds = 2.0;
  EXPECT_DOUBLE_EQ(t.us_per_call(), 0.5e6);
  EXPECT_DOUBLE_EQ(t.gbs(1000000000), 2.0);
}

}  // namespace
}  // namespace ft
