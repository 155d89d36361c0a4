// STREAM-style host memory read bandwidth over a pool (one pinned thread per physical core):
// every thread sums its contiguous share of a buffer much larger than the caches. The
// figure the CPU expert GEMV is held against (`ft bench-bw`).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/threadpool.h"

namespace ft::moe_cpu {

struct HostReadResult {
  double gbs = 0.0;       // best of the repetitions, 1e9 bytes per second
  double mean_gbs = 0.0;
  double checksum = 0.0;  // keeps the reads alive
};

// Reads `bytes` (rounded down to 4 KiB) `reps` times after one warm-up pass.
HostReadResult host_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// Sum of n floats (n a multiple of 64), the inner loop of the above; AVX2 when the CPU has
// it. Exposed for the test that checks it against a plain loop.
float read_sum(const float* p, size_t n);
float read_sum_ref(const float* p, size_t n);
namespace detail {
float read_sum_avx2(const float* p, size_t n);
}

}  // namespace ft::moe_cpu
