#include "cli/runner_factory.h"

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/log.h"
#include "engine/session.h"
#include "model/model.h"
#include "serve/metrics.h"

#ifdef FT_HAVE_CUDA
#include "cuda/device.h"
#include "gpu/batch_runner_gpu.h"
#include "gpu/moe_cpu_backend.h"
#include "gpu/session.h"
#endif

namespace ft::cli {

void add_runner_options(CLI::App& sub, RunnerOptions& o, const std::string& help_prefix) {
  const std::string& p = help_prefix;
  sub.add_option("--device", o.device, p + "device: auto (default: cuda when a GPU answers), cpu, cuda");
  sub.add_option("--dtype", o.dtype,
                 p + "activation dtype: auto (default: llama.cpp's numerics, fp32 with Q8-rounded matmul inputs; "
                     "f16 KV on the GPU), float32 (exact fp32), bfloat16, float16");
  sub.add_option("--kv-type", o.kv_type,
                 p + "KV cache type (GPU): auto (default: the --dtype's; f16 in auto, fp32 for gemma4 to round as "
                     "llama.cpp's CPU build), f32, f16 (half of fp32's memory), bf16")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16"}));
  sub.add_option("--ubatch-size", o.n_ubatch,
                 p + "prompt micro-batch in tokens (default: 512; 4096 on the GPU when the experts live in host RAM, "
                     "where each micro-batch streams them over PCIe)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub.add_option("--moe-backend", o.moe_backend,
                 p + "MoE experts: auto (default: fused when they fit on the GPU, else the fastest of offload, "
                     "hybrid and cpu measured at start-up), fused, offload, cpu, hybrid (GPU); cpu (with --device cpu)");
  sub.add_flag("!--no-warmup", o.warmup,
               p + "skip the warm-up run after loading (GPU: a short prompt and a decode step, ~0.1 s, so that the "
                   "first request does not pay one-time costs)");
  sub.add_option("--moe-cache-size", o.moe_cache_size, p + "offload/hybrid: GPU expert slots (default: from free VRAM)");
  sub.add_option("--moe-cache-rate", o.moe_cache_rate,
                 p + "offload/hybrid: GPU expert slots as a fraction of all experts");
  sub.add_option("--moe-hybrid-max-fetch", o.moe_hybrid_max_fetch,
                 p + "hybrid: missing experts fetched per layer and step, the rest run on the CPU (default: "
                     "the fastest of three fetch / guess settings, measured at start-up)");
}

std::string resolve_device(const std::string& device) {
#ifdef FT_HAVE_CUDA
  const bool gpu = cuda::has_device();
#else
  const bool gpu = false;
#endif
  if (device == "auto") return gpu ? "cuda" : "cpu";
  if (device == "cpu") return device;
  if (device == "cuda") {
#ifdef FT_HAVE_CUDA
    if (!gpu) fail("--device cuda: no CUDA device answers (is the NVIDIA driver loaded?)");
    return device;
#else
    fail("--device cuda: this build has no CUDA backend (configure with -DFT_CUDA=ON)");
#endif
  }
  fail("--device '{}' is not one of auto, cpu, cuda", device);
}

std::unique_ptr<engine::Runner> make_runner(const model::Model& m, const RunnerOptions& o) {
  std::string dev = resolve_device(o.device);
#ifdef FT_HAVE_CUDA
  if (dev == "cuda" && o.device == "auto" && !gpu::gpu_supports(m)) {
    log::info("--device auto: the CUDA backend does not run '{}' yet, running on the CPU", m.arch->name);
    dev = "cpu";
  }
#endif
  if (dev == "cpu") {
    if (o.moe_backend != "auto" && o.moe_backend != "cpu")
      fail("--moe-backend '{}' needs --device cuda (on the CPU the experts run on the CPU)", o.moe_backend);
    if (o.kv_type != "auto")
      fail("--kv-type '{}' needs --device cuda (the CPU engine keeps its KV cache in the --dtype's type)", o.kv_type);
    // auto: llama.cpp's CPU numerics -- fp32 activations, rounded to Q8 blocks (or fp16/bf16
    // for half-precision weights) before each quantised-weight matmul, as ggml-cpu does.
    const bool dtype_auto = o.dtype == "auto";
    const auto act = dtype_auto ? std::optional<engine::ActType>(engine::ActType::kF32)
                                : engine::act_type_from_name(o.dtype);
    if (!act) fail("--dtype '{}' is not one of auto, float32, bfloat16, float16", o.dtype);
    engine::SessionOptions so;
    so.n_ctx = o.n_ctx;
    if (o.n_ubatch > 0) so.n_ubatch = o.n_ubatch;
    so.n_threads = o.threads;
    so.act = *act;
    so.act_quant = dtype_auto ? quant::ActQuant::kQ8 : quant::ActQuant::kNone;
    return std::make_unique<engine::Session>(m, so);
  }
#ifdef FT_HAVE_CUDA
  gpu::register_moe_cpu_backends();  // --moe-backend cpu / hybrid
  gpu::register_gpu_batch_runner();  // engine::make_batch_runner for a GpuSession (ft serve)
  gpu::GpuSessionOptions go;
  go.moe.name = o.moe_backend;
  go.moe.cache_size = o.moe_cache_size;
  go.moe.cache_rate = o.moe_cache_rate;
  go.moe.hybrid_max_fetch = o.moe_hybrid_max_fetch;
  go.moe.threads = o.threads;
  go.n_ctx = o.n_ctx;
  go.ubatch_auto = o.n_ubatch <= 0;
  if (o.n_ubatch > 0) go.n_ubatch = o.n_ubatch;
  go.dtype = o.dtype;
  go.kv_type = o.kv_type;
  go.progress = o.progress;
  auto s = std::make_unique<gpu::GpuSession>(m, go);
  if (o.warmup) s->warmup();
  return s;
#else
  fail("--device cuda: this build has no CUDA backend");
#endif
}

std::string runner_moe_stats(const engine::Runner& r) {
#ifdef FT_HAVE_CUDA
  if (const auto* g = dynamic_cast<const gpu::GpuSession*>(&r)) {
    const gpu::MoeStats s = g->moe().stats();
    if (!s.layers.empty()) return gpu::format_moe_stats(s);
  }
#else
  (void)r;
#endif
  return "";
}

bool runner_moe_cache_gauges(const engine::Runner& r, serve::MoeCacheGauges* g) {
#ifdef FT_HAVE_CUDA
  if (const auto* sess = dynamic_cast<const gpu::GpuSession*>(&r)) {
    gpu::MoeCacheGauges c;
    if (!sess->moe().cache_gauges(&c)) return false;
    g->present = true;
    g->slots = c.slots;
    g->slots_used = c.slots_used;
    g->routes = c.routes;
    g->hits = c.hits;
    g->misses_fetched = c.misses_fetched;
    g->misses_cpu = c.misses_cpu;
    return true;
  }
#else
  (void)r;
  (void)g;
#endif
  return false;
}

}  // namespace ft::cli
