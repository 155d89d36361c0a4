// --moe-backend: the choice (auto) and the registry of host-bank backends.
#include <map>

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
  const bool fits = need <= static_cast<double>(free_bytes);
  if (why)
    *why = fmt::format("auto: experts {:.2f} GiB, file {:.2f} GiB, {:.2f} GiB free -> {}", experts / kGiB,
                       file / kGiB, static_cast<double>(free_bytes) / kGiB, fits ? "fused" : "offload");
  return fits ? "fused" : "offload";
}

std::unique_ptr<MoeBackend> make_moe_backend(const std::string& name, const MoeFactoryArgs& a) {
  if (name == "offload") return std::make_unique<MoeOffload>(*a.m, *a.w, a.hb, a.n_slot, a.max_routes);
  auto it = registry().find(name);
  if (it == registry().end()) fail("--moe-backend {}: not available in this build", name);
  return it->second(a);
}

}  // namespace ft::gpu
