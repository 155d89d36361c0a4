#include "gpu/layer_clock.h"

#include <cstdlib>
#include <exception>

#include <fmt/format.h>

#include "core/log.h"
#include "cuda/check.h"
#include "cuda/stamp.h"

namespace ft::gpu {

LayerClock::LayerClock(int64_t n_layer, std::vector<std::string> points) : n_layer_(n_layer), names_(std::move(points)) {
  const char* c = std::getenv("FT_MOE_CLOCK");
  if (c == nullptr || c[0] != '1' || names_.size() < 2 || n_layer_ <= 0) return;
  buf_ = cuda::DeviceBuffer(sizeof(uint64_t) * names_.size() * static_cast<size_t>(n_layer_));
  FT_CUDA_CHECK(cudaMemset(buf_.get(), 0, buf_.bytes()));
}

LayerClock::~LayerClock() {
  if (!on()) return;
  try {
    log::info("{}", report());
  } catch (const std::exception&) {  // a failing device at exit: the diagnostic is lost, nothing else
  }
}

void LayerClock::stamp(int64_t layer, int64_t n_tok, int p, cudaStream_t s) {
  if (!on() || n_tok != 1) return;
  cuda::stamp(buf_.as<uint64_t>() + layer * static_cast<int64_t>(names_.size()) + p, s);
}

std::string LayerClock::report() const {
  if (!on()) return "";
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const size_t np = names_.size();
  const std::vector<uint64_t> c = cuda::to_host<uint64_t>(buf_, np * static_cast<size_t>(n_layer_));
  std::vector<double> sum(np, 0.0), n(np, 0.0);
  const uint64_t* prev = nullptr;
  for (int64_t l = 0; l < n_layer_; ++l) {
    const uint64_t* r = &c[static_cast<size_t>(l) * np];
    if (r[0] == 0) continue;  // not a MoE layer, or never stamped
    for (size_t p = 1; p < np; ++p) {
      sum[p] += static_cast<double>(r[p] - r[p - 1]);
      n[p] += 1;
    }
    if (prev != nullptr) {
      sum[0] += static_cast<double>(r[0] - prev[np - 1]);
      n[0] += 1;
    }
    prev = r;
  }
  std::string out = "MoE layer clock (last one-token step, us per layer, FT_MOE_CLOCK):";
  for (size_t p = 0; p < np; ++p)
    out += fmt::format("{} {} {:.1f}", p ? "," : "", names_[p], n[p] > 0 ? sum[p] / n[p] / 1e3 : 0.0);
  if (cpu_) {
    // Differences on one clock only: the host's realtime and %globaltimer drift apart by tens
    // of us within a run (H200, session 10), so the two hand-offs are not told apart.
    double window = 0, busy = 0, k = 0;
    for (int64_t l = 0; l < n_layer_; ++l) {
      const uint64_t* r = &c[static_cast<size_t>(l) * np];
      const auto [seen, done] = cpu_(l);
      if (r[0] == 0 || seen == 0 || done < seen) continue;
      window += static_cast<double>(r[p_waited_] - r[p_submit_]);
      busy += static_cast<double>(done - seen);
      k += 1;
    }
    if (k > 0)
      out += fmt::format("; from the submit point to the wait point {:.1f}, the CPU task ran {:.1f}: {:.1f} of "
                         "hand-off (the GPU's flag to the CPU and back, and any GPU work after the submit that "
                         "outlasts the task)",
                         window / k / 1e3, busy / k / 1e3, (window - busy) / k / 1e3);
  }
  return out;
}

}  // namespace ft::gpu
