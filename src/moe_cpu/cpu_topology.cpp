#include "moe_cpu/cpu_topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ft::moe_cpu {
namespace {

bool read_int(const std::string& path, int& out) {
  std::ifstream f(path);
  return static_cast<bool>(f >> out);
}

// (package, core) of every logical CPU this process may run on, in CPU order.
std::vector<std::pair<int, std::pair<int, int>>> allowed_cpu_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool have_affinity = sched_getaffinity(0, sizeof(set), &set) == 0;
  std::vector<std::pair<int, std::pair<int, int>>> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (have_affinity && !CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int pkg = 0, core = cpu;
    if (!read_int(dir + "core_id", core)) {
      if (!have_affinity) break;
      core = cpu;
    }
    read_int(dir + "physical_package_id", pkg);
    out.push_back({cpu, {pkg, core}});
  }
  return out;
}

}  // namespace

std::vector<int> physical_core_cpus() {
  std::map<std::pair<int, int>, int> first_cpu;  // (package, core) -> lowest logical cpu
  for (const auto& [cpu, key] : allowed_cpu_cores()) first_cpu.emplace(key, cpu);
  std::vector<int> out;
  out.reserve(first_cpu.size());
  for (const auto& [key, cpu] : first_cpu) out.push_back(cpu);
  if (out.empty()) out.push_back(0);
  return out;
}

std::vector<int> cpus_off_cores(const std::vector<int>& taken) {
  const auto all = allowed_cpu_cores();
  std::set<std::pair<int, int>> used;
  for (const auto& [cpu, key] : all)
    if (std::find(taken.begin(), taken.end(), cpu) != taken.end()) used.insert(key);
  std::vector<int> out;
  for (const auto& [cpu, key] : all)
    if (!used.count(key)) out.push_back(cpu);
  return out;
}

bool pin_current_thread_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  if (CPU_COUNT(&set) == 0) return false;
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

bool ThreadPin::pin(const std::vector<int>& cpus) {
  restore();
  cpu_set_t prev;
  CPU_ZERO(&prev);
  if (sched_getaffinity(0, sizeof(prev), &prev) != 0 || !pin_current_thread_to(cpus)) return false;
  prev_ = prev;
  who_ = pthread_self();
  active_ = true;
  return true;
}

void ThreadPin::restore() {
  if (!active_) return;
  active_ = false;
  if (pthread_equal(who_, pthread_self())) sched_setaffinity(0, sizeof(prev_), &prev_);
}

bool pin_current_thread(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::string describe_cpus(const std::vector<int>& cpus, int n_cores) {
  return fmt::format("cpus {} ({} of {} physical cores)", fmt::join(cpus, ","), cpus.size(), n_cores);
}

}  // namespace ft::moe_cpu
