#include "moe_cpu/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace ft::moe_cpu {
namespace {

std::string bracketed(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return "?";
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : line;
}

}  // namespace

std::string thp_settings() {
  return fmt::format("THP enabled [{}], defrag [{}]", bracketed("/sys/kernel/mm/transparent_hugepage/enabled"),
                     bracketed("/sys/kernel/mm/transparent_hugepage/defrag"));
}

size_t anon_huge_bytes(const void* p, size_t n) {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + n;
  std::ifstream f("/proc/self/smaps");
  std::string line;
  uintptr_t a = 0, b = 0;
  double total = 0;
  while (std::getline(f, line)) {
    uintptr_t x = 0, y = 0;
    char dash = 0;
    std::istringstream ss(line);
    // A mapping's header line: "start-end perms ..." in hex.
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && (ss >> std::hex >> x >> dash >> y) &&
        dash == '-') {
      a = x, b = y;
      continue;
    }
    if (line.rfind("AnonHugePages:", 0) != 0 || b <= lo || a >= hi) continue;
    const double kb = std::stod(line.substr(14));
    const double overlap = static_cast<double>(std::min(b, hi) - std::max(a, lo)) / static_cast<double>(b - a);
    total += kb * 1024.0 * overlap;
  }
  return static_cast<size_t>(total);
}

void* map_huge(size_t n, size_t* mapped) {
  const size_t len = (std::max<size_t>(n, 1) + kHugePage - 1) / kHugePage * kHugePage;
  // Over-map by one huge page and trim both ends to a 2 MiB boundary.
  void* m = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) fail("cannot map {:.1f} MiB of host memory for expert weights", static_cast<double>(n) / (1 << 20));
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) munmap(m, aligned - base);
  const uintptr_t tail = base + len + kHugePage - (aligned + len);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + len), tail);
  auto* p = reinterpret_cast<void*>(aligned);
  madvise(p, len, MADV_HUGEPAGE);  // advice: THP "never" ignores it (anon_huge_bytes tells)
  *mapped = len;
  return p;
}

void unmap_huge(void* p, size_t mapped) {
  if (p != nullptr) munmap(p, mapped);
}

void touch_pages(void* p, size_t n, int n_threads) {
  auto* b = static_cast<volatile uint8_t*>(p);
  const size_t pages = (n + 4095) / 4096;
  const int nt = std::max(1, std::min<int>(n_threads, static_cast<int>(pages / 512 + 1)));
  auto run = [&](int i) {
    for (size_t pg = pages * i / nt; pg < pages * (i + 1) / nt; ++pg) b[pg * 4096] = 0;
  };
  std::vector<std::thread> th;
  for (int i = 1; i < nt; ++i) th.emplace_back(run, i);
  run(0);
  for (std::thread& t : th) t.join();
}

}  // namespace ft::moe_cpu
