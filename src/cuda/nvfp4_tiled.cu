// nvfp4_tiled.h: the in-place repack (one CTA a tile: the tile's bytes into shared memory,
// then back piece-major; a tile keeps its byte range, so no scratch buffer) and its host twin.
#include <atomic>
#include <cstring>
#include <string>

#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
std::atomic<int64_t> g_launches{0};

// Both kernels' first half: this CTA's tile (16 rows, row-major) copied into shared memory; returns where it starts
// in w.
__device__ __forceinline__ uint8_t* stage_tile(uint8_t* w, int64_t row_bytes, uint8_t* tile) {
  uint8_t* base = w + static_cast<int64_t>(blockIdx.x) * kTileRows * row_bytes;
  const int n16 = static_cast<int>(kTileRows * row_bytes / 16);
  for (int i = static_cast<int>(threadIdx.x); i < n16; i += kThreads)
    reinterpret_cast<uint4*>(tile)[i] = reinterpret_cast<const uint4*>(base)[i];
  __syncthreads();
  return base;
}

__global__ void __launch_bounds__(kThreads) tile_kernel(uint8_t* w, int64_t row_bytes) {
  extern __shared__ __align__(16) uint8_t tile[];
  uint8_t* base = stage_tile(w, row_bytes, tile);
  const int n16 = static_cast<int>(kTileRows * row_bytes / 16);
  // Destination vector i of the tile: piece p = i / 144, row q, byte o within the piece.
  for (int i = static_cast<int>(threadIdx.x); i < n16; i += kThreads) {
    const int byte = 16 * i, p = byte / kTileStep, rest = byte - p * kTileStep;
    const int q = rest / kTilePiece, o = rest - q * kTilePiece;
    reinterpret_cast<uint4*>(base)[i] = *reinterpret_cast<const uint4*>(
        tile + static_cast<int64_t>(q) * row_bytes + p * kTilePiece + o);
  }
}

// The lane-major variant: every halfword of the tile (codes words and scale halfwords stay whole at this
// grain) scattered to where nvfp4_tiled_in_tile(.., lanes) puts it -- the readers' own map, so the two cannot
// disagree. 2-byte stores: slow for a kernel, a few ms a model at load.
__global__ void __launch_bounds__(kThreads) tile_lanes_kernel(uint8_t* w, int64_t row_bytes) {
  extern __shared__ __align__(16) uint8_t tile[];
  uint8_t* base = stage_tile(w, row_bytes, tile);
  const int half_row = static_cast<int>(row_bytes / 2);
  for (int i = static_cast<int>(threadIdx.x); i < kTileRows * half_row; i += kThreads) {
    const int q = i / half_row, b = 2 * (i - q * half_row);
    *reinterpret_cast<uint16_t*>(base + nvfp4_tiled_in_tile(q, b, true)) =
        *reinterpret_cast<const uint16_t*>(tile + static_cast<int64_t>(q) * row_bytes + b);
  }
}

}  // namespace

bool nvfp4_tile_ok(int64_t rows, int64_t k, int64_t row_bytes) {
  return rows > 0 && rows % kTileRows == 0 && k > 0 && k % 256 == 0 && row_bytes == k / 64 * 36;
}

bool nvfp4_tile_fits(int64_t row_bytes) {
  return kTileRows * row_bytes <= static_cast<int64_t>(max_smem_optin());
}

void nvfp4_tile(uint8_t* w, int64_t rows, int64_t row_bytes, cudaStream_t s, bool lanes) {
  if (rows <= 0) return;
  if (rows % kTileRows != 0 || row_bytes % kTilePiece != 0 ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0)
    fail_message(
        "nvfp4_tile: " + std::to_string(rows) + " rows of " + std::to_string(row_bytes) +
        " bytes: expected rows a multiple of 16, rows of whole 144-byte pieces, 16-byte alignment");
  const size_t smem = static_cast<size_t>(kTileRows * row_bytes);
  if (!nvfp4_tile_fits(row_bytes))
    fail_message("nvfp4_tile: a tile of " + std::to_string(smem) + " bytes exceeds this GPU's shared memory a block");
  auto kernel = lanes ? tile_lanes_kernel : tile_kernel;
  FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(rows / kTileRows), kThreads, smem, s>>>(w, row_bytes);
  FT_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

int64_t nvfp4_tile_launches() { return g_launches.load(std::memory_order_relaxed); }

void nvfp4_tile_host(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, bool lanes) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_bytes; ++b) dst[nvfp4_tiled_offset(r, b, row_bytes, lanes)] = src[r * row_bytes + b];
}

}  // namespace ft::cuda
