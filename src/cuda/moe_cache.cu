// Kernels of the GPU expert slot cache (cuda/moe_cache.h). The ensure kernels run in one CTA:
// the route loop is serial (thread 0; a step has at most a few dozen routes) so the victims
// and their order are exactly the scalar twin's (moe_cache_ref.cpp); only the victim search,
// an argmin over all S slots, is spread over the CTA.
#include <cuda_runtime.h>

#include <string>

#include "cuda/check.h"
#include "cuda/moe_cache.h"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
using u64 = unsigned long long;

// The slot with the smallest last_use among those not used in this step (lowest index on
// ties), or -1. Every thread of the CTA calls it; the result is in all threads.
__device__ int find_victim(const u64* last_use, int64_t n_slot, u64 step) {
  __shared__ u64 s_key[kThreads];
  __shared__ int s_idx[kThreads];
  u64 best = ~0ull;
  int bi = -1;
  for (int64_t i = threadIdx.x; i < n_slot; i += blockDim.x) {
    const u64 k = last_use[i];
    if (k == step) continue;
    if (bi < 0 || k < best) {  // i grows, so the first minimum seen is the lowest index
      best = k;
      bi = static_cast<int>(i);
    }
  }
  s_key[threadIdx.x] = best;
  s_idx[threadIdx.x] = bi;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      const u64 k2 = s_key[threadIdx.x + w];
      const int i2 = s_idx[threadIdx.x + w];
      const u64 k1 = s_key[threadIdx.x];
      const int i1 = s_idx[threadIdx.x];
      const bool take = i2 >= 0 && (i1 < 0 || k2 < k1 || (k2 == k1 && i2 < i1));
      if (take) {
        s_key[threadIdx.x] = k2;
        s_idx[threadIdx.x] = i2;
      }
    }
    __syncthreads();
  }
  const int v = s_idx[0];
  __syncthreads();  // s_idx is reused by the next call
  return v;
}

// Gives expert `flat` (layer-relative id e) a slot: the victim loses its expert. Thread 0.
__device__ void assign(const CacheState& c, int v, int32_t flat, int32_t e, u64 step, const CacheMisses& m) {
  const int32_t old = c.expert_of_slot[v];
  if (old >= 0) c.slot_of[old] = -1;
  c.expert_of_slot[v] = flat;
  c.slot_of[flat] = v;
  c.last_use[v] = step;
  const int k = *m.n_miss;
  m.miss_slot[k] = v;
  m.miss_expert[k] = e;
  *m.n_miss = k + 1;
}

__global__ void ensure_kernel(CacheState c, int64_t layer, const int32_t* ids, int n_routes, int32_t* slot_ids,
                              CacheMisses m, u64* counters) {
  __shared__ u64 s_step;
  __shared__ int s_need;
  const int64_t base = layer * c.n_expert;
  if (threadIdx.x == 0) {
    s_step = ++*c.step;
    *m.n_miss = 0;
    u64 hits = 0;
    for (int r = 0; r < n_routes; ++r) {
      const int32_t e = ids[r];
      if (e < 0) continue;
      const int32_t sl = c.slot_of[base + e];
      if (sl >= 0) {
        c.last_use[sl] = s_step;
        ++hits;
      }
    }
    if (counters) {
      counters[layer * 4 + 0] += static_cast<u64>(n_routes);
      counters[layer * 4 + 1] += hits;
    }
  }
  __syncthreads();
  const u64 step = s_step;
  for (int r = 0; r < n_routes; ++r) {
    if (threadIdx.x == 0) {
      const int32_t e = ids[r];
      s_need = e >= 0 && c.slot_of[base + e] < 0;
      if (!s_need) slot_ids[r] = e < 0 ? -1 : c.slot_of[base + e];
    }
    __syncthreads();
    if (s_need) {
      const int v = find_victim(c.last_use, c.n_slot, step);
      if (threadIdx.x == 0) {
        const int32_t e = ids[r];
        if (v >= 0) {
          assign(c, v, static_cast<int32_t>(base + e), e, step, m);
          slot_ids[r] = v;
        } else {
          slot_ids[r] = -1;
        }
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && counters) counters[layer * 4 + 2] += static_cast<u64>(*m.n_miss);
}

__global__ void ensure_hybrid_kernel(CacheState c, int64_t layer, const int32_t* ids, const float* wts, int n_routes,
                                     int max_fetch, int32_t* slot_ids, float* gpu_wts, int32_t* cpu_ids,
                                     float* cpu_wts, CacheMisses m, u64* counters) {
  __shared__ u64 s_step;
  __shared__ int s_n_fetch;
  __shared__ int32_t s_fetch[kCacheMaxRoutes];  // experts to fetch, in rank order
  const int64_t base = layer * c.n_expert;
  if (threadIdx.x == 0) {
    s_step = ++*c.step;
    *m.n_miss = 0;
    u64 hits = 0;
    int n_dist = 0;
    for (int r = 0; r < n_routes; ++r) {
      const int32_t e = ids[r];
      if (e < 0) continue;
      const int32_t sl = c.slot_of[base + e];
      if (sl >= 0) {
        c.last_use[sl] = s_step;
        ++hits;
        continue;
      }
      bool seen = false;
      for (int j = 0; j < n_dist; ++j) seen |= s_fetch[j] == e;
      if (!seen) s_fetch[n_dist++] = e;
    }
    // Most recently routed first, ties to the lower id: selection of the first max_fetch.
    const int n_take = max_fetch < n_dist ? (max_fetch < 0 ? 0 : max_fetch) : n_dist;
    for (int i = 0; i < n_take; ++i) {
      int b = i;
      for (int j = i + 1; j < n_dist; ++j) {
        const u64 rj = c.recency[base + s_fetch[j]], rb = c.recency[base + s_fetch[b]];
        if (rj > rb || (rj == rb && s_fetch[j] < s_fetch[b])) b = j;
      }
      const int32_t t = s_fetch[i];
      s_fetch[i] = s_fetch[b];
      s_fetch[b] = t;
    }
    s_n_fetch = n_take;
    if (counters) {
      counters[layer * 4 + 0] += static_cast<u64>(n_routes);
      counters[layer * 4 + 1] += hits;
    }
  }
  __syncthreads();
  const u64 step = s_step;
  for (int i = 0; i < s_n_fetch; ++i) {
    const int v = find_victim(c.last_use, c.n_slot, step);
    if (threadIdx.x == 0 && v >= 0) assign(c, v, static_cast<int32_t>(base + s_fetch[i]), s_fetch[i], step, m);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    u64 n_cpu = 0;
    for (int r = 0; r < n_routes; ++r) {
      const int32_t e = ids[r];
      const int32_t sl = e < 0 ? -1 : c.slot_of[base + e];
      if (e >= 0 && sl < 0) {
        slot_ids[r] = 0;
        gpu_wts[r] = 0.0f;
        cpu_ids[r] = e;
        cpu_wts[r] = wts[r];
        ++n_cpu;
      } else {
        slot_ids[r] = e < 0 ? 0 : sl;
        gpu_wts[r] = e < 0 ? 0.0f : wts[r];
        cpu_ids[r] = -1;
        cpu_wts[r] = 0.0f;
      }
    }
    for (int r = 0; r < n_routes; ++r)
      if (ids[r] >= 0) c.recency[base + ids[r]] = step;
    if (counters) {
      counters[layer * 4 + 2] += static_cast<u64>(*m.n_miss);
      counters[layer * 4 + 3] += n_cpu;
    }
  }
}

// CTA (x, y): miss y, part x of every kind's bytes. Four 16-byte loads in flight per thread
// before the stores: PCIe reads of mapped memory need many outstanding requests.
__global__ void gather_kernel(GatherPlan p, CacheMisses m) {
  const int mi = blockIdx.y;
  if (mi >= *m.n_miss) return;
  const int64_t slot = m.miss_slot[mi], e = m.miss_expert[mi];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int k = 0; k < p.n_kind; ++k) {
    const GatherKind& g = p.kind[k];
    const uint8_t* src = g.src + e * g.bytes;
    uint8_t* dst = g.dst + slot * (g.dst_stride > 0 ? g.dst_stride : g.bytes);
    if (g.bytes % 16 == 0 && g.dst_stride % 16 == 0) {
      const uint4* s4 = reinterpret_cast<const uint4*>(src);
      uint4* d4 = reinterpret_cast<uint4*>(dst);
      const int64_t n = g.bytes / 16;
      int64_t i = t0;
      for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = s4[i], b = s4[i + stride], cc = s4[i + 2 * stride], d = s4[i + 3 * stride];
        d4[i] = a;
        d4[i + stride] = b;
        d4[i + 2 * stride] = cc;
        d4[i + 3 * stride] = d;
      }
      for (; i < n; i += stride) d4[i] = s4[i];
    } else {
      for (int64_t i = t0; i < g.bytes; i += stride) dst[i] = src[i];
    }
  }
}

__global__ void invalidate_kernel(CacheState c, int64_t first, int64_t n) {
  const int64_t i = first + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= first + n || i >= c.n_slot) return;
  const int32_t f = c.expert_of_slot[i];
  if (f >= 0) c.slot_of[f] = -1;
  c.expert_of_slot[i] = -1;
  c.last_use[i] = 0;
}

void check_routes(int64_t n_routes) {
  if (n_routes < 0 || n_routes > kCacheMaxRoutes)
    fail_message("moe_cache_ensure: " + std::to_string(n_routes) + " routes, at most " +
                 std::to_string(kCacheMaxRoutes));
}

}  // namespace

void moe_cache_ensure(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int32_t* slot_ids,
                      const CacheMisses& m, unsigned long long* counters, cudaStream_t s) {
  check_routes(n_routes);
  ensure_kernel<<<1, kThreads, 0, s>>>(c, layer, ids, static_cast<int>(n_routes), slot_ids, m, counters);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_ensure_hybrid(const CacheState& c, int64_t layer, const int32_t* ids, const float* wts,
                             int64_t n_routes, int max_fetch, int32_t* slot_ids, float* gpu_wts, int32_t* cpu_ids,
                             float* cpu_wts, const CacheMisses& m, unsigned long long* counters, cudaStream_t s) {
  check_routes(n_routes);
  ensure_hybrid_kernel<<<1, kThreads, 0, s>>>(c, layer, ids, wts, static_cast<int>(n_routes), max_fetch, slot_ids,
                                              gpu_wts, cpu_ids, cpu_wts, m, counters);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_cache_gather(const GatherPlan& p, const CacheMisses& m, int64_t max_miss, cudaStream_t s) {
  if (max_miss <= 0 || p.n_kind == 0) return;
  int64_t bytes = 0;
  for (int k = 0; k < p.n_kind; ++k) bytes += p.kind[k].bytes;
  // About 64 KiB of one expert per CTA, at most 64 CTAs per miss: an 8-miss step of a
  // Qwen3-30B layer (2.65 MB per expert) runs 512 CTAs, enough requests in flight for PCIe.
  int64_t per_miss = (bytes + 65535) / 65536;
  per_miss = per_miss < 1 ? 1 : (per_miss > 64 ? 64 : per_miss);
  gather_kernel<<<dim3(static_cast<unsigned>(per_miss), static_cast<unsigned>(max_miss)), kThreads, 0, s>>>(p, m);
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
