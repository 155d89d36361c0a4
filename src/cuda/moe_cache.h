// The GPU expert slot cache of the offload-family MoE backends: kernels only, no model
// knowledge (gpu/moe_offload.cpp owns the buffers and the policy around them).
//
// S slots; slot i holds one expert's bytes of every tensor kind (gate, up or gate_up, down,
// and its 16-byte scale-bank row), each kind in its own pool [S][bytes of one expert] with
// the file's row layout, so the grouped GEMV/GEMM run on a pool unchanged: w = pool base,
// ids = slot ids, bank = the slot bank [S][4].
//
// Device-side bookkeeping (CacheState, all device memory):
//   slot_of[L*E]     int32   slot holding expert (layer, e) at flat id layer*E + e, -1 absent
//   expert_of_slot[S] int32  flat id held by each slot, -1 empty
//   last_use[S]      uint64  step of the last use (0: never / invalidated)
//   step[1]          uint64  bumped once per ensure call
//   recency[L*E]     uint64  last step each expert was routed (hybrid's fetch order)
//
// moe_cache_ensure (one launch, one CTA, per layer and decode step), with the ids of the
// step's routes in rank order, step = ++*step:
//   1. every route whose expert is resident marks its slot last_use = step;
//   2. routes in order: resident (also when fetched by an earlier route of this step) -> its
//      slot; else the victim is the slot with the smallest last_use among slots not used in
//      this step (last_use != step), lowest index on ties; its old expert loses the slot, the
//      route's expert gets it (last_use = step) and is appended to the miss list
//      (miss_slot[m], miss_expert[m] = e, *n_miss = m + 1);
//   3. slot_ids[r] = the route's slot (-1 for a route with id < 0).
//   Counters (optional, device uint64 [L][4]): += routes, hits (routes resident before the
//   step), misses fetched, 0 (cpu routes). Requires S >= the distinct experts of one step (else the kernel
//   writes -1 slot ids for the overflow and counts them nowhere: callers size S >= E).
//   The kernel does steps 1-3 in parallel (1024 threads): a step's victims are the k smallest
//   (last_use, index) slots with last_use != step, in that order -- exactly the serial rule's,
//   since a taken slot gets last_use = step and no routed expert is evicted (it hit) -- chosen
//   in rounds over the distinct last_use values (block min + ordered block scan), and the
//   distinct misses ranked by a block scan in route order. The scalar twin keeps the serial rule.
//
// moe_cache_ensure_hybrid (for the hybrid backend): the same with a fetch cap F per call:
//   resident routes get their slot as above; the step's distinct missing experts are ranked
//   by recency (most recently routed first; ties: lower expert id) and the first F get slots
//   (victims as above, in that rank order); every other missing route gets slot id -1 and is
//   listed for the CPU: cpu_ids[r] = raw expert id, cpu_wts[r] = wts[r] (-1 / 0 for routes
//   served on the GPU); then recency[layer*E + e] = step for every routed expert (CPU ones
//   too). For the GPU's grouped kernels a CPU route's slot id is written as 0 (not -1: the
//   kernels need a valid position) with gpu_wts[r] = 0, so the grouped combine adds exactly 0
//   for it (the pools are zeroed at allocation, so slot 0 never holds non-finite bytes);
//   GPU routes get gpu_wts[r] = wts[r]. Counters: += routes, hits, fetched, cpu routes.
//   Limits: n_routes <= kCacheMaxRoutes.
//
// moe_cache_gather: copies the staged misses of one layer from the mapped pinned host banks
// into their slots, all tensor kinds in ONE launch (kernel loads over PCIe in 16-byte
// vectors from many CTAs): no host-side memcpy, so the launch -- and the misses -- live in a
// captured CUDA graph. max_miss (the step's routes) sizes the grid; the *n_miss misses there
// are share all of its CTAs (so one miss alone still loads from many SMs).
// kinds: the tensor kinds to copy in this launch (the per-bank path launches it per kind).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

inline constexpr int kCacheMaxRoutes = 512;

struct CacheState {
  int32_t* slot_of = nullptr;         // [n_layer * n_expert]
  int32_t* expert_of_slot = nullptr;  // [n_slot]
  unsigned long long* last_use = nullptr;  // [n_slot]
  unsigned long long* step = nullptr;      // [1]
  unsigned long long* recency = nullptr;   // [n_layer * n_expert] (hybrid)
  int64_t n_layer = 0, n_expert = 0, n_slot = 0;
};

// Staging of one call: misses of the layer (device).
struct CacheMisses {
  int32_t* n_miss = nullptr;       // [1]
  int32_t* miss_slot = nullptr;    // [max routes]
  int32_t* miss_expert = nullptr;  // [max routes] expert id within the layer
};

// Optional outputs of moe_cache_ensure for a caller that runs the hit routes' experts while
// the misses are gathered (gpu/moe_offload.cpp's overlap). Per route r, by whether its expert
// was resident BEFORE the call (a repeat of a miss of the same call is a miss):
//   hit_ids[r]   = its slot if resident, else `dummy` (a slot position no route uses)
//   miss_ids[r]  = its slot if not resident, else `dummy`
//   miss_mark[r] = its slot if not resident, else -1  (moe_combine_split's from_c)
// Routes with id < 0 (or without a slot) get dummy / dummy / -1.
struct CacheSplit {
  int32_t* hit_ids = nullptr;
  int32_t* miss_ids = nullptr;
  int32_t* miss_mark = nullptr;
  int32_t dummy = 0;
};

void moe_cache_ensure(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int32_t* slot_ids,
                      const CacheMisses& m, unsigned long long* counters, cudaStream_t s,
                      const CacheSplit& split = {});

// Speculative fetch (gpu/moe_offload.cpp's FT_MOE_SPEC): for predicted routes `ids` of a
// layer, the first max_new distinct absent experts in route order get slots exactly as
// moe_cache_ensure would give them, but inside the current step: the step is not bumped, so
// no slot used in it is evicted; resident predicted experts and the new ones are stamped with
// it. Miss list in m (for moe_cache_gather); no slot ids; *fetched (device, optional) += the
// experts given slots. Capturable.
void moe_cache_prefetch(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int max_new,
                        const CacheMisses& m, unsigned long long* fetched, cudaStream_t s);

// Pre-gating statistics (a measurement, gpu/moe_offload.cpp's FT_MOE_PREGATE=1): for the
// routes `actual` of one call (n_tok = n_routes / n_used tokens) and two predicted route sets
// of the same shape, adds to counts (device uint64 [6]):
//   [0] routes, [1] routes whose expert is among its token's pred_a, [2] ... among pred_b,
//   [3] routes marked missing (miss_mark[r] >= 0; nullptr: none), [4] / [5] of those, the
//   ones in pred_a / pred_b. Capturable; n_routes <= kCacheMaxRoutes.
void moe_route_overlap(const int32_t* actual, const int32_t* pred_a, const int32_t* pred_b, const int32_t* miss_mark,
                       int64_t n_routes, int n_used, unsigned long long* counts, cudaStream_t s);

void moe_cache_ensure_hybrid(const CacheState& c, int64_t layer, const int32_t* ids, const float* wts,
                             int64_t n_routes, int max_fetch, int32_t* slot_ids, float* gpu_wts, int32_t* cpu_ids,
                             float* cpu_wts, const CacheMisses& m, unsigned long long* counters, cudaStream_t s);

// One tensor kind of the gather: expert e of the layer is at src + e * bytes (device view of
// mapped pinned memory), slot i at dst + i * dst_stride (0: bytes).
inline constexpr int kCacheMaxKinds = 8;
struct GatherKind {
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  int64_t bytes = 0;  // per expert; bytes and dst_stride multiples of 16 take the 16-byte path
  int64_t dst_stride = 0;
};
struct GatherPlan {
  GatherKind kind[kCacheMaxKinds];
  int n_kind = 0;
  // Optional diagnostic (FT_MOE_GATHER_CLOCK, gpu/moe_offload.cpp's timeline), device
  // uint64 [4]: [0] = min over the working CTAs of %globaltimer at their start, [1] = min of
  // ~(%globaltimer at their end) (so one reset to all-ones serves both), [2] = *n_miss. A
  // launch with no miss leaves it untouched.
  unsigned long long* clock = nullptr;
};
void moe_cache_gather(const GatherPlan& p, const CacheMisses& m, int64_t max_miss, cudaStream_t s);

// The ensure kernels' victim search: 1 (default) holds each thread's keys in registers (S <=
// 4096, else 0's loop; H200, S = 3072: 10.9 us a call, 8.6 in a graph); 0 re-reads last_use
// from L2 each round (11.8 / 9.2 us). Same victims. FT_MOE_ENSURE_REGS=0 selects 0;
// process-wide, read at launch (a captured graph keeps the variant it was captured with).
void moe_cache_set_ensure_variant(int v);
int moe_cache_ensure_variant();

// Invalidates slots [first, first + n): their experts become absent, last_use 0 (prefill
// buffers; evicted first afterwards).
void moe_cache_invalidate(const CacheState& c, int64_t first, int64_t n, cudaStream_t s);

// Sets the state to empty (slot_of -1, expert_of_slot -1, last_use 0, step 0, recency 0).
void moe_cache_reset(const CacheState& c, cudaStream_t s);

// Scalar CPU twin of moe_cache_ensure / _hybrid on host arrays (same victims, same order):
// the reference of the kernel tests. Host CacheState / CacheMisses pointers.
void moe_cache_ensure_ref(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes,
                          int32_t* slot_ids, const CacheMisses& m, unsigned long long* counters,
                          const CacheSplit& split = {});
void moe_cache_prefetch_ref(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int max_new,
                            const CacheMisses& m);
void moe_cache_ensure_hybrid_ref(const CacheState& c, int64_t layer, const int32_t* ids, const float* wts,
                                 int64_t n_routes, int max_fetch, int32_t* slot_ids, float* gpu_wts,
                                 int32_t* cpu_ids, float* cpu_wts, const CacheMisses& m,
                                 unsigned long long* counters);

}  // namespace ft::cuda
