// The `hybrid` MoE backend: per layer and decode step, at most K = --moe-hybrid-max-fetch
// missing experts are fetched into GPU slots (the most recently routed first) and the
// other misses are computed on the CPU, overlapped with the fetch and the GPU's work:
//
//   moe_cache_ensure_hybrid  (slots for hits + up to K misses; CPU routes listed)
//   CPU task submitted FIRST (pack + ready flag): the CPU starts while the GPU fetches
//   gather of the K misses -> the fused grouped GEMVs over the slot pools, the down
//   projection per route (moe_experts_decode_slots, no combine) into b.ysort
//   wait for the CPU (its per-route outputs), then cuda::moe_combine_split: x += the ranks
//   in order, each from the side that computed it.
// Each route is used from exactly one side. With the CPU in exact mode (moe_cpu/gpu_dot.h)
// and the ranks summed in order, x gets the fused backend's bits: splitting the sum into a
// GPU part and a CPU part added one after the other would not (fp32 addition is not
// associative). Prefill streams whole layers through the SlotCache like offload.
//
// Speculative fetches (gpu/moe_spec.h, as offload; a.o.spec, else FT_MOE_SPEC=K, default 2, 0 off; plain
// routers only): the fetched misses are gathered on a second stream, and behind them up to K
// guessed experts of the next MoE layer, so that fewer of its misses go to the CPU. The GPU
// GEMVs wait for both copies (this layer's misses, the guesses made for it); the CPU task
// is submitted before either, as without speculation.
#pragma once

#include <memory>
#include <string>

#include "cuda/buffer.h"
#include "cuda/round.h"
#include "gpu/moe_backend.h"
#include "gpu/layer_clock.h"
#include "gpu/moe_cpu_backend.h"
#include "gpu/moe_offload.h"

namespace ft::gpu {

class MoeHybrid : public MoeBackend {
 public:
  // a.n_slot GPU slots (preloaded, SlotCache::preload); a.o.hybrid_max_fetch < 0:
  // FT_MOE_HYBRID_MAX_FETCH, else the share q of the expected misses that balances gather and
  // CPU time (moe_hybrid.cpp). The session normally sets both it and a.o.spec from its
  // start-up measurement (moe_tune_candidates); the formula serves FT_MOE_TUNE=0.
  explicit MoeHybrid(const MoeFactoryArgs& a);
  ~MoeHybrid() override;
  void decode(const MoeStep& st, cudaStream_t s) override;
  void prefill(const MoeStep& st, cudaStream_t s) override { cache_.prefill(st, s); }
  std::string describe() const override;
  MoeStats stats() const override;
  void reset_stats() override;
  size_t device_bytes() const override { return cache_.device_bytes() + extra_bytes_; }
  size_t host_bytes() const override { return hb_->bytes(); }
  int max_fetch() const { return max_fetch_; }

 private:
  std::shared_ptr<const HostBanks> hb_;
  SlotCache cache_;
  CpuExpertService svc_;
  int max_fetch_ = 1;
  std::string fetch_why_;
  cuda::DeviceBuffer gpu_wts_, cpu_ids_, cpu_wts_;
  size_t extra_bytes_ = 0;
  MoeSpec spec_;
  cudaStream_t gather_s_ = nullptr;  // with speculation: the fetches and the guessed copies
  cudaEvent_t fork_ = nullptr, gathered_ = nullptr;
  LayerClock clock_;  // FT_MOE_CLOCK=1
};

}  // namespace ft::gpu
