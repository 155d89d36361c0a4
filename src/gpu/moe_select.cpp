// --moe-backend: the choice (auto) and the registry of host-bank backends.
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "gpu/host_bank.h"
#include "gpu/moe_backend.h"
#include "gpu/moe_offload.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

std::map<std::string, MoeFactory>& registry() {
  static std::map<std::string, MoeFactory> r;
  return r;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

void register_moe_backend(const std::string& name, MoeFactory f) { registry()[name] = f; }

std::string choose_moe_backend(const model::Model& m, const MoeBackendOptions& o, size_t free_bytes,
                               std::string* why) {
  const std::string& n = o.name;
  if (n != "auto" && n != "fused" && n != "offload" && n != "cpu" && n != "hybrid")
    fail("--moe-backend '{}' is not one of auto, fused, offload, cpu, hybrid", n);
  bool moe = false;
  for (const model::Layer& L : m.layers) moe |= L.is_moe();
  if (!moe) {
    if (why) *why = "dense model";
    return "fused";
  }
  if (n != "auto") {
    if (why) *why = "--moe-backend " + n;
    return n;
  }
  // The experts plus the rest of the weights (bounded by the file) must leave a KV and
  // workspace margin: 10% of the free memory and at least 2 GiB.
  const double experts = static_cast<double>(HostBanks::expert_bytes(m));
  const double file = static_cast<double>(m.file->file_size());
  const double need = std::max(experts, file) + std::max(2.0 * kGiB, 0.1 * static_cast<double>(free_bytes));
  // FT_MOE_AUTO_HOST=1: as if the experts did not fit (tests, and trying the host-RAM
  // backends of auto on a model that fits).
  const char* host = std::getenv("FT_MOE_AUTO_HOST");
  const bool forced = host != nullptr && host[0] == '1';
  const bool fits = need <= static_cast<double>(free_bytes) && !forced;
  if (why)
    *why = fmt::format("auto: experts {:.2f} GiB, file {:.2f} GiB, {:.2f} GiB free{} -> {}", experts / kGiB,
                       file / kGiB, static_cast<double>(free_bytes) / kGiB, forced ? " (FT_MOE_AUTO_HOST=1)" : "",
                       fits ? "fused" : "host RAM");
  return fits ? "fused" : "offload";
}

// The hybrid variants measured at start-up (guessed experts a layer, misses fetched a layer).
// H200, Qwen3-30B-A3B-shaped NVFP4 at half the experts cached, `ft bench` tg128 (benches/h200.md,
// session 10): (2, 0) 102.9, (1, 0) 113.5, (0, 1) 102.5, (0, 2) 105.6, (1, 1) 109.9, (2, 1)
// 90.6 tok/s against offload's 94.8 in one call, and the order moved between hosts: which one
// wins depends on the host's CPU and PCIe, so it is measured, not assumed.
std::vector<MoeCandidate> moe_tune_candidates(const std::string& chosen, const MoeBackendOptions& o) {
  std::vector<MoeCandidate> c;
  if (const char* e = std::getenv("FT_MOE_TUNE"); e && e[0] == '0') return c;
  auto hybrids = [&] {
    for (const auto& [k, f] : {std::pair{2, 0}, std::pair{1, 0}, std::pair{0, 1}}) {
      MoeCandidate h{"hybrid", o, fmt::format("hybrid (guesses {}, fetch {})", k, f)};
      h.o.name = "hybrid";
      h.o.spec = k;
      h.o.hybrid_max_fetch = f;
      c.push_back(h);
    }
  };
  if (o.name == "auto" && chosen != "fused") {
    MoeCandidate off{"offload", o, "offload"};
    off.o.name = "offload";
    c.push_back(off);
    if (registry().count("hybrid")) hybrids();
    if (registry().count("cpu")) {
      MoeCandidate cpu{"cpu", o, "cpu"};
      cpu.o.name = "cpu";
      c.push_back(cpu);
    }
  } else if (o.name == "hybrid" && o.hybrid_max_fetch < 0 && o.spec < 0 && !std::getenv("FT_MOE_HYBRID_MAX_FETCH") &&
             !std::getenv("FT_MOE_SPEC")) {
    hybrids();
  }
  return c;
}

std::unique_ptr<MoeBackend> make_moe_backend(const std::string& name, const MoeFactoryArgs& a) {
  if (name == "offload") return std::make_unique<MoeOffload>(*a.m, *a.w, a.hb, a.n_slot, a.max_routes);
  auto it = registry().find(name);
  if (it == registry().end()) fail("--moe-backend {}: not available in this build", name);
  return it->second(a);
}

}  // namespace ft::gpu
