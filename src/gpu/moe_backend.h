// The one interface in front of the routed experts of a MoE layer on the GPU, so the
// forward pass never knows where an expert lives:
//
//   fused   : every expert in device memory (DeviceWeights' arena); moe_fused.cpp.
//   offload : experts in pinned host banks (gpu/host_bank.h), an LRU cache of S GPU slots
//             with device-side bookkeeping (cuda/moe_cache.h); gpu/moe_offload.h.
//   cpu / hybrid : routed experts (all, or the misses beyond a fetch cap) computed on the
//             CPU from the host banks (the moe-cpu engineer's files).
//
// GpuForward computes the norm, the router and the routing (ids, wts) and then calls
// decode() (n_tok <= cuda::kGemvMaxTokens, may be captured in a CUDA graph: only stream work
// with fixed pointers and shapes) or prefill() (larger batches, never captured). The backend
// adds sum_j wts[t][j] * expert_{ids[t][j]}(h[t]) into x with exactly the fused math:
//
//   g = (W_gate h) * s_gate[e], u = (W_up h) * s_up[e]       (bank columns 0, 1)
//   y = (W_down swiglu(g, u)) * s_down[e]                     (bank column 2)
//   x[t] += sum over ranks j in order of y_j * wts[t][j]      (grouped combine, no FMA)
//
// Any backend that runs the experts on the GPU should call moe_experts_decode /
// moe_experts_prefill below with its own ExpertView (slot pools instead of the arena, ids
// rewritten to slot ids), so the kernels -- and hence the bits -- are the fused backend's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/state.h"
#include "gpu/weights.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

// What one MoE layer call reads and writes. All pointers are device memory owned by
// GpuBuffers (b); they are the same on every call, so captured graphs stay valid.
struct MoeStep {
  int64_t layer = 0;
  int64_t n_tok = 0;       // tokens of this call
  int n_used = 0;          // ranks (experts) per token
  const float* h = nullptr;      // [n_tok][n_embd] fp32, the normed FFN input
  bool xq_ready = false;         // decode: b->xq already holds the Q8 copy of h (k = n_embd)
  // decode: where the SwiGLU writes the down GEMV's Q8 input (act_q8_bytes(n_ff, n_slots));
  // nullptr: b->xq, over h's Q8 copy. A backend that runs two passes over the same h (offload's
  // hit/miss split) gives the first its own buffer, so the second finds h's copy still there.
  void* xq_mid = nullptr;
  const int32_t* ids = nullptr;  // [n_tok][n_used] raw expert ids (routing output, rank order)
  const float* wts = nullptr;    // [n_tok][n_used] routing weights
  // Decode of one token where the backend routes_decode(): the router launch wrote only these
  // route_n_expert fp32 logits, and the routing into ids / wts (route_ids / route_wts, the same
  // buffers) is the backend's to do -- in its first expert launch (GemvArgs::route_logits), or
  // by cuda::moe_route before it. nullptr: ids / wts are ready.
  const float* route_logits = nullptr;
  int64_t route_n_expert = 0;
  int32_t* route_ids = nullptr;
  float* route_wts = nullptr;
  float* x = nullptr;            // [n_tok][n_embd] residual stream: the result is added here
  GpuBuffers* b = nullptr;       // scratch: gu, hh, xq, order, offsets, sort_ws, ysort, ids, gemm
  const GpuNumerics* num = nullptr;  // round, q8 (decode integer GEMV), prec (prefill GEMM)
  int64_t n_slots() const { return n_tok * n_used; }
};

// Counters of one layer since load (or the last reset_stats). Backends fill what applies.
struct MoeLayerStats {
  uint64_t routes = 0;          // token-expert routes served (decode)
  uint64_t hits = 0;            // decode routes whose expert was already in a slot
  uint64_t misses_fetched = 0;  // experts copied host -> slot (decode)
  uint64_t misses_cpu = 0;      // routes computed on the CPU (cpu / hybrid)
  uint64_t bytes_h2d = 0;       // bytes moved host -> device (decode fetches + prefill layers)
  uint64_t prefill_layers = 0;  // whole-layer prefill copies
};

// The GPU expert cache at a glance (server /metrics): occupancy now, counters since load.
struct MoeCacheGauges {
  int64_t slots = 0, slots_used = 0;  // slots holding an expert
  uint64_t routes = 0, hits = 0, misses_fetched = 0, misses_cpu = 0;  // decode, all layers
};

struct MoeStats {
  std::vector<MoeLayerStats> layers;  // [n_layer] (dense layers stay zero)
  uint64_t decode_steps = 0;          // decode calls of layer 0 with experts
  // Pre-gating measurement (offload, FT_MOE_PREGATE=1; gpu/moe_offload.h): decode routes of
  // MoE layers after the first, and how many the next layer's router predicted from the layer
  // before: on its FFN input (a) / on its output (b); the same among the routes that missed.
  uint64_t pregate[6] = {0, 0, 0, 0, 0, 0};  // routes, in a, in b, misses, misses in a, in b
  uint64_t spec_fetched = 0;                 // offload, FT_MOE_SPEC: experts fetched on a guess
  MoeLayerStats total() const;
};

// Multi-line table of the statistics (per layer and total), for `ft generate --stats`.
std::string format_moe_stats(const MoeStats& s);

class MoeBackend {
 public:
  virtual ~MoeBackend() = default;
  // n_tok <= cuda::kGemvMaxTokens; stream work only (capturable).
  virtual void decode(const MoeStep& st, cudaStream_t s) = 0;
  // n_tok > cuda::kGemvMaxTokens; may synchronise, use other streams and host copies.
  virtual void prefill(const MoeStep& st, cudaStream_t s) = 0;
  // One line for logs: the backend's name and its sizes (slots, host bytes, ...).
  virtual std::string describe() const = 0;
  // Whether decode takes a routing still to be done (MoeStep::route_logits), so that the router
  // launch may leave it out: the fused backend does it in its gate / up launch.
  virtual bool routes_decode() const { return false; }
  // Reads device counters back (synchronises).
  virtual MoeStats stats() const { return {}; }
  virtual void reset_stats() {}
  // Device bytes the backend allocated beyond DeviceWeights (slot pools, bookkeeping).
  virtual size_t device_bytes() const { return 0; }
  // Host bytes it holds (pinned banks).
  virtual size_t host_bytes() const { return 0; }
  // The slot cache's gauges (offload-family backends; false when there is none). Safe to
  // call from another thread while decode runs or is being captured: copies on a private
  // non-blocking stream, no device synchronisation.
  virtual bool cache_gauges(MoeCacheGauges* g) const {
    (void)g;
    return false;
  }
};

// The experts of one layer as the grouped kernels read them: expert (or slot) i of tensor t
// starts at t.w + i * t.expert_bytes; its scales are bank[4 i .. 4 i + 3] = (gate, up, down, 1).
// n_expert is the number of positions (E for the arena, S for a slot pool); ids index them.
using ExpertView = DevExperts;

// The fused kernels over a view: decode (grouped GEMVs, swiglu, grouped combine into st.x)
// with ids[n_slots] (device, indexes into the view; no -1) ...
void moe_experts_decode(const ExpertView& v, const int32_t* ids, const MoeStep& st, cudaStream_t s);
// ... the same GPU work with the down projection's per-route rows written to y
// ([n_slots][n_embd]) instead of combined into st.x, each under the combine's GEMV plan (same
// kernel and summation order, hence the bits the combine sums; the hybrid backend) ...
void moe_experts_decode_slots(const ExpertView& v, const int32_t* ids, const MoeStep& st, float* y, cudaStream_t s);
// ... and prefill (moe_sort of ids, grouped GEMMs, moe_combine_sorted into st.x). Overwrites
// st.b->ids (the combine's scratch) after sorting.
void moe_experts_prefill(const ExpertView& v, const int32_t* ids, const MoeStep& st, cudaStream_t s);

// Options of the backends (from RunnerOptions through GpuSessionOptions).
struct MoeBackendOptions {
  std::string name = "auto";  // auto | fused | offload | cpu | hybrid
  int64_t cache_size = 0;     // slots (0: unset)
  double cache_rate = 0.0;    // fraction of all experts (0: unset); both unset: auto from free VRAM
  int64_t hybrid_max_fetch = -1;  // hybrid: misses fetched per layer and step (-1: backend default)
  int threads = 0;                // cpu / hybrid: CPU threads (0: physical cores)
  int spec = -1;                  // hybrid: guessed experts fetched a layer (-1: FT_MOE_SPEC or 2)
  std::string tuned;              // set by the start-up measurement: why these parameters (logged)
};

// A backend and its parameters that the session measures at start-up (gpu/session.cpp runs
// one-token decode steps on each and keeps the fastest).
struct MoeCandidate {
  std::string backend;
  MoeBackendOptions o;
  std::string label;  // for the log: "offload", "hybrid (guesses 1, fetch 0)", ...
};

// What to measure when the experts live in host RAM (moe_select.cpp): for --moe-backend auto
// offload, the hybrid variants and cpu; for hybrid without --moe-hybrid-max-fetch (nor
// FT_MOE_HYBRID_MAX_FETCH / FT_MOE_SPEC) its variants; otherwise nothing (the choice stands).
// FT_MOE_TUNE=0: nothing (auto then takes offload, hybrid its formula).
std::vector<MoeCandidate> moe_tune_candidates(const std::string& chosen, const MoeBackendOptions& o);

// The fused backend (experts in w's arena).
std::unique_ptr<MoeBackend> make_moe_fused(const DeviceWeights& w);

class HostBanks;

// What a host-bank backend is built from (GpuSession fills it after the weights and buffers
// exist): the pinned banks, the slot count chosen by SlotCache::choose_slots and the most
// routes one decode call has (kGemvMaxTokens * n_used).
struct MoeFactoryArgs {
  const model::Model* m = nullptr;
  const DeviceWeights* w = nullptr;
  std::shared_ptr<const HostBanks> hb;
  int64_t n_slot = 0;
  int64_t max_routes = 0;
  MoeBackendOptions o;
};
using MoeFactory = std::unique_ptr<MoeBackend> (*)(const MoeFactoryArgs& a);

// Backends beyond fused/offload (cpu, hybrid) register their factory by name before a
// session is built (e.g. from cli/runner_factory.cpp); process-wide, not thread-safe.
void register_moe_backend(const std::string& name, MoeFactory f);

// Resolves --moe-backend for model m: the name itself, or for auto fused when the routed
// experts fit in free_bytes of device memory with room to spare, else offload. Dense models
// get fused. `why` gets the measurements behind the choice for the start-up log. Throws
// ft::Error for an unknown name.
std::string choose_moe_backend(const model::Model& m, const MoeBackendOptions& o, size_t free_bytes,
                               std::string* why);
// Builds a host-bank backend: offload, or a registered one (throws when not registered).
std::unique_ptr<MoeBackend> make_moe_backend(const std::string& name, const MoeFactoryArgs& a);

}  // namespace ft::gpu
