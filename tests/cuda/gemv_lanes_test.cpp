// The lane-major tiled NVFP4 layout (cuda/nvfp4_tiled.h "Lanes"): the device repack against its host twin, and
// every reader against the same call on the plain tiled bytes, bit for bit (the layout moves bytes, not
// arithmetic): the one-token tensor-core GEMV's lanes instances (clean scales only), the batch tensor-core GEMV
// and the slab kernel at 2..8 tokens (its word-by-word gather), and the cuBLAS GEMM route's dequantiser. The plain tiled calls are held to
// the row-major bytes and the scalar twin by gemv_tiled_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../quant/random_blocks.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/dequant.h"
#include "cuda/device.h"
#include "cuda/gemm.h"
#include "cuda/gemv.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "cuda/glu.h"
#include "cuda/nvfp4_tiled.h"
#include "quant/dequant.h"
#include "tiled_test_util.h"

namespace ft::cuda {
namespace {

struct Pair {
  int64_t rows = 0, k = 0, rb = 0;
  std::vector<uint8_t> w;  // row-major, no UE4M3 NaN codes (the lanes instances are the clean ones)
  DeviceBuffer tiled, lanes;
};

Pair make_pair_of(int64_t rows, int64_t k, std::mt19937& rng) {
  Pair m;
  m.rows = rows, m.k = k, m.rb = row_bytes(GgmlType::NVFP4, k);
  m.w = quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng);
  for (int64_t r = 0; r < rows; ++r)  // scale bytes 0x7F / 0xFF -> 0x7E / 0xFE: clean
    for (int64_t j = 0; j < k / 64; ++j)
      for (int i = 0; i < 4; ++i) {
        uint8_t& s = m.w[static_cast<size_t>(r * m.rb + 36 * j + i)];
        if ((s & 0x7F) == 0x7F) --s;
      }
  m.tiled = to_device(m.w);
  m.lanes = to_device(m.w);
  nvfp4_tile(m.tiled.as<uint8_t>(), rows, m.rb, nullptr);
  nvfp4_tile(m.lanes.as<uint8_t>(), rows, m.rb, nullptr, true);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

using tiled_test::quantised_x;

TEST(CudaNvfp4Lanes, RepackEqualsHostTwin) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(71);
  for (const auto& [rows, k] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 256}, {48, 2048}, {32, 14336}, {4224, 512}}) {
    const Pair m = make_pair_of(rows, k, rng);
    std::vector<uint8_t> want(m.w.size()), plain(m.w.size());
    nvfp4_tile_host(m.w.data(), want.data(), rows, m.rb, true);
    nvfp4_tile_host(m.w.data(), plain.data(), rows, m.rb, false);
    EXPECT_NE(want, plain) << "the lanes layout moved nothing";
    EXPECT_EQ(to_host<uint8_t>(m.lanes, m.w.size()), want) << rows << "x" << k;
  }
}

std::vector<float> run_gemv(const Pair& m, bool lanes, const DeviceBuffer& dxq, int64_t n_tok, const DeviceBuffer& rs,
                            bool use_rs, Round round, bool acc, const std::vector<float>& init) {
  DeviceBuffer dy = to_device(init);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = (lanes ? m.lanes : m.tiled).as<uint8_t>();
  g.row_bytes = m.rb, g.k = m.k, g.rows = m.rows;
  g.xq = dxq.get();
  g.n_tok = n_tok;
  g.y = dy.as<float>();
  g.ldy = m.rows;
  g.row_scale = use_rs ? rs.as<float>() : nullptr;
  g.scale = use_rs ? 0.75f : 1.0f;
  g.round = round;
  g.accumulate = acc;
  g.y_early = acc;
  g.tiled = true;
  g.lanes = lanes;
  g.scales_clean = true;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return to_host<float>(dy, init.size());
}

// One token on the tensor-core kernel's lanes instances (at the tiled call's warps and stages, and forced to
// others), 2..8 tokens on the batch tensor-core kernel (gemv_mma_batch.cu) and, with it off, on the slab kernel:
// the tiled call's bits.
TEST(CudaNvfp4Lanes, GemvEqualsTiledBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(73);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 256}, {96, 2048}, {4224, 4096}, {256, 14336}, {64, 1024}, {32, 20480}, {48, 768}}) {
    const Pair m = make_pair_of(rows, k, rng);
    std::vector<float> rsv(static_cast<size_t>(rows));
    for (auto& v : rsv) v = 0.5f + 0.25f * unit(rng);
    const DeviceBuffer rs = to_device(rsv);
    for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
      const std::vector<uint8_t> xq = quantised_x(k, n_tok, rng);
      const DeviceBuffer dxq = to_device(xq);
      const int variant = static_cast<int>(n_tok + rows) % 4;
      const bool use_rs = variant & 1, acc = variant == 2;
      const Round round = variant == 3 ? Round::kBF16 : Round::kNone;
      std::vector<float> init(static_cast<size_t>(rows * n_tok), std::nanf(""));
      if (acc)
        for (size_t i = 0; i < init.size(); ++i) init[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
      // The plan's warps, then forced ones (one token); the batch kernel on, then off (the slab; 2..8 tokens).
      for (const auto& [fw, fs] : n_tok == 1 ? std::vector<std::pair<int, int>>{{0, 0}, {4, 2}, {8, 3}, {8, 4}}
                                             : std::vector<std::pair<int, int>>{{0, 0}, {0, -1}}) {
        SCOPED_TRACE(testing::Message() << rows << "x" << k << " n_tok " << n_tok << " variant " << variant
                                        << " warps " << fw << " stages " << fs);
        gemv_set_nvfp4_mma(fw, fs < 0 ? 0 : fs);
        gemv_set_nvfp4_mma_batch(fs >= 0);
        const std::vector<float> want = run_gemv(m, false, dxq, n_tok, rs, use_rs, round, acc, init);
        const int64_t l0 = gemv_nvfp4_lanes_launches(), b0 = gemv_nvfp4_mma_batch_launches();
        const std::vector<float> got = run_gemv(m, true, dxq, n_tok, rs, use_rs, round, acc, init);
        gemv_set_nvfp4_mma(0, 0);
        gemv_set_nvfp4_mma_batch(true);
        EXPECT_EQ(gemv_nvfp4_lanes_launches() - l0, n_tok == 1 ? 1 : 0) << "the lanes instance";
        int warps = 0, stages = 0;
        gemv_nvfp4_tiled_mma(rows, k, warps, stages);
        if (n_tok > 1 && fs >= 0 && warps <= 8) {
          EXPECT_EQ(gemv_nvfp4_mma_batch_launches() - b0, 1) << "the batch kernel's lanes instance";
        }
        for (size_t i = 0; i < got.size(); ++i) ASSERT_FALSE(std::isnan(got[i])) << "output " << i << " not written";
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "lanes differ from tiled";
      }
    }
  }
}

// The SwiGLU tail (GemvArgs::glu_xq) on lane-major gate|up weights: the tiled call's outputs, rows and Q8 bytes.
TEST(CudaNvfp4Lanes, SwigluTailEqualsTiled) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(79);
  const int64_t n_ff = 14336, k = 4096;
  const Pair m = make_pair_of(2 * n_ff, k, rng);
  const DeviceBuffer dxq = to_device(quantised_x(k, 1, rng));
  DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(n_ff / 32), 0u));
  auto run = [&](bool lanes) {
    GemvArgs a;
    a.type = GgmlType::NVFP4;
    a.w = (lanes ? m.lanes : m.tiled).as<uint8_t>();
    a.tiled = true, a.lanes = lanes, a.scales_clean = true;
    a.row_bytes = m.rb, a.k = k, a.rows = 2 * n_ff;
    a.xq = dxq.get();
    return tiled_test::run_glu(a, n_ff, true, dcount.as<unsigned>());
  };
  const tiled_test::GluOut r0 = run(false);
  const int64_t l0 = gemv_nvfp4_lanes_launches();
  const tiled_test::GluOut r1 = run(true);
  EXPECT_EQ(gemv_nvfp4_lanes_launches() - l0, 1);
  for (size_t i = 0; i < r1.h.size(); ++i) ASSERT_FALSE(std::isnan(r1.h[i])) << "SwiGLU value " << i << " not written";
  ASSERT_EQ(std::memcmp(r1.y.data(), r0.y.data(), r0.y.size() * sizeof(float)), 0) << "gate|up outputs differ";
  ASSERT_EQ(std::memcmp(r1.h.data(), r0.h.data(), r0.h.size() * sizeof(float)), 0) << "SwiGLU rows differ";
  ASSERT_EQ(r1.q, r0.q) << "Q8 bytes differ";
}

// Unscanned lane-major weights have no tensor-core instance: the call takes the slab kernel (its gather), within
// the scalar twin's fp32 bound.
TEST(CudaNvfp4Lanes, UncleanCallTakesTheSlab) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(83);
  const int64_t rows = 256, k = 4096;
  const Pair m = make_pair_of(rows, k, rng);
  const std::vector<uint8_t> xq = quantised_x(k, 1, rng);
  const DeviceBuffer dxq = to_device(xq);
  DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(rows), std::nanf("")));
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = m.lanes.as<uint8_t>();
  g.row_bytes = m.rb, g.k = k, g.rows = rows;
  g.xq = dxq.get();
  g.n_tok = 1;
  g.y = dy.as<float>();
  g.ldy = rows;
  g.tiled = true, g.lanes = true, g.scales_clean = false;
  const int64_t l0 = gemv_nvfp4_lanes_launches(), m0 = gemv_nvfp4_mma_launches();
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(gemv_nvfp4_lanes_launches() - l0, 0);
  EXPECT_EQ(gemv_nvfp4_mma_launches() - m0, 0);
  const std::vector<float> got = to_host<float>(dy, static_cast<size_t>(rows));
  std::vector<float> ref(static_cast<size_t>(rows), 0.0f);
  gemv_q8_ref(GgmlType::NVFP4, m.w.data(), m.rb, k, rows, xq.data(), 1, ref.data(), rows, nullptr, 1.0f, Round::kNone,
              false);
  std::vector<float> wd(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row_ref(GgmlType::NVFP4, m.w.data() + r * m.rb, wd.data(), k);
    double mag = 0;
    for (int64_t i = 0; i < k; ++i) mag += std::fabs(wd[static_cast<size_t>(i)] * act_q8_value(xq.data(), k, i));
    ASSERT_LE(std::fabs(static_cast<double>(got[static_cast<size_t>(r)]) - ref[static_cast<size_t>(r)]),
              1e-5 * mag + 1e-30)
        << "row " << r;
  }
}

TEST(CudaNvfp4Lanes, GemmEqualsTiledBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(89);
  const int64_t rows = 384, k = 768, n_tok = 40;
  const Pair m = make_pair_of(rows, k, rng);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * k));
  for (auto& v : x) v = unit(rng);
  const DeviceBuffer dx = to_device(x);
  Gemm gemm(k, n_tok, size_t{1} << 20);
  auto run = [&](bool lanes, GemmPrec prec) {
    DeviceBuffer dy(static_cast<size_t>(n_tok * rows) * 4);
    GemmArgs g;
    g.type = GgmlType::NVFP4;
    g.w = (lanes ? m.lanes : m.tiled).as<uint8_t>();
    g.row_bytes = m.rb, g.k = k, g.rows = rows;
    g.x = dx.as<float>(), g.ldx = k, g.n_tok = n_tok;
    g.y = dy.as<float>(), g.ldy = rows;
    g.prec = prec;
    g.tiled = true, g.lanes = lanes;
    gemm.run(g, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    return to_host<float>(dy, static_cast<size_t>(n_tok * rows));
  };
  for (GemmPrec prec : {GemmPrec::kBF16, GemmPrec::kF32}) {
    const std::vector<float> want = run(false, prec), got = run(true, prec);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "prec " << static_cast<int>(prec);
  }
}

// The dequantiser alone, to every output type, the same bytes as from the plain tiled layout: over more pieces than
// its grid holds (so each CTA takes several, through both of its shared-memory buffers), and over a few (9).
TEST(CudaNvfp4Lanes, DequantEqualsTiledBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(97);
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {48, 768}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(k));
    const int64_t ld = k + 64;
    const Pair m = make_pair_of(rows, k, rng);
    for (DequantOut out : {DequantOut::kF32, DequantOut::kBF16, DequantOut::kF16}) {
      const size_t bytes = static_cast<size_t>(rows * ld) * (out == DequantOut::kF32 ? 4 : 2);
      auto run = [&](bool lanes) {
        DeviceBuffer d(bytes);
        FT_CUDA_CHECK(cudaMemset(d.get(), 0xA5, bytes));
        dequant_rows(GgmlType::NVFP4, (lanes ? m.lanes : m.tiled).as<uint8_t>(), m.rb, k, rows, d.get(), ld, out,
                     nullptr, true, lanes);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        return to_host<uint8_t>(d, bytes);
      };
      const std::vector<uint8_t> want = run(false), got = run(true);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "out " << static_cast<int>(out);
    }
  }
}

}  // namespace
}  // namespace ft::cuda
