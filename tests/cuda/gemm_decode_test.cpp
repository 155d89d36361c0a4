// Host-side pieces of the CUDA GEMM that need no GPU:
//  - decode8 (src/cuda/gemm_decode.cuh), the weight decoder of the dequant and fused
//    kernels, against quant::dequantize_row_ref on random rows of every type (exactly: the
//    E2M1 rescaling is by powers of two, the others compute d*q - m like the reference);
//  - find_tile (src/cuda/gemm_fused.h), the fused kernel's token-tile lookup, against a
//    brute-force enumeration of every group's tiles, empty groups included.
#include "cuda/gemm_decode.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "cuda/gemm_fused.h"
#include "quant/dequant.h"

namespace ft::cuda::gemm_detail {
namespace {

TEST(CudaGemmDecode, Decode8MatchesDequantizeRowRef) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::MXFP4, GgmlType::NVFP4}) {
    SCOPED_TRACE(std::string(type_name(t)));
    std::mt19937 rng(static_cast<unsigned>(t) + 5);
    const int64_t k = 768;  // 3 K-quant blocks, 12 NVFP4 blocks, 24 units
    std::vector<float> ref(k), got(k);
    for (int rep = 0; rep < 50; ++rep) {
      const auto raw = quant::testing::random_row(t, k, rng);
      std::vector<uint8_t> row(raw.size() + 16);
      uint8_t* p = row.data() + (16 - reinterpret_cast<uintptr_t>(row.data()) % 16) % 16;  // 16-aligned
      std::memcpy(p, raw.data(), raw.size());
      quant::dequantize_row_ref(t, raw.data(), ref.data(), k);
      const bool ok = with_format(t, [&](auto f) {
        using F = decltype(f);
        for (int64_t pc = 0; pc < k / 8; ++pc) decode8<F>(p, pc, got.data() + 8 * pc);
      });
      ASSERT_TRUE(ok);
      for (int64_t e = 0; e < k; ++e) {
        ASSERT_EQ(got[static_cast<size_t>(e)], ref[static_cast<size_t>(e)]) << "element " << e;
      }
    }
  }
}

TEST(CudaGemmDecode, WithFormatRefusesOtherTypes) {
  EXPECT_FALSE(with_format(GgmlType::Q4_0, [](auto) {}));
  EXPECT_FALSE(with_format(GgmlType::IQ3_XXS, [](auto) {}));
}

TEST(CudaGemmDecode, FindTileEnumeratesEveryGroupsTilesInOrder) {
  std::mt19937 rng(7);
  for (int64_t bt : {32, 64}) {
    for (int rep = 0; rep < 50; ++rep) {
      const int64_t n_group = 1 + rng() % 40;
      std::vector<int32_t> offsets(static_cast<size_t>(n_group + 1), 0);
      for (int64_t g = 0; g < n_group; ++g) {
        const int32_t c = rng() % 4 == 0 ? 0 : static_cast<int32_t>(rng() % 150);  // empty groups too
        offsets[static_cast<size_t>(g + 1)] = offsets[static_cast<size_t>(g)] + c;
      }
      // Brute force: tiles in group order, each group's in position order.
      std::vector<std::pair<int64_t, int64_t>> want;
      for (int64_t g = 0; g < n_group; ++g)
        for (int64_t j = offsets[static_cast<size_t>(g)]; j < offsets[static_cast<size_t>(g + 1)]; j += bt)
          want.emplace_back(g, j);
      const int64_t bound = (offsets.back() + bt - 1) / bt + n_group;  // the launch's grid size
      ASSERT_LE(static_cast<int64_t>(want.size()), bound);
      for (int64_t tile = 0; tile < bound + 3; ++tile) {
        int64_t g = -1, first = -1;
        const bool found = find_tile(offsets.data(), n_group, bt, tile, g, first);
        if (tile < static_cast<int64_t>(want.size())) {
          ASSERT_TRUE(found) << "tile " << tile;
          EXPECT_EQ(g, want[static_cast<size_t>(tile)].first) << "tile " << tile;
          EXPECT_EQ(first, want[static_cast<size_t>(tile)].second) << "tile " << tile;
        } else {
          EXPECT_FALSE(found) << "tile " << tile;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ft::cuda::gemm_detail
