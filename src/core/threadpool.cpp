#include "core/threadpool.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace ft {
namespace {

// Spin step i: mostly pause; every 256th step yields, so an oversubscribed machine (more
// threads than free cores) hands the core to the thread we are waiting for.
inline void cpu_relax(int i) {
  if ((i & 255) == 255) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// About 0.5-1 ms of pause instructions: long enough to bridge the gap between two
// loops of one decode step, short enough not to burn a core between requests.
constexpr int kSpinIters = 1 << 14;

bool read_int(const std::string& path, int& out) {
  std::ifstream f(path);
  return static_cast<bool>(f >> out);
}

}  // namespace

int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool have_affinity = sched_getaffinity(0, sizeof(set), &set) == 0;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (have_affinity && !CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int pkg = 0, core = 0;
    if (!read_int(dir + "core_id", core)) {
      if (!have_affinity) break;
      core = cpu;  // no topology info: count the logical cpu
    }
    read_int(dir + "physical_package_id", pkg);
    cores.insert({pkg, core});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_release);
  gen_.notify_all();
  for (auto& w : workers_) w.join();
}

int64_t ThreadPool::grain_for(int64_t n, int64_t align, int chunks_per_thread) const {
  const int64_t chunks = std::max<int64_t>(1, int64_t{n_threads_} * chunks_per_thread);
  int64_t g = (n + chunks - 1) / chunks;
  if (align > 1) g = (g + align - 1) / align * align;
  return std::max<int64_t>(1, g);
}

void ThreadPool::work(int tid) {
  for (;;) {
    const int64_t i0 = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (i0 >= n_) break;
    body_(ctx_, i0, std::min(n_, i0 + grain_), tid);
  }
}

void ThreadPool::worker(int tid) {
  // Generation 0 is the one before any loop: a worker that starts late must still run
  // the first loop, so it must not take its starting point from gen_ itself.
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = gen_.load(std::memory_order_acquire);
    for (int i = 0; g == seen; ++i) {
      if (i < kSpinIters) {
        cpu_relax(i);
      } else {
        gen_.wait(seen, std::memory_order_acquire);
      }
      g = gen_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_relaxed)) return;
    work(tid);
    if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Body body, void* ctx) {
  body_ = body;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  busy_.store(n_threads_ - 1, std::memory_order_relaxed);
  gen_.fetch_add(1, std::memory_order_release);
  gen_.notify_all();
  work(0);
  for (int i = 0;; ++i) {
    const int b = busy_.load(std::memory_order_acquire);
    if (b == 0) break;
    if (i < kSpinIters)
      cpu_relax(i);
    else
      busy_.wait(b, std::memory_order_acquire);
  }
}

}  // namespace ft
