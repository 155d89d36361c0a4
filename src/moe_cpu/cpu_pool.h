// The expert executor's thread pool: one thread per physical core, each pinned to its core.
//
// A ThreadPool (core/threadpool.h) whose workers are pinned once at start-up. The thread
// that calls parallel_for takes part as thread 0; it is not pinned here (it is the MoE
// coordinator, which pins itself, or a test's main thread). By default the pool leaves one
// physical core free for the thread that drives the GPU (CUDA launches, graph replays).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/threadpool.h"

namespace ft::moe_cpu {

struct CpuPoolOptions {
  int n_threads = 0;    // 0: physical cores - 1 (at least 1)
  bool pin = true;      // pin worker i to the i-th physical core after the reserved one
  int reserved = 1;     // physical cores kept free (the first ones in topology order)
};

class CpuPool {
 public:
  explicit CpuPool(const CpuPoolOptions& o = {});
  ThreadPool& pool() { return *pool_; }
  int size() const { return pool_->size(); }
  // Logical CPU of each thread id (-1: not pinned), and whether every pin succeeded.
  const std::vector<int>& cpus() const { return cpus_; }
  bool pinned() const { return pinned_; }
  // The CPU thread 0 (the caller) should pin itself to, or -1.
  int caller_cpu() const { return cpus_.empty() ? -1 : cpus_[0]; }
  std::string describe() const;

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::vector<int> cpus_;
  int n_cores_ = 0;
  bool pinned_ = false;
};

}  // namespace ft::moe_cpu
