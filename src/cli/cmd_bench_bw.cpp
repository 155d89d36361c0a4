// ft bench-bw: the bandwidths the MoE backends live on, measured on this machine --
//   host read     STREAM-style read over one pinned thread per physical core
//   pinned H2D    cudaMemcpyAsync from page-locked memory (256 MiB x reps)
//   CPU GEMV      the real CPU expert executor as the backends run it (exact mode unless
//                 FT_MOE_CPU_EXACT=0), one token, n_used cold experts per call
//   gather        the slot cache's one-launch expert gather from mapped pinned memory
//                 (n_used experts per call, as a decode step's misses; and a whole layer)
//   concurrent    CPU GEMV and gather at the same time (what hybrid overlaps)
// for each expert format asked for (the loaded model's by default), with the model's expert
// geometry (or Qwen3-30B-A3B's: H2048 I768 E128 k8). Writes a JSON profile keyed by GPU name
// and format (--out).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "format/ggml_type.h"
#include "model/model.h"
#include "moe_cpu/cpu_pool.h"
#include "moe_cpu/expert_exec.h"
#include "moe_cpu/gemv_bw.h"
#include "moe_cpu/host_bw.h"
#include "quant/matmul.h"

#ifdef FT_HAVE_CUDA
#include "cuda/device.h"
#include "gpu/moe_bw.h"
#include "gpu/moe_cpu_backend.h"
#endif

namespace ft::cli {
namespace {

struct BwOptions {
  std::string model;
  std::vector<std::string> formats;
  int64_t n_embd = 0, n_ff = 0, n_expert = 0;
  int n_used = 0;
  int threads = 0;
  int64_t host_mib = 1024;
  int64_t bank_mib = 2048;
  int iters = 64;
  int reps = 10;
  bool q8 = true;
  std::string out;
  bool json = false;
};

std::optional<GgmlType> type_from_name(const std::string& n) {
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::BF16, GgmlType::Q6_K,
                     GgmlType::F16})
    if (type_name(t) == n) return t;
  return std::nullopt;
}

int run_bench_bw(const BwOptions& o) {
  moe_cpu::ExpertGeometry base;  // Qwen3-30B-A3B
  std::vector<GgmlType> types;
  std::unique_ptr<model::Model> m;
  if (!o.model.empty()) {
    m = model::load_model(o.model);
    for (const model::Layer& L : m->layers) {
      if (!L.is_moe()) continue;
      const engine::ExpertWeights& w = L.experts;
      base.n_embd = w.n_embd;
      base.n_ff = w.n_ff;
      base.n_expert = w.n_expert;
      base.n_used = static_cast<int>(m->hp.n_expert_used[0]);
      types.push_back(w.gate_up ? w.gate_up.w.type : w.gate.w.type);
      break;
    }
    if (types.empty()) fail("{}: no routed experts (bench-bw measures MoE expert formats)", o.model);
  }
  for (const std::string& f : o.formats) {
    const auto t = type_from_name(f);
    if (!t) fail("--format '{}': expected one of nvfp4, mxfp4, q4_K, q8_0, bf16, q6_K, f16", f);
    if (std::find(types.begin(), types.end(), *t) == types.end()) types.push_back(*t);
  }
  if (types.empty()) types.push_back(GgmlType::NVFP4);
  if (o.n_embd > 0) base.n_embd = o.n_embd;
  if (o.n_ff > 0) base.n_ff = o.n_ff;
  if (o.n_expert > 0) base.n_expert = o.n_expert;
  if (o.n_used > 0) base.n_used = o.n_used;

  moe_cpu::CpuPool pool(moe_cpu::CpuPoolOptions{o.threads, true, 1});
  auto say = [&](const std::string& s) {
    if (!o.json) fmt::print("{}\n", s);
  };
  nlohmann::json prof;
  prof["cpu"] = {{"threads", pool.size()}, {"pool", pool.describe()}, {"isa", quant::matmul_isa()}};
  say(fmt::format("CPU pool: {} ({})", pool.describe(), quant::matmul_isa()));
  const auto hr = moe_cpu::host_read_bandwidth(pool.pool(), static_cast<size_t>(o.host_mib) << 20, o.reps);
  prof["host_read_gbs"] = hr.gbs;
  say(fmt::format("host read:   {:7.1f} GB/s best, {:.1f} mean ({} MiB x {})", hr.gbs, hr.mean_gbs, o.host_mib,
                  o.reps));
  std::string gpu;
#ifdef FT_HAVE_CUDA
  if (cuda::has_device()) {
    gpu = gpu::gpu_name();
    const auto h2d = gpu::pinned_h2d_bandwidth(size_t{256} << 20, std::max(3, o.reps));
    prof["h2d_gbs"] = h2d.gbs;
    say(fmt::format("pinned H2D:  {:7.1f} GB/s best, {:.1f} mean (256 MiB, {})", h2d.gbs, h2d.mean_gbs, gpu));
  }
#endif
  prof["gpu"] = gpu;
  moe_cpu::ExpertExecutor ex(pool.pool());
  moe_cpu::ExpertNumerics num;
  num.act_quant = o.q8 ? quant::ActQuant::kQ8 : quant::ActQuant::kNone;
  num.q8_quantised_only = true;
  // As the cpu / hybrid backends run it: exact mode (the GPU decode GEMV's order, its flow
  // schedule) unless FT_MOE_CPU_EXACT=0. Until session 9 this measured the engine order, which
  // the backends have not run by default since session 6 (H200 host: 58.9 GB/s here against
  // 67.4 for the exact rows in ft-bench-moe-cpu).
  std::string gemv_mode = "engine order";
#ifdef FT_HAVE_CUDA
  if (gpu::moe_cpu_exact_enabled()) {
    num.gpu_plan = gpu::gpu_dot_plan;
    gemv_mode = "exact: the GPU decode order";
  }
#endif
  prof["cpu"]["gemv_mode"] = gemv_mode;
  const int64_t bank_bytes = o.bank_mib << 20;
  for (GgmlType t : types) {
    moe_cpu::ExpertGeometry g = base;
    g.type = t;
    nlohmann::json f;
    f["geometry"] = {{"n_embd", g.n_embd}, {"n_ff", g.n_ff}, {"n_expert", g.n_expert}, {"n_used", g.n_used},
                     {"expert_bytes", g.expert_bytes()}};
    say(fmt::format("format {}", g.describe()));
    moe_cpu::SyntheticExperts se;
    moe_cpu::make_synthetic_experts(g, bank_bytes, se);
    const auto c = moe_cpu::expert_gemv_bandwidth(ex, se.h, num, g.n_used, o.iters, 8);
    f["cpu_gemv_gbs"] = c.gbs;
    f["cpu_gemv_us"] = c.us_per_call;
    say(fmt::format("  CPU expert GEMV: {:7.1f} GB/s ({:.0f}% of host read), {:.1f} us per layer ({} experts, "
                    "{:.2f} MiB; {})",
                    c.gbs, 100.0 * c.gbs / hr.gbs, c.us_per_call, g.n_used,
                    static_cast<double>(c.bytes_per_call) / (1 << 20), gemv_mode));
#ifdef FT_HAVE_CUDA
    if (!gpu.empty()) {
      gpu::GatherBench gb(g, bank_bytes, g.n_used);
      const auto gr = gb.run(o.iters, 8);
      gpu::GatherBench gl(g, bank_bytes, static_cast<int>(std::min<int64_t>(g.n_expert, 128)));
      const auto gf = gl.run(std::max(3, o.iters / 8), 2);
      f["gather_gbs"] = gr.gbs;
      f["gather_us"] = gr.us_per_call;
      f["gather_layer_gbs"] = gf.gbs;
      say(fmt::format("  GPU gather:      {:7.1f} GB/s, {:.1f} us per {} experts; whole layer ({} experts) {:.1f} GB/s",
                      gr.gbs, gr.us_per_call, g.n_used, std::min<int64_t>(g.n_expert, 128), gf.gbs));
      // Both at once for about a second: the CPU loop on a helper thread (it drives the pool).
      std::atomic<bool> stop{false};
      moe_cpu::GemvBwResult cc;
      std::thread cpu_thread([&] { cc = moe_cpu::expert_gemv_bandwidth(ex, se.h, num, g.n_used, 0, 4, &stop); });
      std::thread timer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        stop = true;
      });
      const auto gc = gb.run(0, 4, &stop);
      timer.join();
      cpu_thread.join();
      f["concurrent"] = {{"cpu_gemv_gbs", cc.gbs}, {"gather_gbs", gc.gbs}};
      say(fmt::format("  concurrent:      CPU GEMV {:.1f} GB/s + gather {:.1f} GB/s = {:.1f} GB/s", cc.gbs, gc.gbs,
                      cc.gbs + gc.gbs));
    }
#endif
    prof["formats"][std::string(type_name(t))] = f;
  }
  nlohmann::json doc;
  doc["profiles"][gpu.empty() ? "cpu-only" : gpu] = prof;
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    if (!out) fail("--out {}: cannot write", o.out);
    out << doc.dump(2) << "\n";
    say(fmt::format("profile written to {}", o.out));
  }
  if (o.json) fmt::print("{}\n", doc.dump(2));
  return 0;
}

}  // namespace

Command register_bench_bw(CLI::App& app) {
  auto o = std::make_shared<BwOptions>();
  auto* sub = app.add_subcommand("bench-bw", "Host / PCIe / CPU expert GEMV / expert gather bandwidth (MoE backends)");
  sub->add_option("--model,-m", o->model, "GGUF model: its expert format and geometry (optional)");
  sub->add_option("--format", o->formats, "expert formats: nvfp4, mxfp4, q4_K, q8_0, bf16 (default: the model's, or nvfp4)")
      ->delimiter(',');
  sub->add_option("--n-embd", o->n_embd, "expert input width (default: the model's, or 2048)");
  sub->add_option("--n-ff", o->n_ff, "expert hidden width (default: the model's, or 768)");
  sub->add_option("--n-expert", o->n_expert, "experts per layer (default: the model's, or 128)");
  sub->add_option("--n-used", o->n_used, "experts per token (default: the model's, or 8)");
  sub->add_option("--threads,-t", o->threads, "CPU threads (default: physical cores - 1, pinned)");
  sub->add_option("--host-mib", o->host_mib, "host read buffer (default 1024 MiB)");
  sub->add_option("--bank-mib", o->bank_mib, "synthetic expert bank cap (default 2048 MiB)");
  sub->add_option("--iters", o->iters, "timed GEMV / gather calls (default 64)");
  sub->add_option("--reps", o->reps, "host read / H2D repetitions (default 10)");
  sub->add_flag("!--no-q8", o->q8, "fp32 activations (default: Q8, as --dtype auto)");
  sub->add_option("--out", o->out, "write the JSON profile here");
  sub->add_flag("--json", o->json, "print the JSON profile instead of the table");
  return {sub, [o] { return run_bench_bw(*o); }};
}

}  // namespace ft::cli
