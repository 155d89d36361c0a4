// Speculative fetches of the offload-family MoE backends (offload and hybrid): PCIe idles
// while a layer computes, so at MoE layer l the next MoE layer's router is applied to l's
// hidden state and up to K of the experts it picks that are not resident are copied into
// LRU slots (cuda::moe_cache_prefetch: inside the step, so nothing layer l uses is evicted)
// on the backend's gather stream, right behind l's own misses. A right guess turns a miss
// of the next layer into a hit (offload) or a route the CPU would have computed into a GPU
// one (hybrid); a wrong one costs PCIe time and an LRU slot. Guesses never change a bit of
// the result: they only decide which experts are resident.
//
// Where the guess comes from (FT_MOE_SPEC_FROM):
//   in  (default): the next layer's router on l's normed FFN input, st.h -- known before
//        l's ensure, so the guessed copies queue right behind l's misses (83.2% of the next
//        layer's routes on the H200's Qwen3-30B-A3B-shaped random file);
//   out: on rmsnorm(l's output) with the next layer's FFN norm -- 97.6% right, but known only
//        after l's experts, so PCIe idles for l's miss GEMVs and the combine first. Only where
//        st.x is the residual (no shared expert added after the routed ones). H200, offload at
//        rate 0.5: 71.8 tok/s against 78.0 from the FFN input (benches/h200.md, session 8).
//
// Ordering (the cache state is touched by ensure on the main stream and prefetch on the
// gather stream, always in this order: ensure(l), prefetch(l+1), ensure(l+1), ...):
//   wait_booked(s)  before l+1's ensure: the prefetch bookkeeping of l+1 is done. With
//                   FT_MOE_SPEC_EARLY=0 (session 7's order) it waits for the copies too,
//                   which leaves PCIe idle during the ensure and the fork;
//   wait_copies(s)  before GEMVs that read l+1's resident slots: the guessed bytes landed.
// So l+1's own misses queue on the gather stream behind the guessed copies with no gap
// (H200, session 8: 78.0 vs 77.1 tok/s for session 7's order; PCIe busy 94% of a step's copy
// window, 7-8 us idle before each gather; FT_MOE_GATHER_CLOCK=1 shows it).
//
// Only for plain routers: every MoE layer's router one fp32-logit GEMV + top-k launch
// (cuda::moe_router_route) over the FFN norm's output (no row scale, no router input scale
// of its own); elsewhere speculation is off.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/moe_cache.h"
#include "gpu/moe_backend.h"

namespace ft::gpu {

class SlotCache;

class MoeSpec {
 public:
  // k: guesses a layer (0: off). Off as well when the routers are not plain (logged when
  // FT_MOE_SPEC asked for it).
  MoeSpec(const model::Model& m, const DeviceWeights& w, int64_t max_routes, int k);
  ~MoeSpec();
  MoeSpec(const MoeSpec&) = delete;
  MoeSpec& operator=(const MoeSpec&) = delete;

  // FT_MOE_SPEC=K if set, else def.
  static int k_from_env(int def);
  // Whether each MoE layer's router is plain (see above); why: the first that is not.
  static bool plain_routers(const model::Model& m, const DeviceWeights& w, std::string* why);

  int k() const { return k_; }
  // The routes guess() left for the next MoE layer (device, [n_tok * n_used], rank order).
  const int32_t* pred() const { return pred_.as<int32_t>(); }
  bool from_output() const { return from_out_; }
  bool early() const { return early_; }
  // The next MoE layer after `layer` (-1: none); the first MoE layer of the model.
  int64_t next_moe(int64_t layer) const { return next_moe_[static_cast<size_t>(layer)]; }
  int64_t first_moe() const { return first_moe_; }

  // Main stream, before the layer's ensure (see above).
  void wait_booked(cudaStream_t s);
  // Main stream: the next layer's routes guessed into pred (from st.h before the layer's
  // experts, or from st.x after them: from_output()). Records the event fetch() waits for.
  void guess(const MoeStep& st, cudaStream_t s);
  // Gather stream g, behind the layer's own gather: up to k guesses booked (prefetch, on a
  // stream of its own) and gathered.
  void fetch(const SlotCache& c, const MoeStep& st, cudaStream_t g);
  // Main stream, before GEMVs that read the layer's resident slots, and before this layer's
  // fetch(): cudaStreamWaitEvent binds the event's latest record, and fetch() records it
  // again for the next layer's copies.
  void wait_copies(cudaStream_t s);

  uint64_t fetched() const;  // experts fetched on a guess since the last reset (synchronises)
  void reset_stats();
  size_t device_bytes() const { return bytes_; }
  std::string describe() const;

 private:
  int k_ = 0;
  bool from_out_ = false, early_ = true;
  const model::Model& m_;
  const DeviceWeights& w_;
  int64_t max_routes_ = 0;
  std::vector<int64_t> next_moe_;
  int64_t first_moe_ = -1;
  int64_t guessed_for_ = -1;  // layer whose guess is in pred_ (fetch pending)
  bool booked_pending_ = false, copies_pending_ = false;
  cudaEvent_t routed_ = nullptr, booked_ = nullptr, copied_ = nullptr;
  cudaStream_t book_s_ = nullptr;  // the prefetch bookkeeping (beside the layer's gather)
  cuda::DeviceBuffer pred_, logits_, wts_, ticket_, miss_, count_, hnorm_;
  cuda::CacheMisses m_miss_;
  size_t bytes_ = 0;
};

}  // namespace ft::gpu
