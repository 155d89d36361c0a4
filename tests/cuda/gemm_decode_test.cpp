// Host-side pieces of the CUDA GEMM that need no GPU:
//  - decode8 (src/cuda/gemm_decode.cuh), the weight decoder of the dequant and fused
//    kernels, against quant::dequantize_row_ref on random rows of every type (exactly: the
//    E2M1 rescaling is by powers of two, the others compute d*q - m like the reference);
//  - the NVFP4 pair layout of the fused kernel (src/cuda/gemm_fp4.cuh), weights and X;
//  - find_tile (src/cuda/gemm_fused.h), the fused kernel's token-tile lookup, against a
//    brute-force enumeration of every group's tiles, empty groups included.
#include "cuda/gemm_decode.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "cuda/gemm_fp4.cuh"
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

// The NVFP4 pair layout: column c of a k step holds element fp4_pair_elem(c), for the
// weights (table lookup + paired scale multiply, exact in bf16 and f16) and for X.
template <class T>
void check_fp4_pairs(std::mt19937& rng) {
  uint32_t table[256];
  for (uint32_t v = 0; v < 256; ++v) table[v] = e2m1_pair<T>(v);
  auto unpack = [](uint32_t pair, int h) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const uint32_t bits = h ? (pair & 0xFFFF0000u) : (pair << 16);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    } else {
      return half_bits_to_float(static_cast<unsigned short>(h ? pair >> 16 : pair & 0xFFFF));
    }
  };
  const int64_t k = 320;  // 5 blocks, 10 k steps
  std::vector<float> ref(k);
  for (int rep = 0; rep < 200; ++rep) {
    const auto raw = quant::testing::random_row(GgmlType::NVFP4, k, rng);
    std::vector<uint8_t> row(raw.size() + 16);
    uint8_t* p = row.data() + (16 - reinterpret_cast<uintptr_t>(row.data()) % 16) % 16;
    std::memcpy(p, raw.data(), raw.size());
    quant::dequantize_row_ref(GgmlType::NVFP4, raw.data(), ref.data(), k);
    for (int64_t kt = 0; kt < k / 32; ++kt)
      for (int wp = 0; wp < 4; ++wp) {
        uint32_t out[4];
        nvfp4_pairs<T>(p, kt, wp, table, out);
        for (int m = 0; m < 8; ++m) {
          const int c = 8 * wp + m;
          ASSERT_EQ(unpack(out[m / 2], m % 2), ref[static_cast<size_t>(32 * kt + fp4_pair_elem(c))])
              << "step " << kt << " column " << c;
        }
      }
  }
  // X: pair layout of 32 floats, exactly T-rounded.
  alignas(16) float x[32];
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  for (int xq = 0; xq < 4; ++xq) {
    uint32_t out[4];
    x_pairs<T>(x, xq, out);
    for (int m = 0; m < 8; ++m) {
      const int c = 16 * (xq >> 1) + 8 * (xq & 1) + m;
      const float want = x[fp4_pair_elem(c)];
      EXPECT_EQ(unpack(out[m / 2], m % 2), unpack(pack2_t<T>(want, want), 0)) << "column " << c;
    }
  }
}

TEST(CudaGemmDecode, Nvfp4PairLayoutMatchesDequantizeRowRef) {
  // Every element of a step appears in exactly one column.
  std::vector<int> seen(32, 0);
  for (int c = 0; c < 32; ++c) ++seen[static_cast<size_t>(fp4_pair_elem(c))];
  for (int e = 0; e < 32; ++e) ASSERT_EQ(seen[static_cast<size_t>(e)], 1) << "element " << e;
  std::mt19937 rng(40);
  check_fp4_pairs<__nv_bfloat16>(rng);
  check_fp4_pairs<__half>(rng);
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
