// ft inspect FILE: metadata, tensors (type, shape, bytes), NVFP4/.scale pairs and the
// loader's check_scales verdict.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "format/gguf.h"
#include "model/check_scales.h"

namespace ft::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  bool all_metadata = false;
};

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

// Values of an F32 scale tensor as a short summary.
std::string scale_summary(const gguf::TensorInfo& t) {
  if (t.type != GgmlType::F32) return fmt::format("({} tensor, expected f32)", type_name(t.type));
  const int64_t n = t.n_elements();
  const auto* v = reinterpret_cast<const float*>(t.data);
  if (n == 1) return fmt::format("{:.6g}", v[0]);
  float lo = v[0], hi = v[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, v[i]);
    hi = std::max(hi, v[i]);
  }
  return fmt::format("{} values in [{:.6g}, {:.6g}]", n, lo, hi);
}

int run_inspect(const InspectOptions& o) {
  auto f = gguf::File::open(o.path);
  const auto& tensors = f->tensors();
  uint64_t total = 0;
  std::map<std::string, uint64_t> bytes_by_type;
  for (const auto& t : tensors) {
    total += t.nbytes;
    bytes_by_type[std::string(type_name(t.type))] += t.nbytes;
  }
  // NVFP4 weights and their second-level scales.
  struct Pair {
    std::string weight, scale, input_scale;
  };
  std::vector<Pair> pairs;
  for (const auto& t : tensors) {
    if (t.type != GgmlType::NVFP4) continue;
    std::string base = t.name;
    if (base.size() > 7 && base.compare(base.size() - 7, 7, ".weight") == 0)
      base.resize(base.size() - 7);
    Pair p{t.name, "", ""};
    if (const auto* s = f->find_tensor(base + ".scale")) p.scale = scale_summary(*s);
    if (const auto* s = f->find_tensor(base + ".input_scale")) p.input_scale = scale_summary(*s);
    pairs.push_back(p);
  }
  const auto verdict = model::check_scales_verdict(*f);

  if (o.json) {
    nlohmann::json j;
    j["file"] = o.path;
    j["version"] = f->version();
    j["alignment"] = f->alignment();
    j["data_offset"] = f->data_offset();
    j["file_size"] = f->file_size();
    nlohmann::json md = nlohmann::json::object();
    for (const auto& [k, v] : f->metadata()) md[k] = v.to_string(o.all_metadata ? SIZE_MAX : 16);
    j["metadata"] = md;
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : tensors) {
      std::vector<int64_t> ne(t.ne, t.ne + std::max(t.n_dims, 1));
      ts.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"shape", ne}, {"bytes", t.nbytes},
                    {"offset", t.offset}});
    }
    j["tensors"] = ts;
    nlohmann::json ps = nlohmann::json::array();
    for (const auto& p : pairs)
      ps.push_back({{"weight", p.weight}, {"scale", p.scale.empty() ? "absent (1.0)" : p.scale},
                    {"input_scale", p.input_scale.empty() ? "absent" : p.input_scale}});
    j["nvfp4"] = ps;
    j["check_scales"] = verdict.ok ? "ok" : verdict.message;
    // The file's strings need not be UTF-8: invalid bytes print as U+FFFD (a plain dump() throws json's type_error).
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!verdict.ok) fail("{}: {}", o.path, verdict.message);
    return 0;
  }

  fmt::print("file:        {}\n", o.path);
  fmt::print("format:      GGUF v{}, alignment {}, data at offset {}, {} ({} tensor bytes)\n",
             f->version(), f->alignment(), f->data_offset(), human_bytes(f->file_size()),
             human_bytes(total));
  fmt::print("\nmetadata ({} keys):\n", f->metadata().size());
  for (const auto& [k, v] : f->metadata())
    fmt::print("  {:<44} {:<8} {}\n", k, value_type_name(v.type), v.to_string(o.all_metadata ? SIZE_MAX : 8));
  fmt::print("\ntensors ({}):\n", tensors.size());
  for (const auto& t : tensors)
    fmt::print("  {:<40} {:<8} {:<24} {:>12}\n", t.name, type_name(t.type), t.shape_string(),
               human_bytes(t.nbytes));
  fmt::print("\nbytes by type:\n");
  for (const auto& [ty, b] : bytes_by_type) fmt::print("  {:<8} {}\n", ty, human_bytes(b));
  if (!pairs.empty()) {
    fmt::print("\nNVFP4 weights and second-level scales:\n");
    for (const auto& p : pairs)
      fmt::print("  {:<40} scale: {:<36} input_scale: {}\n", p.weight,
                 p.scale.empty() ? "absent (1.0)" : p.scale,
                 p.input_scale.empty() ? "absent" : p.input_scale + " (unused)");
  }
  fmt::print("\ncheck_scales: {}\n", verdict.ok ? "ok" : "REFUSED: " + verdict.message);
  std::fflush(stdout);
  if (!verdict.ok) fail("{}: {}", o.path, verdict.message);
  return 0;
}

}  // namespace

Command register_inspect(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand("inspect", "Show a GGUF file's metadata, tensors and NVFP4 scales");
  sub->add_option("file", opts->path, "GGUF file")->required();
  sub->add_flag("--json", opts->json, "Print one JSON object");
  sub->add_flag("--all", opts->all_metadata, "Print metadata arrays in full");
  return {sub, [opts] { return run_inspect(*opts); }};
}

}  // namespace ft::cli
