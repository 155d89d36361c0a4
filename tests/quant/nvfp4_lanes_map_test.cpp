// The lane-major tiled NVFP4 layout's byte map (src/cuda/nvfp4_tiled.cuh nvfp4_lane_in_piece, host-callable):
// a permutation of each 2304-byte piece and of a whole matrix, and, restated here from the tensor-core GEMV's
// reads of the tiled piece (gemv_mma.cuh mma_step_acc), the place of every word and scale halfword each lane
// takes: what the lanes kernels, the slab kernel's gather and the dequantiser rely on. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/nvfp4_tiled.cuh"

namespace ft::cuda {
namespace {

TEST(Nvfp4LanesMap, PermutesEachPiece) {
  std::vector<int> hits(kTileStep, 0);
  for (int q = 0; q < kTileRows; ++q)
    for (int b = 0; b < kTilePiece; ++b) {
      const int o = nvfp4_lane_in_piece(q, b);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, kTileStep) << "row " << q << " byte " << b;
      ++hits[static_cast<size_t>(o)];
    }
  for (int o = 0; o < kTileStep; ++o) ASSERT_EQ(hits[static_cast<size_t>(o)], 1) << "offset " << o;
}

TEST(Nvfp4LanesMap, PermutesAMatrix) {
  const int64_t rows = 48, row_bytes = 576 * 2;  // three tiles of 8 pieces a row
  std::vector<int> hits(static_cast<size_t>(rows * row_bytes), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < row_bytes; ++b) {
      const int64_t o = nvfp4_tiled_offset(r, b, row_bytes, true);
      ASSERT_GE(o, (r / 16) * 16 * row_bytes) << "left its tile";
      ASSERT_LT(o, (r / 16 + 1) * 16 * row_bytes) << "left its tile";
      ++hits[static_cast<size_t>(o)];
    }
  for (size_t o = 0; o < hits.size(); ++o) ASSERT_EQ(hits[o], 1) << "offset " << o;
  // Without lanes: the tiled layout as before (a hand-worked case, as in gemv_tiled_test.cpp).
  EXPECT_EQ(nvfp4_tiled_offset(17, 300, 576, false), 16 * 576 + 2 * 2304 + 144 + 12);
}

// A random tiled piece (row q's 144 bytes at 144 q) permuted through the map; then every lane's reads.
TEST(Nvfp4LanesMap, PutsEachLanesBytesWhereItReadsThem) {
  std::mt19937 rng(5);
  std::vector<uint8_t> piece(kTileStep), lanes(kTileStep);
  for (auto& v : piece) v = static_cast<uint8_t>(rng());
  for (int q = 0; q < kTileRows; ++q)
    for (int b = 0; b < kTilePiece; ++b) lanes[static_cast<size_t>(nvfp4_lane_in_piece(q, b))] = piece[q * 144 + b];
  auto word = [](const std::vector<uint8_t>& v, int at) {
    uint32_t w;
    std::memcpy(&w, v.data() + at, 4);
    return w;
  };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, c = lane & 3;
    for (int gh = 0; gh < 2; ++gh)
      for (int r = 0; r < 2; ++r) {
        for (int t = 0; t < 4; ++t) {
          // mma_step_acc: word c of half t & 1 of block 2 gh + (t >> 1)'s codes, row g + 8 r.
          const uint32_t want = word(piece, (g + 8 * r) * 144 + (2 * gh + (t >> 1)) * 36 + 4 + 16 * (t & 1) + 4 * c);
          const int w = 8 * gh + 2 * t + r;  // the lane's word w: vector w / 4, element w % 4
          ASSERT_EQ(word(lanes, 16 * (32 * (w >> 2) + lane) + 4 * (w & 3)), want)
              << "lane " << lane << " gh " << gh << " t " << t << " r " << r;
        }
        // The scale pair: bytes 2 (c & 1), + 1 of block 2 gh + (c >> 1)'s scale word, row g + 8 r.
        const int at = (g + 8 * r) * 144 + 36 * (2 * gh + (c >> 1)) + 2 * (c & 1);
        const int u = 2 * gh + r;
        EXPECT_EQ(lanes[static_cast<size_t>(2048 + 8 * lane + 2 * u)], piece[static_cast<size_t>(at)]);
        EXPECT_EQ(lanes[static_cast<size_t>(2048 + 8 * lane + 2 * u + 1)], piece[static_cast<size_t>(at + 1)]);
      }
  }
}

}  // namespace
}  // namespace ft::cuda
