// Kernels of the GPU expert slot cache (cuda/moe_cache.h). The ensure kernels run in one CTA
// and choose all of a call's victims in one parallel pass: the victims of the scalar twin's
// serial loop (moe_cache_ref.cpp: each miss in turn takes the slot of smallest (last_use,
// index) not used in this step) are exactly the k smallest (last_use, index) slots not used
// in the step, in ascending order, because a taken slot gets last_use = step and an evicted
// expert cannot be routed in the same step (it would have hit). So the kernel ranks the
// distinct misses with a block scan and selects the k smallest slots by rounds over the
// distinct last_use values (one block min + one ordered block scan per round; a decode step
// usually needs one or two rounds, since each step stamps several slots with one value).
// H200, 3072 slots, 8 routes: the serial version took 21.6 us per call (one CTA-wide argmin
// per miss, a serial route loop on thread 0), this one 11.4 us alone and 10.0 us per call in a
// 48-call graph at 4.3 misses a call. Its rounds re-read last_use from L2 three times each
// (min, count, place) and a uniform-routing step needs several rounds; keeping the keys in
// registers and a warp-level top-k are the next steps toward the 3 us goal.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "cuda/check.h"
#include "cuda/moe_cache.h"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;         // gather and invalidate
constexpr int kEnsureThreads = 1024;  // ensure: 3 slots a thread at 3072 slots
constexpr int kWarps = kEnsureThreads / 32;
using u64 = unsigned long long;

// Block-wide helpers of the ensure kernels (blockDim.x == kEnsureThreads; every thread calls).
struct EnsureShared {
  u64 red64[kWarps];
  int red32[kWarps];
  int vict[kCacheMaxRoutes];  // victims in order
  int32_t e[kCacheMaxRoutes], sl[kCacheMaxRoutes], rank[kCacheMaxRoutes], first[kCacheMaxRoutes];
  u64 step;
};

__device__ u64 block_min(u64 v, EnsureShared& sh) {
  for (int o = 16; o > 0; o /= 2) {
    const u64 w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w < v ? w : v;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sh.red64[warp] = v;
  __syncthreads();
  u64 r = sh.red64[0];
  for (int i = 1; i < kWarps; ++i) r = sh.red64[i] < r ? sh.red64[i] : r;
  __syncthreads();  // red64 is reused by the next call
  return r;
}

// Exclusive prefix sum over threads in thread order; *total gets the sum.
__device__ int block_scan(int v, int* total, EnsureShared& sh) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int inc = v;
  for (int o = 1; o < 32; o *= 2) {
    const int w = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += w;
  }
  if (lane == 31) sh.red32[warp] = inc;
  __syncthreads();
  int before = 0, all = 0;
  for (int i = 0; i < kWarps; ++i) {
    if (i < warp) before += sh.red32[i];
    all += sh.red32[i];
  }
  __syncthreads();
  *total = all;
  return before + inc - v;
}

// The k smallest (last_use, index) slots with last_use != step, ascending, into sh.vict;
// returns how many there are (< k when fewer slots are evictable). Thread t owns the
// contiguous slots [t * chunk, (t + 1) * chunk) so that a block scan orders ties by index.
__device__ int select_victims(const u64* last_use, int64_t n_slot, u64 step, int k, EnsureShared& sh) {
  const int64_t chunk = (n_slot + kEnsureThreads - 1) / kEnsureThreads;
  const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < n_slot ? lo + chunk : n_slot;
  int taken = 0;
  bool have_floor = false;
  u64 floor = 0;
  while (taken < k) {
    u64 mn = ~0ull;  // never a real last_use: steps count from 1
    for (int64_t i = lo; i < hi; ++i) {
      const u64 key = last_use[i];
      if (key == step || (have_floor && key <= floor)) continue;
      mn = key < mn ? key : mn;
    }
    mn = block_min(mn, sh);
    if (mn == ~0ull) break;
    int cnt = 0;
    for (int64_t i = lo; i < hi; ++i) cnt += last_use[i] == mn;
    int total = 0;
    int pos = taken + block_scan(cnt, &total, sh);
    for (int64_t i = lo; i < hi && pos < k; ++i)
      if (last_use[i] == mn) sh.vict[pos++] = static_cast<int>(i);
    taken = taken + total < k ? taken + total : k;
    floor = mn;
    have_floor = true;
  }
  __syncthreads();  // vict visible to all
  return taken;
}

// select_victims with each thread's keys read once into registers (S <= kEnsureThreads *
// kRegChunk): the rounds then cost two block reductions and no L2 reads (select_victims reads
// last_use three times a round). Same victims, same order. The default since session 7's H200
// run: 10.9 vs 11.8 us a call alone, 8.61 vs 9.24 us in a 48-call graph (S = 3072), offload
// decode 68.1 vs 67.1 tok/s; FT_MOE_ENSURE_REGS=0 / moe_cache_set_ensure_variant(0) go back.
constexpr int kRegChunk = 4;
__device__ int select_victims_regs(const u64* last_use, int64_t n_slot, u64 step, int k, EnsureShared& sh) {
  const int64_t chunk = (n_slot + kEnsureThreads - 1) / kEnsureThreads;
  const int64_t lo = threadIdx.x * chunk;
  u64 key[kRegChunk];
#pragma unroll
  for (int j = 0; j < kRegChunk; ++j) key[j] = j < chunk && lo + j < n_slot ? last_use[lo + j] : step;  // step: not evictable
  int taken = 0;
  bool have_floor = false;
  u64 floor = 0;
  while (taken < k) {
    u64 mn = ~0ull;
#pragma unroll
    for (int j = 0; j < kRegChunk; ++j) {
      const u64 x = key[j];
      if (x == step || (have_floor && x <= floor)) continue;
      mn = x < mn ? x : mn;
    }
    mn = block_min(mn, sh);
    if (mn == ~0ull) break;
    int cnt = 0;
#pragma unroll
    for (int j = 0; j < kRegChunk; ++j) cnt += key[j] == mn;
    int total = 0;
    int pos = taken + block_scan(cnt, &total, sh);
#pragma unroll
    for (int j = 0; j < kRegChunk; ++j)
      if (key[j] == mn && pos < k) sh.vict[pos++] = static_cast<int>(lo + j);
    taken = taken + total < k ? taken + total : k;
    floor = mn;
    have_floor = true;
  }
  __syncthreads();
  return taken;
}

__device__ int pick_victims(bool regs, const u64* last_use, int64_t n_slot, u64 step, int k, EnsureShared& sh) {
  if (regs && (n_slot + kEnsureThreads - 1) / kEnsureThreads <= kRegChunk)
    return select_victims_regs(last_use, n_slot, step, k, sh);
  return select_victims(last_use, n_slot, step, k, sh);
}

// Gives expert e of the layer (flat id `flat`) slot v as the call's miss number k.
__device__ void assign(const CacheState& c, int v, int32_t flat, int32_t e, u64 step, const CacheMisses& m, int k) {
  const int32_t old = c.expert_of_slot[v];
  if (old >= 0) c.slot_of[old] = -1;
  c.expert_of_slot[v] = flat;
  c.slot_of[flat] = v;
  c.last_use[v] = step;
  m.miss_slot[k] = v;
  m.miss_expert[k] = e;
}

__global__ void __launch_bounds__(kEnsureThreads) ensure_kernel(CacheState c, int64_t layer, const int32_t* ids,
                                                                int n_routes, int32_t* slot_ids, CacheMisses m,
                                                                u64* counters, bool regs, CacheSplit split,
                                                                bool spec, int max_new) {
  __shared__ EnsureShared sh;
  const int64_t base = layer * c.n_expert;
  const int r = threadIdx.x;
  const bool route = r < n_routes;
  // 1. Lookups (all routes at once) and the step; hits stamp their slot. A speculative call
  //    (moe_cache_prefetch) stays inside the current step.
  const u64 step = spec ? *c.step : *c.step + 1;
  int32_t e = -1, sl = -1;
  if (route) {
    e = ids[r];
    sl = e >= 0 ? c.slot_of[base + e] : -1;
    sh.e[r] = e;
    if (sl >= 0) c.last_use[sl] = step;
  }
  __syncthreads();
  if (r == 0 && !spec) *c.step = step;
  // 2. The distinct misses in route order: a route is a new miss when no earlier route has its
  //    expert; its rank is the number of new misses before it. Hits counted in the same scan.
  int first = r;
  if (route && e >= 0 && sl < 0)
    for (int j = 0; j < r; ++j)
      if (sh.e[j] == e) {
        first = j;
        break;
      }
  const bool new_miss = route && e >= 0 && sl < 0 && first == r;
  const int packed = (new_miss ? 1 : 0) + (route && sl >= 0 ? 1 << 16 : 0);
  int total = 0;
  const int before = block_scan(packed, &total, sh);
  const int k = (total & 0xffff) < max_new ? (total & 0xffff) : max_new, hits = total >> 16;
  if (route) {
    sh.rank[r] = before & 0xffff;
    sh.first[r] = first;
    sh.sl[r] = sl;
  }
  // 3. Victims, then every new miss takes its own (distinct slots, distinct experts: the
  //    writes do not collide).
  const int n_v = pick_victims(regs, c.last_use, c.n_slot, step, k, sh);
  if (new_miss && sh.rank[r] < n_v) assign(c, sh.vict[sh.rank[r]], static_cast<int32_t>(base + e), e, step, m, sh.rank[r]);
  // 4. Slot ids: hits keep theirs, a miss (or a repeat of one) gets its first route's victim.
  if (route && slot_ids) {
    int32_t out = -1;
    if (e >= 0) {
      if (sl >= 0) {
        out = sl;
      } else {
        const int rk = sh.rank[first];
        out = rk < n_v ? sh.vict[rk] : -1;
      }
    }
    slot_ids[r] = out;
    if (split.hit_ids) {
      const bool hit = e >= 0 && sl >= 0, miss = e >= 0 && sl < 0 && out >= 0;
      split.hit_ids[r] = hit ? out : split.dummy;
      split.miss_ids[r] = miss ? out : split.dummy;
      split.miss_mark[r] = miss ? out : -1;
    }
  }
  if (r == 0) {
    *m.n_miss = n_v;
    if (spec) {
      if (counters) counters[0] += static_cast<u64>(n_v);
    } else if (counters) {
      counters[layer * 4 + 0] += static_cast<u64>(n_routes);
      counters[layer * 4 + 1] += static_cast<u64>(hits);
      counters[layer * 4 + 2] += static_cast<u64>(n_v);
    }
  }
}

// The hybrid variant. Every route's lookup, stamp and output in parallel (thread r: route r);
// only the distinct misses and the choice of the fetched ones stay serial on thread 0, on
// shared memory. H200, FT_MOE_CLOCK: a serial thread 0 that read slot_of, recency and wrote
// every output itself (two passes of dependent global accesses) took 8.3 us a decode layer,
// on the critical path before the CPU's task is submitted. Same results as before and as
// moe_cache_ensure_hybrid_ref (test MoeCache.HybridEnsureMatchesScalarTwin).
__global__ void __launch_bounds__(kEnsureThreads)
    ensure_hybrid_kernel(CacheState c, int64_t layer, const int32_t* ids, const float* wts, int n_routes,
                         int max_fetch, int32_t* slot_ids, float* gpu_wts, int32_t* cpu_ids, float* cpu_wts,
                         CacheMisses m, u64* counters, bool regs) {
  __shared__ EnsureShared sh;
  __shared__ int s_n_fetch, s_n_cpu;
  __shared__ u64 s_rec[kCacheMaxRoutes];
  int32_t* s_fetch = sh.e;      // experts to fetch, in rank order
  int32_t* s_id = sh.first;     // route r's expert
  const int64_t base = layer * c.n_expert;
  const int r = threadIdx.x;
  const bool route = r < n_routes;
  if (r == 0) {
    sh.step = *c.step + 1;
    s_n_cpu = 0;
  }
  __syncthreads();
  const u64 step = sh.step;
  // 1. Lookups; hits stamp their slot (routes of one expert write the same value).
  if (route) {
    const int32_t e = ids[r];
    const int32_t sl = e >= 0 ? c.slot_of[base + e] : -1;
    s_id[r] = e;
    sh.sl[r] = sl;
    if (sl >= 0) c.last_use[sl] = step;
    if (e >= 0 && sl < 0) s_rec[r] = c.recency[base + e];
  }
  __syncthreads();
  // 2. Thread 0: the distinct misses in route order, then the first max_fetch of them by
  //    recency (most recently routed first, ties to the lower id).
  if (r == 0) {
    *c.step = step;
    u64 hits = 0;
    int n_dist = 0;
    int32_t* s_fr = sh.rank;  // the route that brought each distinct miss (its recency)
    for (int j = 0; j < n_routes; ++j) {
      const int32_t e = s_id[j];
      if (e < 0) continue;
      if (sh.sl[j] >= 0) {
        ++hits;
        continue;
      }
      bool seen = false;
      for (int q = 0; q < n_dist; ++q) seen |= s_fetch[q] == e;
      if (!seen) {
        s_fr[n_dist] = j;
        s_fetch[n_dist++] = e;
      }
    }
    const int n_take = max_fetch < n_dist ? (max_fetch < 0 ? 0 : max_fetch) : n_dist;
    for (int i = 0; i < n_take; ++i) {
      int b = i;
      for (int j = i + 1; j < n_dist; ++j) {
        const u64 rj = s_rec[s_fr[j]], rb = s_rec[s_fr[b]];
        if (rj > rb || (rj == rb && s_fetch[j] < s_fetch[b])) b = j;
      }
      const int32_t t = s_fetch[i];
      s_fetch[i] = s_fetch[b];
      s_fetch[b] = t;
      const int32_t u = s_fr[i];
      s_fr[i] = s_fr[b];
      s_fr[b] = u;
    }
    s_n_fetch = n_take;
    if (counters) {
      counters[layer * 4 + 0] += static_cast<u64>(n_routes);
      counters[layer * 4 + 1] += hits;
    }
  }
  __syncthreads();
  const int n_v = pick_victims(regs, c.last_use, c.n_slot, step, s_n_fetch, sh);
  if (r < n_v) assign(c, sh.vict[r], static_cast<int32_t>(base + s_fetch[r]), s_fetch[r], step, m, r);
  __syncthreads();  // the assignments' slot_of writes visible to the block
  // 3. Outputs: a route whose expert still has no slot goes to the CPU.
  if (route) {
    const int32_t e = s_id[r];
    const int32_t sl = e < 0 ? -1 : c.slot_of[base + e];
    if (e >= 0 && sl < 0) {
      slot_ids[r] = 0;
      gpu_wts[r] = 0.0f;
      cpu_ids[r] = e;
      cpu_wts[r] = wts[r];
      atomicAdd(&s_n_cpu, 1);
    } else {
      slot_ids[r] = e < 0 ? 0 : sl;
      gpu_wts[r] = e < 0 ? 0.0f : wts[r];
      cpu_ids[r] = -1;
      cpu_wts[r] = 0.0f;
    }
    if (e >= 0) c.recency[base + e] = step;
  }
  __syncthreads();
  if (r == 0) {
    *m.n_miss = n_v;
    if (counters) {
      counters[layer * 4 + 2] += static_cast<u64>(n_v);
      counters[layer * 4 + 3] += static_cast<u64>(s_n_cpu);
    }
  }
}

__device__ u64 globaltimer_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// CTA b: miss b / P, part b % P of every kind's bytes, P = CTAs per miss = the grid shared by
// the call's actual misses (at most bytes / 4 KiB): a layer with few misses still keeps many
// SMs loading over PCIe. Four 16-byte loads in flight per thread before the stores: PCIe reads
// of mapped memory need many outstanding requests.
// U 16-byte loads in flight per thread. 8 measured the same as 4 on the H200 (session 7,
// ft-bench-moe-cache: 1..32 misses within 0.5%): PCIe, not the requests in flight, limits it.
template <int U>
__global__ void gather_kernel(GatherPlan p, CacheMisses m, int max_part) {
  const int n_miss = *m.n_miss;
  if (n_miss <= 0) return;
  int P = static_cast<int>(gridDim.x) / n_miss;
  P = P < 1 ? 1 : (P > max_part ? max_part : P);
  const int mi = static_cast<int>(blockIdx.x) / P, part = static_cast<int>(blockIdx.x) % P;
  if (mi >= n_miss) return;
  if (p.clock != nullptr && threadIdx.x == 0) {
    atomicMin(&p.clock[0], globaltimer_ns());
    if (blockIdx.x == 0) p.clock[2] = static_cast<u64>(n_miss);
  }
  const int64_t slot = m.miss_slot[mi], e = m.miss_expert[mi];
  const int64_t stride = static_cast<int64_t>(P) * blockDim.x;
  const int64_t t0 = static_cast<int64_t>(part) * blockDim.x + threadIdx.x;
  for (int k = 0; k < p.n_kind; ++k) {
    const GatherKind& g = p.kind[k];
    const uint8_t* src = g.src + e * g.bytes;
    uint8_t* dst = g.dst + slot * (g.dst_stride > 0 ? g.dst_stride : g.bytes);
    if (g.bytes % 16 == 0 && g.dst_stride % 16 == 0) {
      const uint4* s4 = reinterpret_cast<const uint4*>(src);
      uint4* d4 = reinterpret_cast<uint4*>(dst);
      const int64_t n = g.bytes / 16;
      int64_t i = t0;
      for (; i + (U - 1) * stride < n; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = s4[i + u * stride];
#pragma unroll
        for (int u = 0; u < U; ++u) d4[i + u * stride] = v[u];
      }
      for (; i < n; i += stride) d4[i] = s4[i];
    } else {
      for (int64_t i = t0; i < g.bytes; i += stride) dst[i] = src[i];
    }
  }
  if (p.clock != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) atomicMin(&p.clock[1], ~globaltimer_ns());
  }
}

// One thread per route; six per-block counts added to the device counters by thread 0.
__global__ void route_overlap_kernel(const int32_t* actual, const int32_t* pred_a, const int32_t* pred_b,
                                     const int32_t* miss_mark, int n_routes, int n_used, u64* counts) {
  __shared__ int c[6];
  if (threadIdx.x < 6) c[threadIdx.x] = 0;
  __syncthreads();
  const int r = threadIdx.x;
  if (r < n_routes && actual[r] >= 0) {
    const int e = actual[r], t0 = r / n_used * n_used;
    bool in_a = false, in_b = false;
    for (int j = 0; j < n_used; ++j) {
      in_a |= pred_a[t0 + j] == e;
      in_b |= pred_b[t0 + j] == e;
    }
    const bool miss = miss_mark != nullptr && miss_mark[r] >= 0;
    atomicAdd(&c[0], 1);
    if (in_a) atomicAdd(&c[1], 1);
    if (in_b) atomicAdd(&c[2], 1);
    if (miss) atomicAdd(&c[3], 1);
    if (miss && in_a) atomicAdd(&c[4], 1);
    if (miss && in_b) atomicAdd(&c[5], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < 6; ++i) counts[i] += static_cast<u64>(c[i]);
}

__global__ void invalidate_kernel(CacheState c, int64_t first, int64_t n) {
  const int64_t i = first + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= first + n || i >= c.n_slot) return;
  const int32_t f = c.expert_of_slot[i];
  if (f >= 0) c.slot_of[f] = -1;
  c.expert_of_slot[i] = -1;
  c.last_use[i] = 0;
}

std::atomic<int> g_ensure_variant{-1};  // -1: not read from the environment yet

void check_routes(int64_t n_routes) {
  if (n_routes < 0 || n_routes > kCacheMaxRoutes)
    fail_message("moe_cache_ensure: " + std::to_string(n_routes) + " routes, at most " +
                 std::to_string(kCacheMaxRoutes));
}

}  // namespace

void moe_cache_set_ensure_variant(int v) { g_ensure_variant.store(v == 1 ? 1 : 0); }

int moe_cache_ensure_variant() {
  int v = g_ensure_variant.load();
  if (v < 0) {
    const char* e = std::getenv("FT_MOE_ENSURE_REGS");
    v = e && e[0] == '0' ? 0 : 1;
    g_ensure_variant.store(v);
  }
  return v;
}

void moe_cache_ensure(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int32_t* slot_ids,
                      const CacheMisses& m, unsigned long long* counters, cudaStream_t s, const CacheSplit& split) {
  check_routes(n_routes);
  ensure_kernel<<<1, kEnsureThreads, 0, s>>>(c, layer, ids, static_cast<int>(n_routes), slot_ids, m, counters,
                                             moe_cache_ensure_variant() == 1, split, false, kCacheMaxRoutes);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_prefetch(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int max_new,
                        const CacheMisses& m, unsigned long long* fetched, cudaStream_t s) {
  check_routes(n_routes);
  ensure_kernel<<<1, kEnsureThreads, 0, s>>>(c, layer, ids, static_cast<int>(n_routes), nullptr, m, fetched,
                                             moe_cache_ensure_variant() == 1, CacheSplit{}, true,
                                             max_new < 0 ? 0 : max_new);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_route_overlap(const int32_t* actual, const int32_t* pred_a, const int32_t* pred_b, const int32_t* miss_mark,
                       int64_t n_routes, int n_used, unsigned long long* counts, cudaStream_t s) {
  check_routes(n_routes);
  if (n_routes <= 0 || n_used < 1) return;
  route_overlap_kernel<<<1, kCacheMaxRoutes, 0, s>>>(actual, pred_a, pred_b, miss_mark, static_cast<int>(n_routes),
                                                     n_used, counts);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_ensure_hybrid(const CacheState& c, int64_t layer, const int32_t* ids, const float* wts,
                             int64_t n_routes, int max_fetch, int32_t* slot_ids, float* gpu_wts, int32_t* cpu_ids,
                             float* cpu_wts, const CacheMisses& m, unsigned long long* counters, cudaStream_t s) {
  check_routes(n_routes);
  ensure_hybrid_kernel<<<1, kEnsureThreads, 0, s>>>(c, layer, ids, wts, static_cast<int>(n_routes), max_fetch,
                                                    slot_ids, gpu_wts, cpu_ids, cpu_wts, m, counters,
                                                    moe_cache_ensure_variant() == 1);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_gather(const GatherPlan& p, const CacheMisses& m, int64_t max_miss, cudaStream_t s) {
  if (max_miss <= 0 || p.n_kind == 0) return;
  int64_t bytes = 0;
  for (int k = 0; k < p.n_kind; ++k) bytes += p.kind[k].bytes;
  // About 64 KiB of one expert per CTA when every route misses, at least 264 CTAs (2 per SM
  // of an H200) shared by the misses there are: round 1 gave each miss its own 41 CTAs of a
  // Qwen3-30B expert (2.65 MB), and one miss alone reached 30.5 GB/s against 49-50 at 8+.
  // CTAs per miss stay at most bytes / 4 KiB (tiny experts: no idle CTAs in a part).
  int64_t per_miss = (bytes + 65535) / 65536;
  per_miss = per_miss < 1 ? 1 : (per_miss > 64 ? 64 : per_miss);
  int64_t grid = per_miss * max_miss;
  int64_t max_part = (bytes + 4095) / 4096;
  const int64_t floor_grid = (264 < max_part * max_miss ? 264 : max_part * max_miss);
  grid = grid < floor_grid ? floor_grid : grid;
  // FT_MOE_GATHER_SPREAD=0: round 1's layout (per_miss CTAs for each miss, the rest idle), for
  // A/B runs on the device.
  static const bool spread = [] {
    const char* v = std::getenv("FT_MOE_GATHER_SPREAD");
    return !(v && v[0] == '0');
  }();
  if (!spread) {
    grid = per_miss * max_miss;
    max_part = per_miss;
  }
  gather_kernel<4><<<static_cast<unsigned>(grid), kThreads, 0, s>>>(p, m, static_cast<int>(max_part));
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_invalidate(const CacheState& c, int64_t first, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  invalidate_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(c, first, n);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_reset(const CacheState& c, cudaStream_t s) {
  const size_t ne = static_cast<size_t>(c.n_layer * c.n_expert);
  FT_CUDA_CHECK(cudaMemsetAsync(c.slot_of, 0xff, ne * sizeof(int32_t), s));
  FT_CUDA_CHECK(cudaMemsetAsync(c.expert_of_slot, 0xff, static_cast<size_t>(c.n_slot) * sizeof(int32_t), s));
  FT_CUDA_CHECK(cudaMemsetAsync(c.last_use, 0, static_cast<size_t>(c.n_slot) * sizeof(u64), s));
  FT_CUDA_CHECK(cudaMemsetAsync(c.step, 0, sizeof(u64), s));
  if (c.recency) FT_CUDA_CHECK(cudaMemsetAsync(c.recency, 0, ne * sizeof(u64), s));
}

}  // namespace ft::cuda
