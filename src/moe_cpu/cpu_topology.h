// Which logical CPUs are distinct physical cores, and pinning a thread to one.
//
// The expert executor runs one thread per physical core: two hyper-threads of one core share
// its load ports, so a second thread per core adds no read bandwidth to a memory-bound GEMV
// and only makes the slowest chunk later.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <string>
#include <vector>

namespace ft::moe_cpu {

// The first logical CPU of every physical core this process may run on (sched_getaffinity),
// ordered by (package, core id): read from /sys/devices/system/cpu/cpuN/topology. Without
// sysfs every allowed logical CPU counts as a core.
std::vector<int> physical_core_cpus();

// Pins the calling thread to logical CPU `cpu`; false (and nothing changed) when the kernel
// refuses (e.g. a cgroup without that CPU).
bool pin_current_thread(int cpu);

// The logical CPUs this process may run on whose physical core holds none of `taken` (e.g.
// the pool's pinned threads): where the thread that drives the GPU should run so that it
// never shares a core with a pinned worker.
std::vector<int> cpus_off_cores(const std::vector<int>& taken);
// Pins the calling thread to the set `cpus`; false (nothing changed) when empty or refused.
bool pin_current_thread_to(const std::vector<int>& cpus);

// Pins the calling thread to a CPU set and gives its former mask back on restore() or
// destruction when that runs on the same thread (a thread pinned for the GPU work of one
// session, e.g. a test's main thread, must not keep the pin for what follows; threads it
// starts meanwhile inherit the mask).
class ThreadPin {
 public:
  ThreadPin() = default;
  ~ThreadPin() { restore(); }
  ThreadPin(const ThreadPin&) = delete;
  ThreadPin& operator=(const ThreadPin&) = delete;
  bool pin(const std::vector<int>& cpus);  // false: nothing changed
  void restore();
  bool active() const { return active_; }

 private:
  cpu_set_t prev_{};
  pthread_t who_{};
  bool active_ = false;
};

// "cpus 1,2,3 (3 physical cores of 4)" style line for logs.
std::string describe_cpus(const std::vector<int>& cpus, int n_cores);

}  // namespace ft::moe_cpu
