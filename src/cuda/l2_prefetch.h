// L2 prefetch of decode weights (Hopper, sm_90+): between two GEMVs of a decode step run
// latency-bound small kernels (norms, rope + KV store, attention, quantisers, router, SwiGLU:
// ~16 us a layer on Llama-8B, ~25 us on Qwen3-30B-A3B on the H200) during which the HBM idles,
// and each GEMV then starts cold. These calls stream the next GEMV's weights into L2 (50 MB
// on the H200) meanwhile, with `cp.async.bulk.prefetch.L2` (cuda/l2_prefetch.cuh). Prefetches
// are hints: they never change a computed bit (tests/cuda/l2_prefetch_test.cpp compares
// decode logits with them on and off bit for bit).
//
// OFF by default: on the H200 every part below made decode slower (benches/h200.md, "Decode
// GEMV, Run 12": Llama-8B tg128 394.6 -> 347.2 tok/s, Qwen3-30B-A3B 387.1 -> 361.6; a dense
// GEMV whose rows were bulk-prefetched ran 10-25% slower, not faster). Kept switchable for
// experiments on other GPUs and placements. Parts (FT_L2_PREFETCH, docs/env.md):
//   kL2Self    the dense NVFP4 GEMV kernels (gemv_nvfp4.cu, gemv_mma.cu) prefetch the rows
//              each CTA will read before their pdl_wait, i.e. while the previous kernel runs;
//   kL2Ahead   l2_prefetch(): a tiny kernel the forward pass places after a small kernel,
//              streaming weights of GEMVs further ahead (the attention output projection
//              while rope + attention run);
//   kL2Experts l2_prefetch_experts(): after the router, the chosen experts' up / down rows
//              (kL2ExpertsGate: also gate);
//   kL2ExpertsInGemv  the same up / down rows, prefetched by the gate GEMV's own work items
//              (GemvArgs::l2_next) instead of a kernel of their own between router and gate.
// Below sm_90, or with FT_L2_PREFETCH=0, every part is off and nothing is launched.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

enum L2Part : unsigned {
  kL2Self = 1u,
  kL2Ahead = 2u,
  kL2Experts = 4u,
  kL2ExpertsGate = 8u,
  kL2ExpertsInGemv = 16u,
  kL2AheadWide = 32u,  // kL2Ahead with kL2AheadWideMax bytes instead of kL2AheadMax
};

// The parts on for this process: FT_L2_PREFETCH (unset or "0" none, the default; "1" self +
// ahead + experts; else letters s = self, a = ahead, e = experts, g = experts' gate too, i = experts
// by the gate GEMV, A = ahead with kL2AheadWideMax), 0 below
// sm_90 or without a device. Cached on first use.
unsigned l2_prefetch_parts();
inline bool l2_prefetch_on(unsigned part) { return (l2_prefetch_parts() & part) != 0; }
// Tests and benchmarks (process-wide, not thread-safe): parts -1 = FT_L2_PREFETCH again, else
// the mask (still 0 below sm_90). A decode graph captured before keeps what it captured.
void l2_prefetch_set_parts(int parts);
// Parses an FT_L2_PREFETCH value (nullptr: unset) into a mask; throws ft::Error naming the
// variable for a letter it does not know.
unsigned l2_prefetch_parse(const char* v);

// Bytes per bulk prefetch instruction.
inline constexpr int64_t kL2Chunk = 32 << 10;
// Most bytes a caller should prefetch ahead: the H200's L2 is 50 MB (two ~25 MB partitions);
// what is prefetched must survive the traffic until it is read.
inline constexpr int64_t kL2AheadMax = 24 << 20;
inline constexpr int64_t kL2AheadWideMax = 40 << 20;

inline constexpr int kL2MaxRanges = 4;
struct L2Range {
  const void* p = nullptr;
  int64_t bytes = 0;
};
// Ranges aligned inward to 16 bytes, empty ones dropped, cut in kL2Chunk chunks.
struct L2Plan {
  uint64_t begin[kL2MaxRanges] = {}, end[kL2MaxRanges] = {};
  int64_t first[kL2MaxRanges + 1] = {};  // first chunk of range i; first[n]: all chunks
  int n = 0;
};
L2Plan l2_plan(const L2Range* r, int n);

// Streams up to kL2MaxRanges ranges of device memory that no kernel writes (weights) into L2
// (kL2Ahead). The kernel triggers its dependents at once (PDL) and waits for its predecessor
// only at its end, so it runs beside the kernel before it, and the kernel after it still sees
// every earlier kernel complete. Nothing is launched when the part is off.
void l2_prefetch(const L2Range* r, int n, cudaStream_t s);

// The span of expert e of a stacked tensor: [w + e * expert_bytes, + bytes).
struct L2ExpertSpan {
  const void* w = nullptr;
  int64_t expert_bytes = 0, bytes = 0;
};
// After routing: the spans of experts ids[0..n_slots) (read on the device, after the wait
// for the router; ids outside [0, n_expert) are skipped) of up to 3 tensors. Nothing is
// launched when kL2Experts is off.
void l2_prefetch_experts(const L2ExpertSpan* t, int n_t, const int32_t* ids, int n_slots, int64_t n_expert,
                         cudaStream_t s);

}  // namespace ft::cuda
