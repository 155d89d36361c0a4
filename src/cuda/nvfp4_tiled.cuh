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

// The lane-major variant of a piece (nvfp4_tiled.h, "lanes"): the 2304 bytes of a step permuted so that
// lane l (g = l / 4, c = l % 4) of the tensor-core GEMV finds its bytes together, in the order it uses them:
//   bytes 0..2047: code words; vector j (0..3) of lane l at 16 (32 j + l) holds the lane's words 4 j .. 4 j + 3,
//     word w = 8 gh + 2 t + r being bytes 4 c .. 4 c + 3 of the codes half t & 1 of block 2 gh + (t >> 1) of
//     row g + 8 r (the word gemv_mma.cu's tiled kernel reads at (2 gh + (t >> 1)) * 36 + 4 + 16 (t & 1) + 4 c);
//   bytes 2048..2303: lane l's 8 bytes at 2048 + 8 l, halfwords u = 2 gh + r: bytes 2 h, 2 h + 1 (h = c & 1) of
//     the scale word of block 2 gh + (c >> 1) of row g + 8 r.
// So a code word (4 bytes at a block's byte 4 + 4 i) and a scale halfword stay contiguous; nothing longer does.
// Offset in the piece of byte b (0..143) of the piece's row q (0..15):
FT_TILED_HD inline int nvfp4_lane_in_piece(int q, int b) {
  const int bb = b / 36, o = b - 36 * bb, gh = bb >> 1, half = bb & 1, g = q & 7, r = q >> 3;
  if (o < 4) {  // scale byte
    const int lane = 4 * g + 2 * half + (o >> 1);
    return 2048 + 8 * lane + 2 * (2 * gh + r) + (o & 1);
  }
  const int e = o - 4, t = 2 * half + (e >> 4), lane = 4 * g + ((e >> 2) & 3);
  const int w = 8 * gh + 2 * t + r;
  return 16 * (32 * (w >> 2) + lane) + 4 * (w & 3) + (e & 3);
}

// Byte offset of byte b of a tile's row q in the lane-major layout, in int arithmetic (a tile's 16 rows fit): the
// slab kernel's word-by-word gather calls it directly (the int64 form costs 64-bit divisions by constants a word).
FT_TILED_HD inline int nvfp4_lanes_in_tile(int q, int b) {
  const int piece = b / kTilePiece;
  return piece * kTileStep + nvfp4_lane_in_piece(q, b - piece * kTilePiece);
}

// Byte offset of byte b of a tile's row q in the tiled layout (lanes: its lane-major variant).
FT_TILED_HD inline int64_t nvfp4_tiled_in_tile(int64_t q, int64_t b, bool lanes) {
  if (!lanes) return nvfp4_tiled_in_tile(q, b);
  return nvfp4_lanes_in_tile(static_cast<int>(q), static_cast<int>(b));
}

// Byte offset of byte b of row r in a tiled matrix of row_bytes bytes a row.
FT_TILED_HD inline int64_t nvfp4_tiled_offset(int64_t r, int64_t b, int64_t row_bytes, bool lanes = false) {
  return (r / kTileRows) * kTileRows * row_bytes + nvfp4_tiled_in_tile(r % kTileRows, b, lanes);
}

}  // namespace ft::cuda
