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

// Byte offset of byte b of a tile's row q (0..15) from the start of the tile (the bytes of one
// piece, and so of one block, stay contiguous).
FT_TILED_HD inline int64_t nvfp4_tiled_in_tile(int64_t q, int64_t b) {
  const int64_t piece = b / kTilePiece;
  return piece * kTileStep + q * kTilePiece + (b - piece * kTilePiece);
}

// Byte offset of byte b of row r in a tiled matrix of row_bytes bytes a row.
FT_TILED_HD inline int64_t nvfp4_tiled_offset(int64_t r, int64_t b, int64_t row_bytes) {
  return (r / kTileRows) * kTileRows * row_bytes + nvfp4_tiled_in_tile(r % kTileRows, b);
}

}  // namespace ft::cuda
