// The timing loop of the bandwidth benchmarks (`ft bench-bw`: the CPU expert GEMV in
// moe_cpu/gemv_bw.cpp, the expert gather in gpu/moe_bw.cpp): warm-up calls, then either a
// fixed number of timed calls or calls until a flag is raised (the concurrent measurement,
// where two loops run side by side and one stops the other).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace ft {

struct CallTiming {
  int64_t calls = 0;
  double seconds = 0.0;
  double us_per_call() const { return calls > 0 ? seconds / static_cast<double>(calls) * 1e6 : 0.0; }
  // bytes_per_call * calls / seconds, in 1e9 bytes per second (0 when nothing was timed).
  double gbs(int64_t bytes_per_call) const {
    return calls > 0 && seconds > 0 ? static_cast<double>(bytes_per_call) * static_cast<double>(calls) / seconds * 1e-9
                                     : 0.0;
  }
};

// At least `warmup` calls lasting at least min_warm_s seconds, then `iters` timed calls, or
// with `stop` set, timed calls until *stop.
CallTiming time_calls(const std::function<void()>& call, int iters, int warmup, double min_warm_s = 0.0,
                      const std::atomic<bool>* stop = nullptr);

}  // namespace ft
