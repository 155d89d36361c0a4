// A diagnostic clock for the MoE backends' decode steps (FT_MOE_CLOCK=1): named points of
// each MoE layer stamped on the GPU (cuda/stamp.h), kept for the last one-token step, and
// logged as the mean time of each segment per layer when the backend goes: the first segment
// is the GPU's work between one layer's last point and the next layer's first (attention,
// norms, router). Each stamp is one more launch (~2 us in a graph), so compare segments,
// not the step time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "cuda/buffer.h"

namespace ft::gpu {

class LayerClock {
 public:
  // points: the names of the segments ending at points 1..n-1 (points[0] names the segment
  // between layers). Off (every call a no-op) unless FT_MOE_CLOCK=1.
  LayerClock(int64_t n_layer, std::vector<std::string> points);
  ~LayerClock();
  LayerClock(const LayerClock&) = delete;
  LayerClock& operator=(const LayerClock&) = delete;
  bool on() const { return buf_.get() != nullptr; }
  // Point p of `layer` (one-token steps only: n_tok == 1).
  void stamp(int64_t layer, int64_t n_tok, int p, cudaStream_t s);
  std::string report() const;  // synchronises the device
  // With the CPU's side of a task (cpu_handshake.h's seen / done stamps): the time from point
  // `submit` to point `waited` against the time the CPU task ran, per layer.
  using CpuTimes = std::function<std::pair<int64_t, int64_t>(int64_t layer)>;
  void set_cpu(CpuTimes f, int submit, int waited) {
    cpu_ = std::move(f);
    p_submit_ = submit;
    p_waited_ = waited;
  }

 private:
  int64_t n_layer_ = 0;
  std::vector<std::string> names_;
  cuda::DeviceBuffer buf_;  // [n_layer][points] uint64 ns
  CpuTimes cpu_;
  int p_submit_ = 0, p_waited_ = 0;
};

}  // namespace ft::gpu
