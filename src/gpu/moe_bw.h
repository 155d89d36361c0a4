// GPU-side figures of `ft bench-bw`: pinned host -> device copy bandwidth and the slot
// cache's expert gather (cuda/moe_cache.h, kernel loads from mapped pinned memory), the
// two transfers the offload and hybrid backends pay per miss.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "moe_cpu/gemv_bw.h"

namespace ft::gpu {

struct CopyBw {
  double gbs = 0.0;  // best repetition (1e9 B/s)
  double mean_gbs = 0.0;
};
// cudaMemcpyAsync of `bytes` from pinned host memory to the device, `reps` times.
CopyBw pinned_h2d_bandwidth(size_t bytes, int reps);

struct GatherBw {
  double gbs = 0.0;
  double us_per_call = 0.0;
  int64_t bytes_per_call = 0;
  int64_t calls = 0;
};

// Experts of geometry g in mapped pinned memory (at most max_bytes, >= n_miss + 1
// positions) gathered n_miss at a time into n_miss device slots, rotating through the
// bank; `iters` timed calls after `warmup`, or until *stop.
class GatherBench {
 public:
  GatherBench(const moe_cpu::ExpertGeometry& g, int64_t max_bytes, int n_miss);
  ~GatherBench();
  GatherBench(const GatherBench&) = delete;
  GatherBench& operator=(const GatherBench&) = delete;
  GatherBw run(int iters, int warmup, const std::atomic<bool>* stop = nullptr);

 private:
  struct Impl;
  Impl* p_;
};

// "NVIDIA H200" (cudaGetDeviceProperties name), "" without a device.
std::string gpu_name();

}  // namespace ft::gpu
