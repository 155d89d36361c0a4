#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace ft::cuda
