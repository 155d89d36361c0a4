#include "moe_cpu/cpu_pool.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "moe_cpu/cpu_topology.h"

namespace ft::moe_cpu {

CpuPool::CpuPool(const CpuPoolOptions& o) {
  const std::vector<int> cores = physical_core_cpus();
  n_cores_ = static_cast<int>(cores.size());
  const int reserved = std::clamp(o.reserved, 0, n_cores_ - 1);
  int n = o.n_threads > 0 ? o.n_threads : std::max(1, n_cores_ - reserved);
  pool_ = std::make_unique<ThreadPool>(n);
  cpus_.assign(static_cast<size_t>(n), -1);
  if (!o.pin) return;
  // Thread i goes to core reserved + i; more threads than cores wrap around (tests).
  for (int i = 0; i < n; ++i) cpus_[i] = cores[static_cast<size_t>((reserved + i) % n_cores_)];
  // Each thread must take exactly one item to pin itself: every item waits until all n
  // threads hold one, so no thread can come back for a second.
  std::atomic<int> arrived{0}, ok{0};
  pool_->parallel_for(n, 1, [&](int64_t, int64_t, int tid) {
    if (tid != 0 && pin_current_thread(cpus_[static_cast<size_t>(tid)])) ok.fetch_add(1);
    arrived.fetch_add(1);
    while (arrived.load() < n) std::this_thread::yield();
  });
  pinned_ = ok.load() == n - 1;
}

std::string CpuPool::describe() const {
  return fmt::format("{} threads, {}{}", size(), describe_cpus(cpus_, n_cores_),
                     pinned_ ? ", pinned" : ", not pinned");
}

}  // namespace ft::moe_cpu
