// L2 prefetch kernels and switches (cuda/l2_prefetch.h).
#include "cuda/l2_prefetch.h"

#include <cstdlib>
#include <string>

#include "cuda/check.h"
#include "cuda/l2_prefetch.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

// FT_L2_PREFETCH=1: the self, ahead and experts parts. Not the default: every part measured
// slower on the H200 (benches/h200.md, "Decode GEMV, Run 12"): tg128 Llama-8B 394.6 tok/s off,
// 347.2 with these parts, 356.2 self alone; Qwen3-30B-A3B 387.1 off, 361.6 / 382.9; the dense
// GEMVs 10-25% slower with their rows prefetched (14336x4096 after a dependent kernel 14.70 ->
// 18.38 us).
constexpr unsigned kL2One = kL2Self | kL2Ahead | kL2Experts;

int g_parts_override = -1;

bool device_has_bulk_prefetch() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 9;
  }();
  return ok;
}

// Dense ranges: CTA b takes chunks b, b + G, ... so that every CTA (every SM's copy engine)
// gets a share however short the list. Triggers at once, waits only at the end (l2_prefetch.h).
__global__ void __launch_bounds__(32) l2_prefetch_kernel(const L2Plan plan) {
  pdl_trigger();
  const int64_t all = plan.first[plan.n], g = gridDim.x;
  for (int64_t c = blockIdx.x + g * threadIdx.x; c < all; c += g * blockDim.x) {
    uint64_t a = 0;
    uint32_t n = 0;
    if (l2_chunk(plan, c, a, n)) l2_prefetch_bulk(reinterpret_cast<const void*>(a), n);
  }
  pdl_wait();
}

struct ExpertArgs {
  L2ExpertSpan t[3];
  int n_t;
  int64_t chunks_per_span[3];
  int64_t per_slot;  // sum of chunks_per_span
};

// Thread i takes chunks i, i + threads, ... of the (slot, tensor, chunk) list; the ids come
// from the router, so after the wait.
__global__ void __launch_bounds__(32) l2_prefetch_experts_kernel(const ExpertArgs a, const int32_t* ids, int n_slots,
                                                                     int64_t n_expert) {
  pdl_trigger();
  pdl_wait();
  const int64_t all = a.per_slot * n_slots, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = blockIdx.x + static_cast<int64_t>(gridDim.x) * threadIdx.x; c < all; c += step) {
    const int64_t slot = c / a.per_slot;
    int64_t r = c - slot * a.per_slot;
    int t = 0;
    while (t + 1 < a.n_t && r >= a.chunks_per_span[t]) r -= a.chunks_per_span[t], ++t;
    const L2ExpertSpan& sp = a.t[t];
    const int32_t e = ids[slot];
    if (e < 0 || e >= n_expert) continue;
    const int64_t off = r * kL2Chunk, left = sp.bytes - off;
    const uint8_t* base = static_cast<const uint8_t*>(sp.w) + static_cast<int64_t>(e) * sp.expert_bytes;
    l2_prefetch_span(base + off, left < kL2Chunk ? left : kL2Chunk);
  }
}

}  // namespace

unsigned l2_prefetch_parse(const char* v) {
  if (v == nullptr || *v == '\0' || std::string(v) == "0") return 0;
  if (std::string(v) == "1") return kL2One;
  unsigned m = 0;
  for (const char* c = v; *c != '\0'; ++c) {
    switch (*c) {
      case 's': m |= kL2Self; break;
      case 'a': m |= kL2Ahead; break;
      case 'e': m |= kL2Experts; break;
      case 'g': m |= kL2Experts | kL2ExpertsGate; break;
      case 'i': m |= kL2ExpertsInGemv; break;
      case 'A': m |= kL2Ahead | kL2AheadWide; break;
      default:
        fail_message(std::string("FT_L2_PREFETCH='") + v +
                     "': expected 0, 1 or letters of s (self), a (ahead), e (experts), g (experts' gate too), i (experts by the gate GEMV), A (ahead, wider)");
    }
  }
  return m;
}

unsigned l2_prefetch_parts() {
  if (!device_has_bulk_prefetch()) return 0;
  if (g_parts_override >= 0) return static_cast<unsigned>(g_parts_override);
  static const unsigned env = l2_prefetch_parse(std::getenv("FT_L2_PREFETCH"));
  return env;
}

void l2_prefetch_set_parts(int parts) { g_parts_override = parts; }

L2Plan l2_plan(const L2Range* r, int n) {
  L2Plan p;
  for (int i = 0; i < n && p.n < kL2MaxRanges; ++i) {
    if (r[i].p == nullptr || r[i].bytes <= 0) continue;
    const uint64_t a = reinterpret_cast<uint64_t>(r[i].p);
    const uint64_t b = (a + 15) & ~uint64_t{15}, e = (a + static_cast<uint64_t>(r[i].bytes)) & ~uint64_t{15};
    if (e <= b) continue;
    p.begin[p.n] = b;
    p.end[p.n] = e;
    p.first[p.n + 1] = p.first[p.n] + static_cast<int64_t>((e - b + kL2Chunk - 1) / kL2Chunk);
    ++p.n;
  }
  return p;
}

void l2_prefetch(const L2Range* r, int n, cudaStream_t s) {
  if (!l2_prefetch_on(kL2Ahead)) return;
  const L2Plan plan = l2_plan(r, n);
  const int64_t chunks = plan.first[plan.n];
  if (chunks == 0) return;
  const unsigned grid = static_cast<unsigned>(chunks < 128 ? chunks : 128);
  launch_pdl(l2_prefetch_kernel, dim3(grid), dim3(32), 0, s, plan);
}

void l2_prefetch_experts(const L2ExpertSpan* t, int n_t, const int32_t* ids, int n_slots, int64_t n_expert,
                         cudaStream_t s) {
  if (!l2_prefetch_on(kL2Experts) || n_slots <= 0) return;
  ExpertArgs a{};
  for (int i = 0; i < n_t && a.n_t < 3; ++i) {
    if (t[i].w == nullptr || t[i].bytes <= 0) continue;
    a.t[a.n_t] = t[i];
    a.chunks_per_span[a.n_t] = (t[i].bytes + kL2Chunk - 1) / kL2Chunk;
    a.per_slot += a.chunks_per_span[a.n_t];
    ++a.n_t;
  }
  if (a.n_t == 0) return;
  const int64_t all = a.per_slot * n_slots;
  const unsigned grid = static_cast<unsigned>(all < 128 ? all : 128);
  launch_pdl(l2_prefetch_experts_kernel, dim3(grid), dim3(32), 0, s, a, ids, n_slots, n_expert);
}

}  // namespace ft::cuda
