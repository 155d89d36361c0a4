#include "moe_cpu/cpu_topology.h"

#include <sched.h>

#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ft::moe_cpu {
namespace {

bool read_int(const std::string& path, int& out) {
  std::ifstream f(path);
  return static_cast<bool>(f >> out);
}

}  // namespace

std::vector<int> physical_core_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool have_affinity = sched_getaffinity(0, sizeof(set), &set) == 0;
  std::map<std::pair<int, int>, int> first_cpu;  // (package, core) -> lowest logical cpu
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (have_affinity && !CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int pkg = 0, core = cpu;
    if (!read_int(dir + "core_id", core)) {
      if (!have_affinity) break;
      core = cpu;
    }
    read_int(dir + "physical_package_id", pkg);
    first_cpu.emplace(std::make_pair(pkg, core), cpu);
  }
  std::vector<int> out;
  out.reserve(first_cpu.size());
  for (const auto& [key, cpu] : first_cpu) out.push_back(cpu);
  if (out.empty()) out.push_back(0);
  return out;
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
