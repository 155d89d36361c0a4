// ft-bench-moe-cpu: the CPU expert executor's decode step (one token, k experts, read from
// DRAM) in its modes -- the engine's kernels and exact mode (the GPU decode GEMV's
// summation order, moe_cpu/gpu_dot.h) with each SIMD family the CPU has (AVX2 rows, AVX-512
// rows), and for A/B runs each row schedule (--sched) and prefetch mode (--prefetch) --
// against the host read bandwidth of the same pool.
//   ft-bench-moe-cpu --threads 2 --types nvfp4,q8_0 --mib 512 --isas avx2,avx512 --sched items,guided
// Prints GB/s of expert weights read per call and its share of the measured read bandwidth,
// and each mode's mean time per executor phase (gate|up + down alone: the GEMV's GB/s
// without the grouping, GLU and combine). The exact mode's plan is the GPU's for the
// Qwen3-30B-A3B shapes (NVFP4: slab kernel for gate/up, packed for down; generic integer
// kernel: 32 lanes) without linking CUDA. Types exact mode does not mirror (Q4_K) are timed
// in engine order only, as the backends run them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "moe_cpu/cpu_pool.h"
#include "moe_cpu/cpu_topology.h"
#include "moe_cpu/expert_exec.h"
#include "moe_cpu/gemv_bw.h"
#include "moe_cpu/host_bw.h"
#include "moe_cpu/huge_pages.h"

namespace {

using ft::GgmlType;
using ft::moe_cpu::GpuDot;
using ft::moe_cpu::GpuDotPlan;

GpuDotPlan bench_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_out, int n_sub, bool q8) {
  (void)rows, (void)n_out;
  if (!q8) return {GpuDot::kFloat, 32};
  if (type == GgmlType::NVFP4) {
    const int64_t nb = k / 64;
    return {nb < 32 && nb * n_sub <= 128 ? GpuDot::kNvfp4Packed : GpuDot::kNvfp4Slab, 32};
  }
  return {GpuDot::kQ8Generic, 32};
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU expert executor: engine order vs exact (GPU order) mode, vs host read bandwidth"};
  int threads = 2, iters = 200, rounds = 3;
  bool pin = true;
  int64_t mib = 512, read_mib = 0, n_embd = 2048, n_ff = 768, n_expert = 128;
  int n_used = 8;
  std::string types = "nvfp4,q8_0,mxfp4,bf16", isas = "avx2,avx512", pages = "default", sched_list, pf_list;
  double warm_ms = 50;
  app.add_option("--threads", threads, "pool threads");
  app.add_option("--types", types, "expert types, comma-separated");
  app.add_option("--isas", isas, "exact mode's SIMD families to time (avx2, avx512, scalar); absent ones are skipped");
  app.add_option("--mib", mib, "bytes of the synthetic bank and of the read buffer (MiB)");
  app.add_option("--read-mib", read_mib, "bytes of the read buffer (MiB; default --mib)");
  app.add_option("--iters", iters, "timed calls per mode and round");
  app.add_option("--rounds", rounds, "alternating rounds (best of each mode)");
  app.add_option("--bank-pages", pages,
                 "pages of the expert bank: default, 2m (2 MiB aligned + MADV_HUGEPAGE, as FT_MOE_HOST_PAGES=huge "
                 "banks), 4k (MADV_NOHUGEPAGE, as the backends' cudaHostAlloc'd banks)");
  app.add_option("--sched", sched_list,
                 "exact mode's row schedules to time, comma-separated (items, guided, flow); default: FT_MOE_CPU_SCHED's");
  app.add_option("--prefetch", pf_list,
                 "exact mode's prefetch modes to time (next, next2, next-128, next-l2, row, none); default: FT_MOE_CPU_PREFETCH's");
  app.add_option("--warm-ms", warm_ms, "warm-up per measurement after the first (which warms 300 ms)");
  app.add_flag("!--no-pin", pin, "leave the threads unpinned (default: one per physical core, as the cpu backend)");
  app.add_option("--n-embd", n_embd);
  app.add_option("--n-ff", n_ff);
  app.add_option("--n-used", n_used);
  app.add_option("--n-expert", n_expert,
                 "experts in the bank (at most --mib of them; the cpu backend holds every layer's: 48 x 128 for "
                 "Qwen3-30B-A3B, whose page tables no longer fit in the caches)");
  CLI11_PARSE(app, argc, argv);
  try {
    ft::moe_cpu::BankPages bank_pages = ft::moe_cpu::BankPages::kDefault;
    if (pages == "2m")
      bank_pages = ft::moe_cpu::BankPages::kHuge;
    else if (pages == "4k")
      bank_pages = ft::moe_cpu::BankPages::kSmall;
    else if (pages != "default")
      ft::fail("--bank-pages {}: expected default, 2m or 4k", pages);
    // The cpu / hybrid backends' pool: one thread per physical core, pinned, the caller too.
    ft::moe_cpu::CpuPoolOptions po;
    po.n_threads = threads;
    po.pin = pin;
    ft::moe_cpu::CpuPool cpu_pool(po);
    if (pin && cpu_pool.caller_cpu() >= 0) ft::moe_cpu::pin_current_thread(cpu_pool.caller_cpu());
    ft::ThreadPool& pool = cpu_pool.pool();
    fmt::print("pool: {}\n", cpu_pool.describe());
    if (read_mib <= 0) read_mib = mib;
    const auto rd = ft::moe_cpu::host_read_bandwidth(pool, static_cast<size_t>(read_mib) << 20, 5);
    fmt::print("host read: {:.2f} GB/s best, {:.2f} mean ({} threads, {} MiB)\n", rd.gbs, rd.mean_gbs, threads,
               read_mib);
    ft::moe_cpu::ExpertExecutor ex(pool);
    ex.set_profile(true);  // per-phase times of every mode (a few clock reads per call)
    const ft::moe_cpu::RowSchedule default_sched = ex.schedule();
    const ft::moe_cpu::detail::Prefetch default_pf = ft::moe_cpu::detail::gpu_dot_prefetch();
    std::vector<std::pair<std::string, ft::moe_cpu::RowSchedule>> scheds;
    for (const std::string& v : split(sched_list)) {
      if (v == "items")
        scheds.emplace_back(v, ft::moe_cpu::RowSchedule::kItems);
      else if (v == "guided")
        scheds.emplace_back(v, ft::moe_cpu::RowSchedule::kGuided);
      else if (v == "flow")
        scheds.emplace_back(v, ft::moe_cpu::RowSchedule::kFlow);
      else
        ft::fail("--sched {}: expected items, guided or flow", v);
    }
    if (scheds.empty()) scheds.emplace_back("env", default_sched);
    std::vector<std::pair<std::string, ft::moe_cpu::detail::Prefetch>> pfs;
    for (const std::string& v : split(pf_list)) {
      using ft::moe_cpu::detail::Prefetch;
      Prefetch p = Prefetch::kNext;
      if (v == "next2")
        p = Prefetch::kNext2;
      else if (v == "next-l2")
        p = Prefetch::kNextL2;
      else if (v == "next-128")
        p = Prefetch::kNext128;
      else if (v == "row")
        p = Prefetch::kRow;
      else if (v == "none")
        p = Prefetch::kNone;
      else if (v != "next")
        ft::fail("--prefetch {}: expected next, next2, next-128, next-l2, row or none", v);
      pfs.emplace_back(v, p);
    }
    if (pfs.empty()) pfs.emplace_back("env", default_pf);
    bool first = true;
    for (const std::string& tn : split(types)) {
      const auto t = ft::ggml_type_from_name(tn);
      if (!t) ft::fail("unknown type '{}'", tn);
      ft::moe_cpu::ExpertGeometry g;
      g.type = *t;
      g.n_embd = n_embd;
      g.n_ff = n_ff;
      g.n_used = n_used;
      g.n_expert = n_expert;
      ft::moe_cpu::SyntheticExperts se;
      ft::moe_cpu::make_synthetic_experts(g, mib << 20, se, bank_pages);
      ft::moe_cpu::ExpertNumerics num{ft::engine::ActType::kF32, ft::quant::ActQuant::kQ8};
      num.q8_quantised_only = true;
      // Alternating rounds, best of each: the machine may be shared (one loaded round does
      // not decide the comparison).
      struct Mode {
        std::string name;
        bool exact = false;
        ft::Isa isa = ft::Isa::kScalar;
        ft::moe_cpu::RowSchedule sched = ft::moe_cpu::RowSchedule::kItems;
        ft::moe_cpu::detail::Prefetch pf = ft::moe_cpu::detail::Prefetch::kNext;
        ft::moe_cpu::GemvBwResult best;
        double mean_us = 0;
        ft::moe_cpu::ExecProfile prof;  // of all rounds
      };
      std::vector<Mode> modes;
      modes.emplace_back();
      modes.back().name = "engine order";
      modes.back().sched = default_sched;
      modes.back().pf = default_pf;
      num.gpu_plan = bench_plan;
      if (!ft::moe_cpu::exact_supported(se.h, num)) {
        fmt::print("  (exact mode does not cover {} experts: the cpu / hybrid backends run them in engine order)\n",
                   tn);
      } else {
        for (const std::string& in : split(isas)) {
          const auto isa = ft::isa_from_name(in);
          if (!isa) ft::fail("unknown ISA '{}' (scalar, avx2, avx512)", in);
          const bool ok = *isa == ft::Isa::kAvx512 ? ft::moe_cpu::gpu_dot_avx512_supported() : ft::isa_supported(*isa);
          if (!ok) {
            fmt::print("  (exact {}: not on this CPU)\n", in);
            continue;
          }
          for (const auto& [sn, sv] : scheds)
            for (const auto& [pn, pv] : pfs) {
              Mode m;
              m.name = fmt::format("exact {}", ft::isa_name(*isa));
              if (scheds.size() > 1 || pfs.size() > 1) m.name += fmt::format(" {} {}", sn, pn);
              m.exact = true;
              m.isa = *isa;
              m.sched = sv;
              m.pf = pv;
              modes.push_back(m);
            }
        }
      }
      for (int round = 0; round < rounds; ++round)
        for (Mode& m : modes) {
          num.gpu_plan = m.exact ? bench_plan : nullptr;
          ft::moe_cpu::gpu_dot_limit_isa(m.exact ? m.isa : ft::Isa::kAvx512);
          ft::moe_cpu::detail::gpu_dot_set_prefetch(m.pf);
          ex.set_schedule(m.sched);
          ex.reset_profile();
          // The first measurement warms the machine for 300 ms (the H200 host's first figure after
          // 8 calls was a third of the next one's); the modes after it run back to back.
          const auto r =
              ft::moe_cpu::expert_gemv_bandwidth(ex, se.h, num, n_used, iters, 8, nullptr, first ? 0.3 : warm_ms * 1e-3);
          first = false;
          const ft::moe_cpu::ExecProfile p1 = ex.profile();
          // Accumulate this round's per-phase means weighted by its calls.
          for (int i = 0; i < 5; ++i)
            m.prof.us[i] = (m.prof.us[i] * static_cast<double>(m.prof.calls) + p1.us[i] * static_cast<double>(p1.calls)) /
                           static_cast<double>(m.prof.calls + p1.calls);
          m.prof.calls += p1.calls;
          m.prof.bytes += p1.bytes;
          if (r.gbs > m.best.gbs) m.best = r;
          m.mean_us += r.us_per_call / rounds;
        }
      ft::moe_cpu::gpu_dot_limit_isa(ft::Isa::kAvx512);
      ft::moe_cpu::detail::gpu_dot_set_prefetch(default_pf);
      ex.set_schedule(default_sched);
      const size_t bank_bytes = se.gate.size() + se.up.size() + se.down.size();
      const size_t huge = se.gate.huge_bytes() + se.up.huge_bytes() + se.down.huge_bytes();
      fmt::print("{}: best of {} rounds (mean us/call after the /), {} threads, bank pages {} ({:.0f} of {:.0f} MiB on "
                 "huge pages; {})\n",
                 g.describe(), rounds, threads, pages, static_cast<double>(huge) / (1 << 20),
                 static_cast<double>(bank_bytes) / (1 << 20), ft::moe_cpu::thp_settings());
      const double base_us = modes[0].best.us_per_call;
      for (const Mode& m : modes) {
        fmt::print("  {:24s} {:7.2f} GB/s ({:3.0f}% of read, {:6.0f} / {:6.0f} us/call", m.name, m.best.gbs,
                   100 * m.best.gbs / rd.gbs, m.best.us_per_call, m.mean_us);
        if (m.exact) fmt::print("; {:+.0f}% time vs engine order", 100 * (m.best.us_per_call / base_us - 1));
        fmt::print(")\n");
        const auto& u = m.prof.us;
        fmt::print("  {:24s} phases (mean us): prep {:.1f}, gate|up {:.1f}, glu {:.1f}, down {:.1f}, combine {:.1f}; "
                   "gate|up + down alone {:.1f} GB/s ({:.0f}% of read)\n",
                   "", u[0], u[1], u[2], u[3], u[4], m.prof.gemv_gbs(), 100 * m.prof.gemv_gbs() / rd.gbs);
      }
    }
    ex.reset_profile();  // printed per mode above; nothing for the executor's teardown log
  } catch (const std::exception& e) {
    fmt::print(stderr, "ft-bench-moe-cpu: {}\n", e.what());
    return 1;
  }
  return 0;
}
