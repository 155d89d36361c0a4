// Which logical CPUs are distinct physical cores, and pinning a thread to one.
//
// The expert executor runs one thread per physical core: two hyper-threads of one core share
// its load ports, so a second thread per core adds no read bandwidth to a memory-bound GEMV
// and only makes the slowest chunk later.
#pragma once

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

// "cpus 1,2,3 (3 physical cores of 4)" style line for logs.
std::string describe_cpus(const std::vector<int>& cpus, int n_cores);

}  // namespace ft::moe_cpu
