#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

namespace {
std::vector<void (*)(unsigned)>& early_setters() {
  static std::vector<void (*)(unsigned)> v;
  return v;
}
}  // namespace

void pdl_early_register(void (*set)(unsigned)) { early_setters().push_back(set); }

unsigned pdl_early_mask() {
  static const unsigned m = [] {
    const char* e = std::getenv("FT_PDL_EARLY");
    if (e == nullptr || *e == 0) return 0u;
    char* end = nullptr;
    const unsigned long v = std::strtoul(e, &end, 0);
    if (*end != 0 || v > 31)
      fail_message(std::string("FT_PDL_EARLY=") + e + ": expected a class mask 0..31 (cuda/pdl.cuh PdlClass)");
    return pdl_enabled() ? static_cast<unsigned>(v) : 0u;
  }();
  return m;
}

void pdl_early_init() {
  static const bool done = [] {
    const unsigned m = pdl_early_mask();
    if (m != 0)
      for (auto* set : early_setters()) set(m);
    return true;
  }();
  (void)done;
}

}  // namespace ft::cuda
