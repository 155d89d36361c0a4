#include "core/time_calls.h"

#include <chrono>

namespace ft {

CallTiming time_calls(const std::function<void()>& call, int iters, int warmup, double min_warm_s,
                      const std::atomic<bool>* stop) {
  using clock = std::chrono::steady_clock;
  const auto w0 = clock::now();
  for (int i = 0; i < warmup || std::chrono::duration<double>(clock::now() - w0).count() < min_warm_s; ++i) call();
  CallTiming t;
  const auto t0 = clock::now();
  if (stop) {
    while (!stop->load(std::memory_order_relaxed)) {
      call();
      ++t.calls;
    }
  } else {
    for (int i = 0; i < iters; ++i) call();
    t.calls = iters;
  }
  t.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return t;
}

}  // namespace ft
