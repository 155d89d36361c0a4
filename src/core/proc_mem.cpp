#include "core/proc_mem.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace ft {

ProcMem parse_proc_status(const std::string& text) {
  ProcMem m;
  std::istringstream in(text);
  std::string line;
  int found = 0;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    int64_t* dst = key == "VmRSS"      ? &m.rss
                   : key == "VmHWM"    ? &m.peak
                   : key == "RssAnon"  ? &m.anon
                   : key == "RssFile"  ? &m.file
                   : key == "RssShmem" ? &m.shmem
                                       : nullptr;
    if (!dst) continue;
    long long kb = 0;
    if (std::sscanf(line.c_str() + colon + 1, "%lld", &kb) != 1) continue;
    *dst = static_cast<int64_t>(kb) * 1024;
    if (dst == &m.rss) ++found;
  }
  m.ok = found > 0;
  return m;
}

ProcMem read_proc_mem() {
  std::ifstream f("/proc/self/status");
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_proc_status(ss.str());
}

std::string describe(const ProcMem& m) {
  if (!m.ok) return "";
  const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  return fmt::format("resident {:.0f} MiB (anon {:.0f}, file {:.0f}, shmem {:.0f}; peak {:.0f})", mib(m.rss),
                     mib(m.anon), mib(m.file), mib(m.shmem), mib(m.peak));
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

}  // namespace ft
