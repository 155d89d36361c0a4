#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "cuda/pdl.cuh"

namespace ft::cuda {

bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FT_CUDA_PDL");
    if (e != nullptr && std::strcmp(e, "0") == 0) return false;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 9;
  }();
  return on;
}

// FT_SMEM_CARVEOUT=N (probe, H200 session 27): every kernel launched through launch_pdl prefers an
// N% shared-memory carveout (cudaFuncAttributePreferredSharedMemoryCarveout), set once a kernel.
// Unset: the driver's choice per kernel. Whether SMs reconfigure between launches that want
// different carveouts (and so cannot hold the next launch's parked blocks) is what it measures.
void pdl_carveout(const void* kernel) {
  static const int pct = [] {
    const char* e = std::getenv("FT_SMEM_CARVEOUT");
    if (e == nullptr || *e == '\0') return -2;
    const int v = std::atoi(e);
    return v >= -1 && v <= 100 ? v : -2;
  }();
  if (pct == -2) return;
  static std::mutex mu;
  static std::unordered_set<const void*> done;
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(kernel).second) return;
  FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, pct));
}

}  // namespace ft::cuda
