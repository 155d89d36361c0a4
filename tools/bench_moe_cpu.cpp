// ft-bench-moe-cpu: the CPU expert executor's decode step (one token, k experts, read from
// DRAM) in its modes -- the engine's kernels and exact mode (the GPU decode GEMV's
// summation order, moe_cpu/gpu_dot.h) with each SIMD family the CPU has (AVX2 rows, AVX-512
// rows) -- against the host read bandwidth of the same pool.
//   ft-bench-moe-cpu --threads 2 --types nvfp4,q8_0 --mib 512 --isas avx2,avx512
// Prints GB/s of expert weights read per call and its share of the measured read bandwidth.
// The exact mode's plan is the GPU's for the Qwen3-30B-A3B shapes (NVFP4: slab kernel for
// gate/up, packed for down; generic integer kernel: 32 lanes) without linking CUDA.
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
  int64_t mib = 512, n_embd = 2048, n_ff = 768;
  int n_used = 8;
  std::string types = "nvfp4,q8_0,mxfp4,bf16", isas = "avx2,avx512", pages = "default";
  app.add_option("--threads", threads, "pool threads");
  app.add_option("--types", types, "expert types, comma-separated");
  app.add_option("--isas", isas, "exact mode's SIMD families to time (avx2, avx512, scalar); absent ones are skipped");
  app.add_option("--mib", mib, "bytes of the synthetic bank and of the read buffer (MiB)");
  app.add_option("--iters", iters, "timed calls per mode and round");
  app.add_option("--rounds", rounds, "alternating rounds (best of each mode)");
  app.add_option("--bank-pages", pages,
                 "page advice for the expert bank: default, 2m (MADV_HUGEPAGE), 4k (MADV_NOHUGEPAGE); the backends' "
                 "banks are cudaHostAlloc'd");
  app.add_flag("!--no-pin", pin, "leave the threads unpinned (default: one per physical core, as the cpu backend)");
  app.add_option("--n-embd", n_embd);
  app.add_option("--n-ff", n_ff);
  app.add_option("--n-used", n_used);
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
    const auto rd = ft::moe_cpu::host_read_bandwidth(pool, static_cast<size_t>(mib) << 20, 5);
    fmt::print("host read: {:.2f} GB/s best, {:.2f} mean ({} threads, {} MiB)\n", rd.gbs, rd.mean_gbs, threads, mib);
    ft::moe_cpu::ExpertExecutor ex(pool);
    for (const std::string& tn : split(types)) {
      const auto t = ft::ggml_type_from_name(tn);
      if (!t) ft::fail("unknown type '{}'", tn);
      ft::moe_cpu::ExpertGeometry g;
      g.type = *t;
      g.n_embd = n_embd;
      g.n_ff = n_ff;
      g.n_used = n_used;
      ft::moe_cpu::SyntheticExperts se;
      ft::moe_cpu::make_synthetic_experts(g, mib << 20, se, bank_pages);
      ft::moe_cpu::ExpertNumerics num{ft::engine::ActType::kF32, ft::quant::ActQuant::kQ8};
      num.q8_quantised_only = true;
      // Alternating rounds, best of each: the machine may be shared (one loaded round does
      // not decide the comparison).
      std::vector<ft::Isa> fams;
      for (const std::string& in : split(isas)) {
        const auto isa = ft::isa_from_name(in);
        if (!isa) ft::fail("unknown ISA '{}' (scalar, avx2, avx512)", in);
        const bool ok = *isa == ft::Isa::kAvx512 ? ft::moe_cpu::gpu_dot_avx512_supported() : ft::isa_supported(*isa);
        if (ok)
          fams.push_back(*isa);
        else
          fmt::print("  (exact {}: not on this CPU)\n", in);
      }
      // Best and mean over the rounds (the backends report means: a decode step has no "best").
      ft::moe_cpu::GemvBwResult fast;
      double fast_us = 0;
      std::vector<ft::moe_cpu::GemvBwResult> exact(fams.size());
      std::vector<double> exact_us(fams.size(), 0.0);
      for (int round = 0; round < rounds; ++round) {
        num.gpu_plan = nullptr;
        const auto f = ft::moe_cpu::expert_gemv_bandwidth(ex, se.h, num, n_used, iters, 8);
        if (f.gbs > fast.gbs) fast = f;
        fast_us += f.us_per_call / rounds;
        num.gpu_plan = bench_plan;
        for (size_t i = 0; i < fams.size(); ++i) {
          ft::moe_cpu::gpu_dot_limit_isa(fams[i]);
          const auto e = ft::moe_cpu::expert_gemv_bandwidth(ex, se.h, num, n_used, iters, 8);
          if (e.gbs > exact[i].gbs) exact[i] = e;
          exact_us[i] += e.us_per_call / rounds;
        }
        ft::moe_cpu::gpu_dot_limit_isa(ft::Isa::kAvx512);
      }
      fmt::print("{}: best of {} rounds (mean us/call after the /), {} threads, bank pages {}\n", g.describe(), rounds,
                 threads, pages);
      fmt::print("  engine order  {:7.2f} GB/s ({:3.0f}% of read, {:6.0f} / {:6.0f} us/call)\n", fast.gbs,
                 100 * fast.gbs / rd.gbs, fast.us_per_call, fast_us);
      for (size_t i = 0; i < fams.size(); ++i)
        fmt::print("  exact {:7s} {:7.2f} GB/s ({:3.0f}% of read, {:6.0f} / {:6.0f} us/call; {:+.0f}% time vs engine order)\n",
                   ft::isa_name(fams[i]), exact[i].gbs, 100 * exact[i].gbs / rd.gbs, exact[i].us_per_call, exact_us[i],
                   100 * (exact[i].us_per_call / fast.us_per_call - 1));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "ft-bench-moe-cpu: {}\n", e.what());
    return 1;
  }
  return 0;
}
