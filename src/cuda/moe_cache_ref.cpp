// Scalar CPU twin of the slot cache's ensure kernels (cuda/moe_cache.h): the same passes in
// the same order, so the victims, the miss list and every output match the kernels exactly.
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/moe_cache.h"

namespace ft::cuda {
namespace {

using u64 = unsigned long long;

int find_victim_ref(const CacheState& c, u64 step) {
  int v = -1;
  for (int64_t i = 0; i < c.n_slot; ++i) {
    if (c.last_use[i] == step) continue;
    if (v < 0 || c.last_use[i] < c.last_use[v]) v = static_cast<int>(i);
  }
  return v;
}

void assign_ref(const CacheState& c, int v, int32_t flat, int32_t e, u64 step, const CacheMisses& m) {
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

}  // namespace

void moe_cache_ensure_ref(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes,
                          int32_t* slot_ids, const CacheMisses& m, unsigned long long* counters,
                          const CacheSplit& split) {
  const int64_t base = layer * c.n_expert;
  const u64 step = ++*c.step;
  *m.n_miss = 0;
  u64 hits = 0;
  std::vector<char> resident(static_cast<size_t>(n_routes), 0);  // before this call
  for (int64_t r = 0; r < n_routes; ++r) {
    if (ids[r] < 0) continue;
    const int32_t sl = c.slot_of[base + ids[r]];
    if (sl >= 0) {
      c.last_use[sl] = step;
      resident[static_cast<size_t>(r)] = 1;
      ++hits;
    }
  }
  for (int64_t r = 0; r < n_routes; ++r) {
    const int32_t e = ids[r];
    if (e < 0) {
      slot_ids[r] = -1;
      continue;
    }
    if (c.slot_of[base + e] >= 0) {
      slot_ids[r] = c.slot_of[base + e];
      continue;
    }
    const int v = find_victim_ref(c, step);
    if (v >= 0) assign_ref(c, v, static_cast<int32_t>(base + e), e, step, m);
    slot_ids[r] = v;
  }
  if (split.hit_ids) {
    for (int64_t r = 0; r < n_routes; ++r) {
      const int32_t sl = slot_ids[r];
      const bool hit = resident[static_cast<size_t>(r)] != 0, miss = !hit && sl >= 0;
      split.hit_ids[r] = hit ? sl : split.dummy;
      split.miss_ids[r] = miss ? sl : split.dummy;
      split.miss_mark[r] = miss ? sl : -1;
    }
  }
  if (counters) {
    counters[layer * 4 + 0] += static_cast<u64>(n_routes);
    counters[layer * 4 + 1] += hits;
    counters[layer * 4 + 2] += static_cast<u64>(*m.n_miss);
  }
}

void moe_cache_prefetch_ref(const CacheState& c, int64_t layer, const int32_t* ids, int64_t n_routes, int max_new,
                            const CacheMisses& m) {
  const int64_t base = layer * c.n_expert;
  const u64 step = *c.step;
  *m.n_miss = 0;
  for (int64_t r = 0; r < n_routes; ++r)
    if (ids[r] >= 0 && c.slot_of[base + ids[r]] >= 0) c.last_use[c.slot_of[base + ids[r]]] = step;
  for (int64_t r = 0; r < n_routes; ++r) {
    const int32_t e = ids[r];
    if (e < 0 || c.slot_of[base + e] >= 0 || *m.n_miss >= max_new) continue;
    const int v = find_victim_ref(c, step);
    if (v >= 0) assign_ref(c, v, static_cast<int32_t>(base + e), e, step, m);
  }
}

void moe_cache_ensure_hybrid_ref(const CacheState& c, int64_t layer, const int32_t* ids, const float* wts,
                                 int64_t n_routes, int max_fetch, int32_t* slot_ids, float* gpu_wts,
                                 int32_t* cpu_ids, float* cpu_wts, const CacheMisses& m,
                                 unsigned long long* counters) {
  const int64_t base = layer * c.n_expert;
  const u64 step = ++*c.step;
  *m.n_miss = 0;
  u64 hits = 0;
  std::vector<int32_t> dist;
  for (int64_t r = 0; r < n_routes; ++r) {
    const int32_t e = ids[r];
    if (e < 0) continue;
    const int32_t sl = c.slot_of[base + e];
    if (sl >= 0) {
      c.last_use[sl] = step;
      ++hits;
      continue;
    }
    bool seen = false;
    for (int32_t d : dist) seen |= d == e;
    if (!seen) dist.push_back(e);
  }
  const int n_dist = static_cast<int>(dist.size());
  const int n_take = max_fetch < 0 ? 0 : (max_fetch < n_dist ? max_fetch : n_dist);
  for (int i = 0; i < n_take; ++i) {
    int b = i;
    for (int j = i + 1; j < n_dist; ++j) {
      const u64 rj = c.recency[base + dist[j]], rb = c.recency[base + dist[b]];
      if (rj > rb || (rj == rb && dist[j] < dist[b])) b = j;
    }
    std::swap(dist[i], dist[b]);
  }
  for (int i = 0; i < n_take; ++i) {
    const int v = find_victim_ref(c, step);
    if (v >= 0) assign_ref(c, v, static_cast<int32_t>(base + dist[i]), dist[i], step, m);
  }
  u64 n_cpu = 0;
  for (int64_t r = 0; r < n_routes; ++r) {
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
  for (int64_t r = 0; r < n_routes; ++r)
    if (ids[r] >= 0) c.recency[base + ids[r]] = step;
  if (counters) {
    counters[layer * 4 + 0] += static_cast<u64>(n_routes);
    counters[layer * 4 + 1] += hits;
    counters[layer * 4 + 2] += static_cast<u64>(*m.n_miss);
    counters[layer * 4 + 3] += n_cpu;
  }
}

}  // namespace ft::cuda
