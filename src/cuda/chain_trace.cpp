// cuda/chain_trace.h: the host side of the decode-chain timeline (the device side is pdl.cuh's).
#include "cuda/chain_trace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/check.h"

namespace ft::cuda {
namespace {

std::vector<void (*)(void*)>& setters() {
  static std::vector<void (*)(void*)> v;
  return v;
}
void* g_buf = nullptr;
uint32_t g_cap = 0;

}  // namespace

bool chain_trace_wanted() {
#if defined(FT_CHAIN_TRACE) && FT_CHAIN_TRACE
  const char* e = std::getenv("FT_CHAIN_TRACE");
  return e != nullptr && *e != '\0';
#else
  return false;
#endif
}

void chain_trace_register(void (*set)(void* buffer)) { setters().push_back(set); }

void chain_trace_start(uint32_t capacity) {
  if (g_buf == nullptr || capacity > g_cap) {
    if (g_buf != nullptr) FT_CUDA_CHECK(cudaFree(g_buf));
    FT_CUDA_CHECK(cudaMalloc(&g_buf, kChainTraceHeader + static_cast<size_t>(capacity) * sizeof(ChainTraceRec)));
    g_cap = capacity;
  }
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const uint32_t hdr[4] = {0, g_cap, 0, 0};
  FT_CUDA_CHECK(cudaMemcpy(g_buf, hdr, sizeof hdr, cudaMemcpyHostToDevice));
  for (auto* set : setters()) set(g_buf);
}

int64_t chain_trace_dump(const std::string& path) {
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto* set : setters()) set(nullptr);
  if (g_buf == nullptr) return 0;
  uint32_t hdr[4];
  FT_CUDA_CHECK(cudaMemcpy(hdr, g_buf, sizeof hdr, cudaMemcpyDeviceToHost));
  const uint32_t n = std::min(hdr[0], g_cap);
  std::vector<ChainTraceRec> recs(n);
  if (n > 0)
    FT_CUDA_CHECK(cudaMemcpy(recs.data(), static_cast<uint8_t*>(g_buf) + kChainTraceHeader, n * sizeof(ChainTraceRec),
                             cudaMemcpyDeviceToHost));
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) fail_message("chain trace: cannot write " + path);
  std::fprintf(f, "seq,grid,block,t_start_ns,t_wait_ns\n");
  for (uint32_t i = 0; i < n; ++i)
    std::fprintf(f, "%u,%u,%u,%llu,%llu\n", i, recs[i].grid, recs[i].block, recs[i].t0, recs[i].t1);
  if (std::fclose(f) != 0) fail_message("chain trace: cannot write " + path);
  if (hdr[0] > g_cap)
    std::fprintf(stderr, "chain trace: %u launches, the first %u kept (FT_CHAIN_TRACE)\n", hdr[0], g_cap);
  return n;
}

}  // namespace ft::cuda
