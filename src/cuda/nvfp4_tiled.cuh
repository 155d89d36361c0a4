// Offsets in the tiled NVFP4 layout (nvfp4_tiled.h), for host and device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FT_TILED_HD __host__ __device__
#else
#define FT_TILED_HD
#endif

namespace ft::cuda {

inline constexpr int kTileRows = 16;                      // rows of a tile
inline constexpr int kTilePiece = 144;                    // bytes of a row's piece: 4 NVFP4 blocks
inline constexpr int kTileStep = kTileRows * kTilePiece;  // 2304: one piece of every row of a tile

// Byte offset of byte b of row r (b within a piece when b % 144 is; any b of a block) in a
// tiled matrix of row_bytes bytes a row.
FT_TILED_HD inline int64_t nvfp4_tiled_offset(int64_t r, int64_t b, int64_t row_bytes) {
  const int64_t piece = b / kTilePiece;
  return (r / kTileRows) * kTileRows * row_bytes + piece * kTileStep +
         (r % kTileRows) * kTilePiece + (b - piece * kTilePiece);
}

}  // namespace ft::cuda
