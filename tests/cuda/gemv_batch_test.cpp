// The tensor-core GEMV of 2..8 tokens on tiled NVFP4 weights (gemv_mma_batch.cu): every token's rows bit for bit
// those of the one-token launch on that token alone (gemv_mma.cu, the same warps), over the one-token plan's 4-
// and 8-warp shapes, token counts on both sides of 4 (one and two mma column groups), row scales, rounding,
// accumulation, both scale decoders and every stage count; with FT_GEMV_NVFP4_MMA_BATCH off the slab kernel takes
// the call (and its sums differ: a comparison that can fail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "../quant/random_blocks.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_tiled.h"
#include "tiled_test_util.h"

namespace ft::cuda {
namespace {

struct Case {
  const uint8_t* w;
  int64_t rows, k, rb;
  const float* rs;
  bool clean;
  Round round;
  bool acc;
};

// y after one gemv of n_tok rows of xq (device) at xq_off bytes in, starting from init.
std::vector<float> run(const Case& c, const DeviceBuffer& dxq, int64_t xq_off, int64_t n_tok,
                       const std::vector<float>& init) {
  DeviceBuffer dy = to_device(init);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = c.w;
  g.row_bytes = c.rb;
  g.k = c.k;
  g.rows = c.rows;
  g.xq = static_cast<const uint8_t*>(dxq.get()) + xq_off;
  g.n_tok = n_tok;
  g.y = dy.as<float>();
  g.ldy = c.rows;
  g.row_scale = c.rs;
  g.scale = c.rs != nullptr ? 0.75f : 1.0f;
  g.round = c.round;
  g.accumulate = c.acc;
  g.tiled = true;
  g.scales_clean = c.clean;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return to_host<float>(dy, init.size());
}

TEST(CudaGemvBatch, EveryTokenEqualsItsOneTokenLaunchBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(53);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::set<int> warps_seen;
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{
           {4224, 4096}, {256, 14336}, {96, 2048}, {48, 1024}, {16, 256}, {32, 16384}, {32768, 512}}) {
    int warps = 0, stages = 0;
    gemv_nvfp4_tiled_mma(rows, k, warps, stages);
    ASSERT_TRUE(warps == 4 || warps == 8) << rows << "x" << k << ": the batch kernel takes 4 or 8 warps";
    warps_seen.insert(warps);
    const int64_t rb = row_bytes(GgmlType::NVFP4, k);
    const std::vector<uint8_t> w = quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng);
    DeviceBuffer dw = to_device(w);
    nvfp4_tile(dw.as<uint8_t>(), rows, rb, nullptr);
    std::vector<float> rsv(static_cast<size_t>(rows));
    for (auto& v : rsv) v = 0.5f + 0.25f * unit(rng);
    const DeviceBuffer rs = to_device(rsv);
    for (int64_t n_tok = 2; n_tok <= kGemvMaxTokens; ++n_tok) {
      const std::vector<uint8_t> xq = tiled_test::quantised_x(k, n_tok, rng);
      const DeviceBuffer dxq = to_device(xq);
      const int variant = static_cast<int>(n_tok + rows) % 4;
      const Case c{dw.as<uint8_t>(), rows, k, rb, (variant & 1) ? rs.as<float>() : nullptr, n_tok % 3 == 0,
                   variant == 3 ? Round::kBF16 : Round::kNone, variant == 2};
      std::vector<float> init(static_cast<size_t>(rows * n_tok), std::nanf(""));
      if (c.acc)
        for (size_t i = 0; i < init.size(); ++i) init[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
      SCOPED_TRACE(testing::Message() << rows << "x" << k << " n_tok " << n_tok << " variant " << variant
                                      << " clean " << c.clean);
      const int64_t b0 = gemv_nvfp4_mma_batch_launches();
      const std::vector<float> got = run(c, dxq, 0, n_tok, init);
      ASSERT_EQ(gemv_nvfp4_mma_batch_launches() - b0, 1) << "the batch kernel took the call";
      for (int64_t t = 0; t < n_tok; ++t) {
        const std::vector<float> init_t(init.begin() + t * rows, init.begin() + (t + 1) * rows);
        const int64_t m0 = gemv_nvfp4_mma_launches();
        const std::vector<float> one = run(c, dxq, t * act_q8_row_bytes(k), 1, init_t);
        ASSERT_EQ(gemv_nvfp4_mma_launches() - m0, 1) << "the one-token tensor-core kernel took token " << t;
        ASSERT_EQ(std::memcmp(got.data() + t * rows, one.data(), sizeof(float) * rows), 0)
            << "token " << t << " differs from its one-token launch";
      }
      // The stages and the grid move no sum: forced to each, the same bits. (32768 x 512: 2,048 tiles, more than
      // the CTAs resident on any GPU at these sizes, so one wave walks several a CTA.)
      if (n_tok == 5 || n_tok == 8) {
        for (int st : {2, 3, 4}) {
          gemv_set_nvfp4_mma_batch(true, st);
          const std::vector<float> again = run(c, dxq, 0, n_tok, init);
          gemv_set_nvfp4_mma_batch(true);
          ASSERT_EQ(std::memcmp(again.data(), got.data(), sizeof(float) * got.size()), 0) << "at " << st << " stages";
        }
        gemv_set_nvfp4_batch_wave(false);
        const std::vector<float> per_tile = run(c, dxq, 0, n_tok, init);
        gemv_set_nvfp4_batch_wave(true);
        ASSERT_EQ(std::memcmp(per_tile.data(), got.data(), sizeof(float) * got.size()), 0) << "a CTA a tile";
      }
      // Off: the slab kernel, whose fp32 order differs -- the comparison above can fail.
      if (n_tok == 4 && rows >= 256) {
        gemv_set_nvfp4_mma_batch(false);
        const int64_t b1 = gemv_nvfp4_mma_batch_launches();
        const std::vector<float> slab = run(c, dxq, 0, n_tok, init);
        gemv_set_nvfp4_mma_batch(true);
        EXPECT_EQ(gemv_nvfp4_mma_batch_launches(), b1);
        EXPECT_NE(std::memcmp(slab.data(), got.data(), sizeof(float) * slab.size()), 0);
      }
    }
  }
  EXPECT_EQ(warps_seen, (std::set<int>{4, 8}));
}

}  // namespace
}  // namespace ft::cuda
