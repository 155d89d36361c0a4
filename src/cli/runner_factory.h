// Builds the engine::Runner for --device (and --moe-backend, --dtype): the CPU engine or,
// in builds with the CUDA backend, the GPU session. `auto` picks cuda when a GPU answers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/runner.h"

namespace CLI {
class App;
}
namespace ft::model {
struct Model;
}
namespace ft::serve {
struct MoeCacheGauges;
}

namespace ft::cli {

struct RunnerOptions {
  std::string device = "auto";       // auto | cpu | cuda
  std::string moe_backend = "auto";  // auto | fused | offload | cpu | hybrid (cuda); auto | cpu (cpu)
  int64_t moe_cache_size = 0;        // GPU expert slots (0: unset)
  double moe_cache_rate = 0.0;       // slots as a fraction of all experts (0: unset; both unset: auto)
  int64_t moe_hybrid_max_fetch = -1; // hybrid: misses fetched per layer and step (-1: default)
  std::string dtype = "auto";
  std::string kv_type = "auto";      // auto | f32 | f16 | bf16 (cuda; the CPU keeps its KV in the dtype)
  int64_t n_ctx = 0;
  int64_t n_ubatch = 0;              // prompt micro-batch in tokens (0: auto, 512; 4096 with experts in host RAM)
  int threads = 0;
  bool warmup = true;                // Runner::warmup after loading (--no-warmup: not)
  std::function<void(uint64_t, uint64_t)> progress;  // weight upload (cuda)
};

// Adds --device, --dtype, --kv-type and the --moe-* options (backend, cache size, cache rate,
// hybrid max-fetch) to a subcommand, writing into o: one wording for generate, serve, bench and shell.
// help_prefix goes before each help text (shell: "--model: ").
void add_runner_options(CLI::App& sub, RunnerOptions& o, const std::string& help_prefix = "");

// "cpu" or "cuda"; throws for an unknown or unavailable device.
std::string resolve_device(const std::string& device);

std::unique_ptr<engine::Runner> make_runner(const model::Model& m, const RunnerOptions& o);

// The MoE backend's statistics table (per layer: hits, misses fetched / on the CPU, bytes
// moved) for `ft generate --stats`; "" when the runner has none (CPU engine, dense model).
std::string runner_moe_stats(const engine::Runner& r);

// The MoE expert cache's gauges for the server's /metrics (offload-family GPU backends);
// false, g untouched, when the runner has none. Callable while another thread decodes.
bool runner_moe_cache_gauges(const engine::Runner& r, serve::MoeCacheGauges* g);

}  // namespace ft::cli
