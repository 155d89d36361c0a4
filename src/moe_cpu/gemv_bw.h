// The CPU expert GEMV measured as the cpu / hybrid backends run it (`ft bench-bw`): one
// token, n_used experts per call through ExpertExecutor, on a synthetic bank larger than the
// caches whose experts are visited in rotation, so every call reads its experts from DRAM.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "moe_cpu/expert_exec.h"

namespace ft::moe_cpu {

struct ExpertGeometry {
  GgmlType type = GgmlType::NVFP4;
  int64_t n_embd = 2048, n_ff = 768, n_expert = 128;
  int n_used = 8;
  std::string describe() const;  // "nvfp4 H2048 I768 E128 k8 (2.53 MiB per expert)"
  int64_t expert_bytes() const;  // gate + up + down
};

// Pages of the synthetic banks: the system's default for an anonymous mapping, 2 MiB
// (map_huge: aligned, MADV_HUGEPAGE, as FT_MOE_HOST_PAGES=huge banks), or 4 KiB
// (MADV_NOHUGEPAGE, as the backends' cudaHostAlloc'd banks). Session 8 on the H200 host: the
// same GEMV rate on both at the 6144-expert footprint.
enum class BankPages { kDefault, kHuge, kSmall };

// Anonymous mapped bytes with a page advice (RAII).
class HostBytes {
 public:
  HostBytes() = default;
  ~HostBytes();
  HostBytes(const HostBytes&) = delete;
  HostBytes& operator=(const HostBytes&) = delete;
  void alloc(size_t n, BankPages pages);  // throws ft::Error when the mapping fails
  uint8_t* data() { return p_; }
  size_t size() const { return n_; }
  size_t huge_bytes() const;  // bytes on transparent huge pages (/proc/self/smaps)

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

// Experts of geometry g: one expert quantised from random values, copied into
// min(n_expert, max_bytes / expert_bytes) positions (at least n_used + 1), bank of ones
// except gate/up/down 0.5/0.25/2 (so the scale epilogue runs).
struct SyntheticExperts {
  HostBytes gate, up, down;
  std::vector<float> bank;
  HostExperts h;
};
void make_synthetic_experts(const ExpertGeometry& g, int64_t max_bytes, SyntheticExperts& out,
                            BankPages pages = BankPages::kDefault);

struct GemvBwResult {
  double gbs = 0.0;        // expert bytes read / time (1e9 B/s)
  double us_per_call = 0.0;
  int64_t bytes_per_call = 0;
  int64_t calls = 0;
};

// `iters` timed calls after at least `warmup` calls (and, standalone, warm_s seconds); with `stop` set, calls continue until
// *stop (the concurrent measurement) and the figure covers all of them.
GemvBwResult expert_gemv_bandwidth(ExpertExecutor& ex, const HostExperts& h, const ExpertNumerics& num, int n_used,
                                   int iters, int warmup, const std::atomic<bool>* stop = nullptr, double warm_s = 0.3);

}  // namespace ft::moe_cpu
