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

__global__ void __launch_bounds__(kThreads) tile_kernel(uint8_t* w, int64_t row_bytes) {
  extern __shared__ __align__(16) uint8_t tile[];
  uint8_t* base = w + static_cast<int64_t>(blockIdx.x) * kTileRows * row_bytes;
  const int n16 = static_cast<int>(kTileRows * row_bytes / 16);
  for (int i = static_cast<int>(threadIdx.x); i < n16; i += kThreads)
    reinterpret_cast<uint4*>(tile)[i] = reinterpret_cast<const uint4*>(base)[i];
  __syncthreads();
  // Destination vector i of the tile: piece p = i / 144, row q, byte o within the piece.
  for (int i = static_cast<int>(threadIdx.x); i < n16; i += kThreads) {
    const int byte = 16 * i, p = byte / kTileStep, rest = byte - p * kTileStep;
    const int q = rest / kTilePiece, o = rest - q * kTilePiece;
    reinterpret_cast<uint4*>(base)[i] = *reinterpret_cast<const uint4*>(
        tile + static_cast<int64_t>(q) * row_bytes + p * kTilePiece + o);
  }
}

}  // namespace

bool nvfp4_tile_ok(int64_t rows, int64_t k, int64_t row_bytes) {
  return rows > 0 && rows % kTileRows == 0 && k > 0 && k % 256 == 0 && row_bytes == k / 64 * 36;
}

bool nvfp4_tile_fits(int64_t row_bytes) {
  return kTileRows * row_bytes <= static_cast<int64_t>(max_smem_optin());
}

void nvfp4_tile(uint8_t* w, int64_t rows, int64_t row_bytes, cudaStream_t s) {
  if (rows <= 0) return;
  if (rows % kTileRows != 0 || row_bytes % kTilePiece != 0 ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0)
    fail_message(
        "nvfp4_tile: " + std::to_string(rows) + " rows of " + std::to_string(row_bytes) +
        " bytes: expected rows a multiple of 16, rows of whole 144-byte pieces, 16-byte alignment");
  const size_t smem = static_cast<size_t>(kTileRows * row_bytes);
  if (!nvfp4_tile_fits(row_bytes))
    fail_message("nvfp4_tile: a tile of " + std::to_string(smem) + " bytes exceeds this GPU's shared memory a block");
  FT_CUDA_CHECK(cudaFuncSetAttribute(tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  tile_kernel<<<static_cast<unsigned>(rows / kTileRows), kThreads, smem, s>>>(w, row_bytes);
  FT_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

int64_t nvfp4_tile_launches() { return g_launches.load(std::memory_order_relaxed); }

void nvfp4_tile_host(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_bytes; b += kTilePiece)
      std::memcpy(dst + nvfp4_tiled_offset(r, b, row_bytes), src + r * row_bytes + b, kTilePiece);
}

}  // namespace ft::cuda
