// nvfp4_scan.h: the scan for the UE4M3 NaN codes, one thread a 64-element block.
#include "cuda/nvfp4_scan.h"

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/gemv_q8_formats.cuh"

namespace ft::cuda {
namespace {

// The answer of the scan in flight (load time, one at a time): a symbol, not a cudaMalloc, so that the
// scan leaves the allocator as it found it.
__device__ unsigned g_found;

__global__ void scan_kernel(const uint8_t* w, int64_t n_blocks, int64_t nb, int64_t row_bytes) {
  unsigned any = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_blocks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t* b = w + (i / nb) * row_bytes + (i % nb) * 36;  // byte loads: any alignment
    const uint32_t s = b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
    any |= q8_detail::nvfp4_scales_nan(s);
  }
  if (__any_sync(0xFFFFFFFFu, any != 0) && (threadIdx.x & 31) == 0) atomicOr(&g_found, 1u);
}

}  // namespace

bool nvfp4_scales_clean(const uint8_t* w, int64_t rows, int64_t row_bytes, int64_t k, cudaStream_t s) {
  if (k % 64 != 0 || row_bytes < k / 64 * 36 || rows < 0)
    fail_message("cuda nvfp4_scales_clean: k = " + std::to_string(k) + " (a multiple of 64) needs rows of at least " +
                 std::to_string(k / 64 * 36) + " bytes, got " + std::to_string(row_bytes));
  const int64_t nb = k / 64, n = rows * nb;
  if (n == 0) return true;
  unsigned h = 0;
  FT_CUDA_CHECK(cudaMemcpyToSymbolAsync(g_found, &h, sizeof(unsigned), 0, cudaMemcpyHostToDevice, s));
  const int64_t grid = std::min<int64_t>((n + 255) / 256, 4096);
  scan_kernel<<<static_cast<unsigned>(grid), 256, 0, s>>>(w, n, nb, row_bytes);
  FT_CUDA_CHECK_LAUNCH();
  FT_CUDA_CHECK(cudaMemcpyFromSymbolAsync(&h, g_found, sizeof(unsigned), 0, cudaMemcpyDeviceToHost, s));
  FT_CUDA_CHECK(cudaStreamSynchronize(s));
  return h == 0;
}

// Byte by byte on purpose, not q8_detail::nvfp4_scales_nan's word trick: the twin the scan is tested against
// must not share the scan's arithmetic.
bool nvfp4_scales_clean_host(const uint8_t* w, int64_t rows, int64_t row_bytes, int64_t k) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k / 64; ++j) {
      const uint8_t* b = w + r * row_bytes + j * 36;
      for (int i = 0; i < 4; ++i)
        if ((b[i] & 0x7Fu) == 0x7Fu) return false;
    }
  return true;
}

}  // namespace ft::cuda
