// ft-bench-moe-cache: the PCIe side of the offload MoE backend, on this machine's GPU.
//   * pinned H2D bandwidth (cudaMemcpyAsync of 256 MiB, the cost model's denominator);
//   * the slot gather (cuda/moe_cache.h) of m = 1..32 misses of Qwen3-30B-A3B-shaped NVFP4
//     experts (gate, up, down: 768 x 2048 each, 2.65 MB per expert with the 16-byte scale
//     row) from mapped pinned memory: one launch, and per tensor kind (FT_MOE_COPY=per_bank);
//   * the ensure kernel's time per call (S slots, 8 routes of which m miss), alone and as
//     decode runs it (48 calls captured in a graph, uniform routes).
// Gather times are kernel-only (round 1's table included the staging copies).
// Usage: ft-bench-moe-cache [n_slot=3072]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/moe_cache.h"

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  const int64_t S = argc > 1 ? std::atoll(argv[1]) : 3072;
  const int64_t E = 128, L = 48;
  const int64_t tensor = 768 * (2048 / 64 * 36);  // one NVFP4 768 x 2048 expert matrix
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto ms = [&] {
    float t = 0;
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&t, a, b));
    return static_cast<double>(t);
  };

  // 1. Pinned H2D.
  const size_t big = size_t{256} << 20;
  void *hp = nullptr, *dp = nullptr;
  CK(cudaHostAlloc(&hp, big, cudaHostAllocDefault));
  CK(cudaMalloc(&dp, big));
  CK(cudaMemcpyAsync(dp, hp, big, cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(dp, hp, big, cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(b, s));
  const double h2d = 10.0 * static_cast<double>(big) / (ms() * 1e-3) / 1e9;
  std::printf("pinned H2D cudaMemcpyAsync 256 MiB: %.1f GB/s\n", h2d);
  CK(cudaFree(dp));
  CK(cudaFreeHost(hp));

  // 2. Gather: host bank of one layer (E experts x 3 tensors + scale rows), pools of S slots.
  std::vector<void*> host(4);
  std::vector<uint8_t*> pool(4);
  const int64_t bytes[4] = {tensor, tensor, tensor, 16};
  ft::cuda::GatherPlan plan;
  for (int k = 0; k < 4; ++k) {
    CK(cudaHostAlloc(&host[k], static_cast<size_t>(E * bytes[k]), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host[k], k + 1, static_cast<size_t>(E * bytes[k]));
    CK(cudaMalloc(&pool[k], static_cast<size_t>(S * bytes[k])));
    void* dev = nullptr;
    CK(cudaHostGetDevicePointer(&dev, host[k], 0));
    plan.kind[plan.n_kind++] = {static_cast<const uint8_t*>(dev), pool[k], bytes[k], 0};
  }
  const int64_t expert = 3 * tensor + 16;
  int32_t *d_n, *d_slot, *d_exp;
  CK(cudaMalloc(&d_n, 4));
  CK(cudaMalloc(&d_slot, 64 * 4));
  CK(cudaMalloc(&d_exp, 64 * 4));
  ft::cuda::CacheMisses m{d_n, d_slot, d_exp};
  std::printf("expert %.2f MB (3 x %lld B + 16 B), PCIe cost model at %.1f GB/s: %.1f us per miss\n",
              static_cast<double>(expert) / 1e6, static_cast<long long>(tensor), h2d,
              static_cast<double>(expert) / (h2d * 1e3));
  std::printf("%6s %14s %14s %16s %16s %16s\n", "misses", "gather us", "gather GB/s", "per-bank GB/s",
              "grid-of-8 us", "grid-of-8 GB/s");
  for (int nm : {1, 2, 4, 8, 16, 32}) {
    std::vector<int32_t> sl(64), ex(64);
    double t[3] = {0, 0, 0};
    // Kernel time only (events around the launches): the staging copies stay outside.
    // Mode 2 sizes the grid for 8 routes as a one-token decode step does (max_miss = 8).
    for (int mode = 0; mode < 3; ++mode) {
      const int reps = 20;
      for (int r = 0; r < reps; ++r) {
        for (int i = 0; i < nm; ++i) {
          sl[i] = static_cast<int32_t>((r * 37 + i * 5) % S);
          ex[i] = static_cast<int32_t>((r * 11 + i * 3) % E);  // cold-ish rows each rep
        }
        CK(cudaMemcpyAsync(d_n, &nm, 4, cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(d_slot, sl.data(), 64 * 4, cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(d_exp, ex.data(), 64 * 4, cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));  // pageable staging copies above: keep reps apart
        CK(cudaEventRecord(a, s));
        if (mode == 0) {
          ft::cuda::moe_cache_gather(plan, m, nm, s);
        } else if (mode == 2) {
          ft::cuda::moe_cache_gather(plan, m, nm < 8 ? 8 : nm, s);
        } else {
          for (int k = 0; k < plan.n_kind; ++k) {
            ft::cuda::GatherPlan one;
            one.kind[0] = plan.kind[k];
            one.n_kind = 1;
            ft::cuda::moe_cache_gather(one, m, nm, s);
          }
        }
        CK(cudaEventRecord(b, s));
        t[mode] += ms() * 1e3 / reps;
      }
    }
    const double gb = static_cast<double>(nm * expert) / 1e3;
    std::printf("%6d %14.1f %14.1f %16.1f %16.1f %16.1f\n", nm, t[0], gb / t[0], gb / t[1], t[2], gb / t[2]);
  }

  // 3. The ensure kernel: 8 routes a call over L layers, S slots.
  int32_t *slot_of, *eos, *ids, *sids;
  unsigned long long *last, *step;
  CK(cudaMalloc(&slot_of, L * E * 4));
  CK(cudaMalloc(&eos, S * 4));
  CK(cudaMalloc(&last, S * 8));
  CK(cudaMalloc(&step, 8));
  CK(cudaMalloc(&ids, 64 * 4));
  CK(cudaMalloc(&sids, 64 * 4));
  ft::cuda::CacheState c{slot_of, eos, last, step, nullptr, L, E, S};
  ft::cuda::moe_cache_reset(c, s);
  std::vector<int32_t> route(8);
  const int calls = 480;
  double total = 0;
  for (int i = 0; i < calls; ++i) {
    for (int j = 0; j < 8; ++j) route[j] = (i * 7 + j * 13) % E;
    CK(cudaMemcpyAsync(ids, route.data(), 32, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(a, s));
    ft::cuda::moe_cache_ensure(c, i % L, ids, 8, sids, m, nullptr, s);
    CK(cudaEventRecord(b, s));
    total += ms();
  }
  std::printf("ensure kernel: %.1f us per call (S = %lld, 8 routes, mostly misses)\n", total * 1e3 / calls,
              static_cast<long long>(S));

  // 4. The ensure kernel as decode runs it: 48 calls (one per layer) captured in a graph,
  //    uniform routes (8 distinct experts a layer), so with S = half of the experts about
  //    half the routes miss. Time per call = graph time / 48 (the launch gaps included).
  int32_t* ids_all;
  CK(cudaMalloc(&ids_all, L * 8 * 4));
  unsigned long long* counters;
  CK(cudaMalloc(&counters, L * 4 * 8));
  CK(cudaMemset(counters, 0, L * 4 * 8));
  ft::cuda::moe_cache_reset(c, s);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int64_t l = 0; l < L; ++l) ft::cuda::moe_cache_ensure(c, l, ids_all + l * 8, 8, sids, m, counters, s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  std::vector<int32_t> all(static_cast<size_t>(L * 8));
  uint32_t rng = 12345;
  const int replays = 200;
  double gt = 0;
  for (int i = 0; i < replays; ++i) {
    for (int64_t l = 0; l < L; ++l) {
      for (int j = 0; j < 8; ++j) {
        bool dup = true;
        int32_t e = 0;
        while (dup) {
          rng = rng * 1664525u + 1013904223u;
          e = static_cast<int32_t>((rng >> 8) % E);
          dup = false;
          for (int q = 0; q < j; ++q) dup |= all[static_cast<size_t>(l * 8 + q)] == e;
        }
        all[static_cast<size_t>(l * 8 + j)] = e;
      }
    }
    CK(cudaMemcpyAsync(ids_all, all.data(), all.size() * 4, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    if (i >= replays / 2) gt += ms();  // the first half fills the cache
    else CK(cudaEventSynchronize(b));
  }
  std::vector<unsigned long long> cnt(static_cast<size_t>(L * 4));
  CK(cudaMemcpy(cnt.data(), counters, cnt.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long routes = 0, misses = 0;
  for (int64_t l = 0; l < L; ++l) routes += cnt[static_cast<size_t>(l * 4)], misses += cnt[static_cast<size_t>(l * 4 + 2)];
  std::printf("ensure in a graph: %.2f us per call (48 calls a replay, S = %lld, 8 uniform routes a call, %.2f "
              "misses a call over the run)\n",
              gt * 1e3 / (replays / 2) / L, static_cast<long long>(S),
              static_cast<double>(misses) / static_cast<double>(routes) * 8.0);
  return 0;
}
