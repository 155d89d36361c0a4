#include "moe_cpu/gemv_bw.h"

#include <algorithm>
#include <cstring>
#include <random>

#include <sys/mman.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/time_calls.h"
#include "moe_cpu/huge_pages.h"
#include "quant/quantize.h"

namespace ft::moe_cpu {

int64_t ExpertGeometry::expert_bytes() const {
  return 2 * ft::row_bytes(type, n_embd) * n_ff + ft::row_bytes(type, n_ff) * n_embd;
}

std::string ExpertGeometry::describe() const {
  return fmt::format("{} H{} I{} E{} k{} ({:.2f} MiB per expert)", type_name(type), n_embd, n_ff, n_expert, n_used,
                     static_cast<double>(expert_bytes()) / (1024.0 * 1024.0));
}

HostBytes::~HostBytes() {
  if (p_ != nullptr) munmap(p_, n_);
}

void HostBytes::alloc(size_t n, BankPages pages) {
  if (p_ != nullptr) munmap(p_, n_);
  p_ = nullptr;
  n_ = 0;
  if (pages == BankPages::kHuge) {
    // As the backends' banks (host_bank.cpp): 2 MiB aligned, MADV_HUGEPAGE before the first
    // touch. Advice only: huge_bytes() says whether THP took it.
    p_ = static_cast<uint8_t*>(map_huge(n, &n_));
    return;
  }
  void* m = mmap(nullptr, std::max<size_t>(n, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("bench: cannot map {:.1f} MiB for a synthetic expert bank", static_cast<double>(n) / (1 << 20));
  p_ = static_cast<uint8_t*>(m);
  n_ = std::max<size_t>(n, 1);
  // 4 KiB pages as cudaHostAlloc's (the backends' banks before session 8).
  if (pages == BankPages::kSmall) madvise(p_, n_, MADV_NOHUGEPAGE);
}

size_t HostBytes::huge_bytes() const { return p_ != nullptr ? anon_huge_bytes(p_, n_) : 0; }

void make_synthetic_experts(const ExpertGeometry& g, int64_t max_bytes, SyntheticExperts& out, BankPages pages) {
  if (!quant::has_ref_quant(g.type)) fail("bench: no quantiser for {} experts", type_name(g.type));
  const int64_t eb = g.expert_bytes();
  const int64_t n_pos = std::max<int64_t>(g.n_used + 1, std::min(g.n_expert, max_bytes / eb));
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto one = [&](int64_t k, int64_t rows, HostBytes& dst) {
    std::vector<float> f(static_cast<size_t>(k * rows));
    for (float& v : f) v = d(rng);
    const std::vector<uint8_t> q = quant::quantize_rows_ref(g.type, f.data(), rows, k);
    dst.alloc(q.size() * static_cast<size_t>(n_pos), pages);
    for (int64_t e = 0; e < n_pos; ++e) std::memcpy(dst.data() + e * q.size(), q.data(), q.size());
    return static_cast<int64_t>(q.size());
  };
  const int64_t gb = one(g.n_embd, g.n_ff, out.gate);
  one(g.n_embd, g.n_ff, out.up);
  const int64_t db = one(g.n_ff, g.n_embd, out.down);
  out.bank.assign(static_cast<size_t>(4 * n_pos), 1.0f);
  for (int64_t e = 0; e < n_pos; ++e) {
    out.bank[4 * e + 0] = 0.5f;
    out.bank[4 * e + 1] = 0.25f;
    out.bank[4 * e + 2] = 2.0f;
  }
  HostExperts& h = out.h;
  h = HostExperts{};
  h.gate = {g.type, out.gate.data(), ft::row_bytes(g.type, g.n_embd), gb, g.n_ff, g.n_embd};
  h.up = {g.type, out.up.data(), ft::row_bytes(g.type, g.n_embd), gb, g.n_ff, g.n_embd};
  h.down = {g.type, out.down.data(), ft::row_bytes(g.type, g.n_ff), db, g.n_embd, g.n_ff};
  h.bank = out.bank.data();
  h.n_expert = n_pos;
  h.n_embd = g.n_embd;
  h.n_ff = g.n_ff;
  check_host_experts(h, "synthetic experts");
}

GemvBwResult expert_gemv_bandwidth(ExpertExecutor& ex, const HostExperts& h, const ExpertNumerics& num, int n_used,
                                   int iters, int warmup, const std::atomic<bool>* stop, double warm_s) {
  std::vector<float> x(static_cast<size_t>(h.n_embd)), out(static_cast<size_t>(h.n_embd)), w(n_used, 1.0f / n_used);
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : x) v = d(rng);
  std::vector<int32_t> ids(static_cast<size_t>(n_used));
  int64_t next = 0;
  auto call = [&]() {
    // Consecutive distinct experts, rotating through the bank: cold in every cache.
    for (int r = 0; r < n_used; ++r) ids[r] = static_cast<int32_t>((next + r) % h.n_expert);
    next = (next + n_used) % h.n_expert;
    ex.run(h, num, x.data(), h.n_embd, 1, ids.data(), w.data(), n_used, out.data(), h.n_embd);
  };
  // At least `warmup` calls and (standalone) 300 ms: the H200 host's first nvfp4 figure,
  // after 8 warm-up calls only, was 15.6 GB/s where the same loop ran at 51 GB/s a second
  // later. The concurrent run (stop set) follows a standalone one and starts at once.
  const CallTiming t = time_calls(call, iters, warmup, stop ? 0.0 : warm_s, stop);
  GemvBwResult r;
  r.bytes_per_call = static_cast<int64_t>(n_used) * h.expert_bytes();
  r.calls = t.calls;
  r.us_per_call = t.us_per_call();
  r.gbs = t.gbs(r.bytes_per_call);
  return r;
}

}  // namespace ft::moe_cpu
