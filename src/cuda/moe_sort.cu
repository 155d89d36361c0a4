// gemm.h moe_sort: a stable counting sort of token-slots by expert, three launches and no
// host sync (graph-friendly):
//   1. per chunk of 256 slots, a shared-memory histogram -> hist[e][chunk];
//   2. one CTA turns hist into the global position of each (expert, chunk) run: per expert a
//      running sum over chunks, then an exclusive scan over experts -> offsets;
//   3. per chunk, each slot's rank among the chunk's earlier slots of its expert: within a
//      warp from __match_any_sync (peers below this lane), across the chunk's warps from
//      per-warp counts in shared memory; order[base + rank] = slot.
// Stability follows: chunks are placed in order, warps in order, lanes in order.
#include <string>

#include "cuda/check.h"
#include "cuda/gemm.h"

namespace ft::cuda {
namespace {

constexpr int kChunk = 256;  // slots per CTA = threads per CTA
constexpr int kWarps = kChunk / 32;
constexpr int64_t kMaxExperts = 1536;  // kWarps * n_expert counters in 48 KB of shared memory

int64_t n_chunks(int64_t n_slots) { return (n_slots + kChunk - 1) / kChunk; }

__device__ __forceinline__ int slot_expert(const int32_t* ids, int64_t n_slots, int64_t n_expert, int64_t s) {
  if (s >= n_slots) return -1;
  const int32_t e = ids[s];
  return e >= 0 && e < n_expert ? e : -1;
}

__global__ void hist_kernel(const int32_t* ids, int64_t n_slots, int n_expert, int32_t* hist, int64_t nc) {
  extern __shared__ int32_t cnt[];
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  const int e = slot_expert(ids, n_slots, n_expert, static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x);
  if (e >= 0) atomicAdd(&cnt[e], 1);
  __syncthreads();
  for (int i = threadIdx.x; i < n_expert; i += blockDim.x) hist[i * nc + blockIdx.x] = cnt[i];
}

__global__ void scan_kernel(int32_t* hist, int64_t nc, int n_expert, int32_t* offsets) {
  extern __shared__ int32_t tot[];
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    int32_t run = 0;
    for (int64_t c = 0; c < nc; ++c) {
      const int32_t v = hist[e * nc + c];
      hist[e * nc + c] = run;
      run += v;
    }
    tot[e] = run;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int e = 0; e < n_expert; ++e) {
      const int32_t v = tot[e];
      tot[e] = run;
      offsets[e] = run;
      run += v;
    }
    offsets[n_expert] = run;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    for (int64_t c = 0; c < nc; ++c) hist[e * nc + c] += tot[e];
  }
}

__global__ void scatter_kernel(const int32_t* ids, int64_t n_slots, int n_expert, const int32_t* hist, int64_t nc,
                               int32_t* order) {
  extern __shared__ int32_t wcnt[];  // [kWarps][n_expert]
  for (int i = threadIdx.x; i < kWarps * n_expert; i += blockDim.x) wcnt[i] = 0;
  __syncthreads();
  const int64_t s = static_cast<int64_t>(blockIdx.x) * kChunk + threadIdx.x;
  const int e = slot_expert(ids, n_slots, n_expert, s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned peers = __match_any_sync(0xFFFFFFFFu, e);
  const int rank_w = __popc(peers & ((1u << lane) - 1u));
  if (e >= 0 && rank_w == 0) wcnt[warp * n_expert + e] = __popc(peers);
  __syncthreads();
  if (e < 0) return;
  int32_t rank = hist[e * nc + blockIdx.x] + rank_w;
  for (int w = 0; w < warp; ++w) rank += wcnt[w * n_expert + e];
  order[rank] = static_cast<int32_t>(s);
}

}  // namespace

size_t moe_sort_workspace_bytes(int64_t n_slots, int64_t n_expert) {
  return (static_cast<size_t>(n_chunks(n_slots) * n_expert) * 4 + 255) / 256 * 256;
}

void moe_sort(const int32_t* ids, int64_t n_slots, int64_t n_expert, int32_t* order, int32_t* offsets, void* ws,
              cudaStream_t s) {
  if (n_expert < 1 || n_expert > kMaxExperts || n_slots < 0 || n_slots > 0x7FFFFFFF) {
    fail_message("moe_sort: n_expert=" + std::to_string(n_expert) + ", n_slots=" + std::to_string(n_slots) +
                 ": expected 1.." + std::to_string(kMaxExperts) + " experts and fewer than 2^31 slots");
  }
  const int ne = static_cast<int>(n_expert);
  const int64_t nc = n_chunks(n_slots);
  int32_t* hist = static_cast<int32_t*>(ws);
  const size_t cnt_smem = static_cast<size_t>(ne) * 4;
  if (nc > 0) {
    hist_kernel<<<static_cast<unsigned>(nc), kChunk, cnt_smem, s>>>(ids, n_slots, ne, hist, nc);
    FT_CUDA_CHECK_LAUNCH();
  }
  scan_kernel<<<1, 1024, cnt_smem, s>>>(hist, nc, ne, offsets);
  FT_CUDA_CHECK_LAUNCH();
  if (nc > 0) {
    scatter_kernel<<<static_cast<unsigned>(nc), kChunk, cnt_smem * kWarps, s>>>(ids, n_slots, ne, hist, nc, order);
    FT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace ft::cuda
