#include "cuda/device.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "cuda/check.h"

namespace ft::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device"/"no driver" error
    return 0;
  }
  return n;
}

bool bulk_copy_supported() {
  static const bool v = [] {
    int dev = 0, major = 0;
    if (device_count() == 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return v;
}

namespace {
// Attribute A of the current device, queried once per device (no sync: capture-safe). Devices past the
// 64th are queried every call.
template <cudaDeviceAttr A>
int current_attribute() {
  static std::atomic<int> cached[64] = {};
  int dev = 0, n = 0;
  FT_CUDA_CHECK(cudaGetDevice(&dev));
  const bool keep = dev >= 0 && dev < 64;
  if (keep && (n = cached[dev].load(std::memory_order_relaxed)) != 0) return n;
  FT_CUDA_CHECK(cudaDeviceGetAttribute(&n, A, dev));
  if (keep) cached[dev].store(n, std::memory_order_relaxed);
  return n;
}
}  // namespace

int sm_count() { return current_attribute<cudaDevAttrMultiProcessorCount>(); }
int max_smem_optin() { return current_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(); }
int max_smem_per_sm() { return current_attribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(); }
double peak_dram_gbs() {
  const double khz = current_attribute<cudaDevAttrMemoryClockRate>();
  const double bits = current_attribute<cudaDevAttrGlobalMemoryBusWidth>();
  return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
}

std::string apply_cache_config_env() {
  const char* e = std::getenv("FT_CUDA_CACHE_CONFIG");
  if (e == nullptr || *e == '\0') return "";
  static constexpr struct {
    const char* name;
    cudaFuncCache v;
  } kChoices[] = {{"none", cudaFuncCachePreferNone},
                  {"shared", cudaFuncCachePreferShared},
                  {"l1", cudaFuncCachePreferL1},
                  {"equal", cudaFuncCachePreferEqual}};
  for (const auto& c : kChoices) {
    if (std::strcmp(e, c.name) != 0) continue;
    FT_CUDA_CHECK(cudaDeviceSetCacheConfig(c.v));
    return c.name;
  }
  fail("FT_CUDA_CACHE_CONFIG={}: expected none, shared, l1 or equal", e);
}

std::string device_summary(int dev) {
  cudaDeviceProp p{};
  FT_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return fmt::format("{}, sm_{}{}, {} SMs, {:.1f} GiB, L2 {} MiB", p.name, p.major, p.minor, p.multiProcessorCount,
                     static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024 * 1024), p.l2CacheSize >> 20);
}

}  // namespace ft::cuda
