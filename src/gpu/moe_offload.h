// The offload MoE backend: routed experts live in pinned host banks (gpu/host_bank.h); S GPU
// slots cache them (cuda/moe_cache.h: LRU with device-side bookkeeping).
//
// Decode (capturable, per layer): ensure (hits, LRU victims, slot ids, miss list) -> ONE
// gather launch copying the misses from mapped pinned memory into their slots -> the fused
// backend's grouped GEMVs on the slot pools (same kernels, same bytes: bit-identical to
// fused). Prefill: each layer's experts stream whole through a layer buffer of E slots
// (two when S >= 2E: layer l+1 copies on a copy stream while layer l computes), then the
// fused grouped GEMMs; the buffer slots are invalidated for decode first.
//
// SlotCache is the part the hybrid backend shares (pools, bookkeeping, gather, prefill).
//
// FT_MOE_OFFLOAD_OVERLAP=1 (off by default: on the H200 66.7-67.0 vs 67.1-68.1 tok/s, the
// extra launches cost what the hidden GEMVs save): the hit routes' experts run while the
// misses are gathered. The
// ensure also splits the routes (cuda::CacheSplit): a fork in the (captured) stream work
// sends the gather to a second stream while the main one runs the grouped GEMVs over the hit
// routes (misses pointed at a zeroed dummy slot past the cache) into per-route rows; after
// the join the misses run the same way (hits at the dummy) into a second set of rows; then
// cuda::moe_combine_split sums the ranks in order, each from the pass that computed it, with
// the grouped combine's arithmetic, so x gets the fused backend's bits (as hybrid does).
//
// FT_MOE_PREGATE=1 (a measurement, qwen3moe): at each MoE layer l the next MoE layer's router
// also runs on l's normed FFN input (a) and on rmsnorm(l's output) with the next layer's FFN
// norm (b); the next layer's real routes are compared with both (top-k overlap, and among its
// misses), printed by `ft generate --stats`. H200, Qwen3-30B-A3B-shaped random file: (a) 83.2%,
// (b) 97.6% of the routes (chance: 8/128 = 6%); the tiny test models 57-60% / 90-93%.
//
// Speculative fetches (gpu/moe_spec.h; default K = 2, FT_MOE_SPEC=K, 0 off; plain routers
// only; implies the overlap, whose gather stream carries them): the next MoE layer's router
// guesses its experts from this layer's hidden state, and up to K absent ones are copied into
// LRU slots right behind this layer's misses while it computes. The next layer's ensure waits
// only for that bookkeeping, its hit GEMVs for the bytes, so its own misses queue on the
// gather stream behind the guesses without PCIe idling through the ensure.
//
// FT_MOE_GATHER_CLOCK=1 (a diagnostic): every decode gather stamps its start and end
// (%globaltimer), and `ft generate --stats` logs the last step's PCIe busy and idle time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/moe_cache.h"
#include "gpu/host_bank.h"
#include "gpu/moe_backend.h"
#include "gpu/moe_spec.h"

namespace ft::gpu {

class SlotCache {
 public:
  // n_slot >= the largest n_expert of a layer (checked); max_routes: routes of one decode
  // call at most (kGemvMaxTokens * n_used). Pools are zeroed (slot 0 never holds non-finite
  // bytes, see moe_cache.h's hybrid contract).
  SlotCache(const model::Model& m, const DeviceWeights& w, const HostBanks& hb, int64_t n_slot,
            int64_t max_routes);
  ~SlotCache();
  SlotCache(const SlotCache&) = delete;
  SlotCache& operator=(const SlotCache&) = delete;

  // Slots for --moe-cache-size / --moe-cache-rate, or from free_bytes (device memory free
  // after weights, KV and workspace) keeping a reserve; clamped to [E (2E when affordable),
  // all experts]. `why` gets the reasoning for the log.
  static int64_t choose_slots(const model::Model& m, const HostBanks& hb, const MoeBackendOptions& o,
                              size_t free_bytes, std::string* why);
  // Device bytes of one slot over all pools (the bank row included).
  static int64_t slot_bytes(const HostBanks& hb);

  int64_t n_slot() const { return st_.n_slot; }
  // A zeroed slot position past the cache (pools hold n_slot + 1 experts): never assigned,
  // read by routes a grouped launch must skip (the overlap's passes).
  int32_t dummy_slot() const { return static_cast<int32_t>(st_.n_slot); }
  const cuda::CacheState& state() const { return st_; }
  const cuda::CacheMisses& misses() const { return miss_; }
  unsigned long long* counters() const { return counters_.as<unsigned long long>(); }  // device [L][4]
  int32_t* slot_ids() const { return slot_ids_.as<int32_t>(); }                         // device [max_routes]
  // Layer `layer`'s experts as the grouped kernels read the pools from slot `first` on
  // (n_expert = n positions).
  ExpertView view(int64_t layer, int64_t first, int64_t n) const;
  // Copies the staged misses of `layer` into their slots (one launch; per tensor kind with
  // FT_MOE_COPY=per_bank). Capturable.
  void gather(int64_t layer, int64_t max_miss, cudaStream_t s) const;
  // The layer's experts streamed whole into a prefill buffer, then the fused grouped GEMMs
  // (ids = raw expert ids). Not capturable.
  void prefill(const MoeStep& st, cudaStream_t s);

  // Fills the empty slots before the first step (offload and hybrid; FT_MOE_PRELOAD=0 off):
  // the first experts of every MoE layer, as many a layer as the slots outside the prefill
  // buffers hold, through the decode path (moe_cache_ensure + one gather a layer), in layer
  // order, so the LRU evicts layer 0's first. Without it the cache starts empty and fills one
  // fetch at a time: hybrid fetching 1 expert a layer and step needs 64 steps to fill half of
  // Qwen3-30B-A3B's experts, the whole of a short generation. Synchronises; returns the
  // experts loaded (0: off or no room).
  int64_t preload();

  MoeStats stats() const;
  void reset_stats();
  // The same from another staging list (the speculative fetches'). clock: the timeline
  // record the launch stamps (kClockDemand / kClockSpec, for the layer it copies; -1 none).
  void gather(int64_t layer, int64_t max_miss, cudaStream_t s, const cuda::CacheMisses& m, int clock = -1) const;
  // The gather timeline (FT_MOE_GATHER_CLOCK=1, a diagnostic): each decode gather stamps its
  // layer's record with its first CTA's start and last CTA's end (cuda::GatherPlan::clock);
  // clock_reset (stream work, at the step's first MoE layer) clears them, timeline() reads
  // the last step's records back and sums where PCIe was busy and where it idled.
  static constexpr int kClockDemand = 0, kClockSpec = 1;
  bool clock_on() const { return clock_.get() != nullptr; }
  void clock_reset(cudaStream_t s) const;
  std::string timeline() const;
  // Occupancy and decode counters since load (MoeBackend::cache_gauges' contract).
  MoeCacheGauges gauges() const;
  size_t device_bytes() const { return device_bytes_; }
  bool per_bank() const { return per_bank_; }
  int n_prefill_buffers() const { return n_buf_; }

 private:
  void issue_layer_copy(int64_t moe_idx);

  const HostBanks& hb_;
  std::vector<int64_t> moe_layers_;   // layer index of each MoE layer, in order
  std::vector<int64_t> moe_idx_of_;   // [n_layer] -> index in moe_layers_, -1 dense
  int64_t n_expert_max_ = 0;
  // Pools: per kind (gate, up, gate_up, down) [S][stride]; the bank [S][4] fp32.
  static constexpr int kKinds = 4;
  cuda::DeviceBuffer pool_[kKinds], bank_;
  int64_t stride_[kKinds] = {0, 0, 0, 0};
  cuda::DeviceBuffer slot_of_, expert_of_slot_, last_use_, step_, recency_;
  cuda::DeviceBuffer n_miss_, miss_slot_, miss_expert_, slot_ids_, counters_;
  cuda::DeviceBuffer clock_;  // [n_layer][2][4] uint64 (FT_MOE_GATHER_CLOCK)
  cuda::CacheState st_;
  cuda::CacheMisses miss_;
  size_t device_bytes_ = 0;
  bool per_bank_ = false;
  // Prefill streaming.
  int n_buf_ = 1;
  cudaStream_t copy_ = nullptr;
  cudaStream_t gauge_ = nullptr;  // non-blocking: a scrape never waits for (or joins) a capture
  cudaEvent_t ready_[2] = {nullptr, nullptr}, release_[2] = {nullptr, nullptr}, begin_ = nullptr;
  int64_t issued_ = -1;  // last MoE-layer index whose copy was issued in this pass
  std::vector<MoeLayerStats> host_stats_;  // prefill counters (host-driven)
  unsigned long long step_base_ = 0;       // step at the last reset_stats
};

class MoeOffload : public MoeBackend {
 public:
  MoeOffload(const model::Model& m, const DeviceWeights& w, std::shared_ptr<const HostBanks> hb, int64_t n_slot,
             int64_t max_routes);
  void decode(const MoeStep& st, cudaStream_t s) override;
  void prefill(const MoeStep& st, cudaStream_t s) override { cache_.prefill(st, s); }
  std::string describe() const override;
  size_t device_bytes() const override { return cache_.device_bytes() + extra_bytes_; }
  size_t host_bytes() const override { return hb_->bytes(); }
  bool cache_gauges(MoeCacheGauges* g) const override {
    *g = cache_.gauges();
    return true;
  }
  SlotCache& cache() { return cache_; }
  ~MoeOffload() override;
  MoeStats stats() const override;
  void reset_stats() override;

 private:
  void decode_overlap(const MoeStep& st, cudaStream_t s);
  void pregate_predict(const MoeStep& st, int64_t next, bool after, cudaStream_t s);

  const model::Model& m_;
  const DeviceWeights& w_;
  std::shared_ptr<const HostBanks> hb_;
  SlotCache cache_;
  MoeSpec spec_;  // speculative fetches (gpu/moe_spec.h); k() == 0: off
  bool overlap_ = false, pregate_ = false;
  cuda::DeviceBuffer split_;   // [3][max_routes] int32: hit ids, miss ids, miss marks
  cuda::DeviceBuffer y_miss_;  // [max_routes][n_embd] fp32: the misses' per-route rows
  cuda::DeviceBuffer xq_mid_;  // the hit pass's SwiGLU Q8 rows (MoeStep::xq_mid); empty: n_ff % 32
  cudaStream_t gather_s_ = nullptr;
  cudaEvent_t fork_ = nullptr, gathered_ = nullptr;
  int64_t max_routes_ = 0;
  // Pre-gating: predictions [L][2][max_routes], router scratch, counters [6].
  cuda::DeviceBuffer pred_, logits_, pwts_, ticket_, hnorm_, pcount_;
  size_t extra_bytes_ = 0;
};

}  // namespace ft::gpu
