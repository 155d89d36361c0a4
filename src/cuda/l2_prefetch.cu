#include "cuda/l2_prefetch.h"

#include <cstdint>

#include "cuda/check.h"
#include "cuda/device.h"

namespace ft::cuda {
namespace {

// One bulk prefetch a thread: the TMA unit walks the piece, so a thread's issue costs one
// instruction whatever its size.
__global__ void l2_prefetch_kernel(const uint8_t* p, size_t bytes, size_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const size_t off = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * chunk;
  if (off >= bytes) return;
  const uint32_t n = static_cast<uint32_t>(bytes - off < chunk ? bytes - off : chunk) & ~15u;
  if (n == 0) return;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
#endif
}

}  // namespace

bool l2_prefetch_supported() { return bulk_copy_supported(); }

void l2_prefetch(const void* p, size_t bytes, size_t chunk, cudaStream_t s) {
  if (p == nullptr || bytes < 16 || chunk < 16 || reinterpret_cast<uintptr_t>(p) % 16 != 0) return;
  const size_t pieces = (bytes + chunk - 1) / chunk;
  constexpr unsigned kThreads = 32;
  const auto grid = static_cast<unsigned>((pieces + kThreads - 1) / kThreads);
  l2_prefetch_kernel<<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(p), bytes, chunk);
  FT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ft::cuda
