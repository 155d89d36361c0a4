// The tiled NVFP4 layout (cuda/nvfp4_tiled.h): the device repack against its host twin and
// the offset formula; every reader of tiled weights against the same kernel on the row-major
// bytes, bit for bit (the tiled layout moves bytes, not arithmetic): the one-token tensor-core
// GEMV (gemv_mma.cu, also when a benchmark forces the bulk-copy kernel, which reads row-major
// weights only), the slab kernel at 2..8 tokens (with the batch tensor-core kernel off), and the cuBLAS GEMM route's dequantiser; and against the
// scalar twin gemv_q8_ref within the fp32 bound of the other GEMV tests. Callers that cannot read
// tiled weights get an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemm.h"
#include "cuda/gemv.h"
#include "cuda/glu.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_tiled.h"
#include "quant/dequant.h"
#include "tiled_test_util.h"

namespace ft::cuda {
namespace {

struct Matrix {
  int64_t rows = 0, k = 0, rb = 0;
  std::vector<uint8_t> w;  // row-major
  DeviceBuffer row_major, tiled;
};

Matrix make_matrix(int64_t rows, int64_t k, std::mt19937& rng) {
  Matrix m;
  m.rows = rows, m.k = k, m.rb = row_bytes(GgmlType::NVFP4, k);
  m.w = quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng);
  m.row_major = to_device(m.w);
  m.tiled = to_device(m.w);
  nvfp4_tile(m.tiled.as<uint8_t>(), rows, m.rb, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

using tiled_test::quantised_x;

TEST(CudaNvfp4Tiled, RepackEqualsHostTwinAndTheFormula) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  // The formula on a hand-worked case: row 17 (tile 1, row 1 of it), byte 300 (piece 2, 12 in).
  EXPECT_EQ(nvfp4_tiled_offset(17, 300, 576), 16 * 576 + 2 * 2304 + 144 + 12);
  std::mt19937 rng(7);
  for (const auto& [rows, k] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 256}, {48, 2048}, {32, 14336}, {4224, 512}}) {
    const Matrix m = make_matrix(rows, k, rng);
    std::vector<uint8_t> want(m.w.size());
    nvfp4_tile_host(m.w.data(), want.data(), rows, m.rb);
    const std::vector<uint8_t> got = to_host<uint8_t>(m.tiled, m.w.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << rows << "x" << k;
    // Every byte moved once: tiling is a permutation, and block j of row r lands where the
    // formula says.
    for (int64_t r = 0; r < rows; r += 7)
      for (int64_t b = 0; b < m.rb; b += 36)
        ASSERT_EQ(std::memcmp(want.data() + nvfp4_tiled_offset(r, b, m.rb),
                              m.w.data() + r * m.rb + b, 36),
                  0);
  }
  EXPECT_FALSE(nvfp4_tile_ok(40, 256, 144)) << "rows not a multiple of 16";
  EXPECT_FALSE(nvfp4_tile_ok(32, 320, 180)) << "k not a multiple of 256";
  EXPECT_FALSE(nvfp4_tile_ok(32, 256, 160)) << "padded rows";
  EXPECT_TRUE(nvfp4_tile_ok(32, 256, 144));
  // The layout has no size limit (its readers stream pieces); only the repack holds a tile in
  // shared memory, on this GPU's terms.
  EXPECT_TRUE(nvfp4_tile_ok(16, 65536, 65536 / 64 * 36)) << "a 576 KB tile";
  EXPECT_FALSE(nvfp4_tile_fits(65536 / 64 * 36)) << "a 576 KB tile in shared memory";
  EXPECT_TRUE(nvfp4_tile_fits(4096 / 64 * 36)) << "a 36 KB tile (k = 4096) in shared memory";
}

// y (poisoned, or a start when accumulating) after one gemv of m at n_tok tokens (after_gemv: GemvArgs's).
std::vector<float> run_gemv(const Matrix& m, bool tiled, const DeviceBuffer& dxq, int64_t n_tok,
                            const DeviceBuffer& rs, bool use_rs, Round round, bool acc,
                            const std::vector<float>& init, bool after_gemv = false) {
  DeviceBuffer dy = to_device(init);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = (tiled ? m.tiled : m.row_major).as<uint8_t>();
  g.row_bytes = m.rb;
  g.k = m.k;
  g.rows = m.rows;
  g.xq = dxq.get();
  g.n_tok = n_tok;
  g.y = dy.as<float>();
  g.ldy = m.rows;
  g.row_scale = use_rs ? rs.as<float>() : nullptr;
  g.scale = use_rs ? 0.75f : 1.0f;
  g.round = round;
  g.accumulate = acc;
  g.y_early = acc;  // y comes from a synchronous copy: safe to read before the PDL wait
  g.tiled = tiled;
  g.after_gemv = after_gemv;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return to_host<float>(dy, init.size());
}

TEST(CudaNvfp4Tiled, GemvEqualsRowMajorBitwiseAndTheTwin) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  // 4224 rows: two CTAs an SM (4 warps x 2 stages); the rest 8 warps (4 where k is short). The
  // tiled launches load the activation row in one pass (mma_build_x_1pass) up to k = 4096 at 4
  // warps and 16384 at 8, in batches beyond (8192, 20480), as every row-major launch at 4 warps:
  // the bitwise comparison below holds the one-pass build to the batched one.
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 256},
                                                                        {96, 2048},
                                                                        {4224, 4096},
                                                                        {256, 14336},
                                                                        {64, 1024},
                                                                        {32, 16384},
                                                                        {32, 20480},
                                                                        {4224, 8192},
                                                                        {48, 1024}}) {
    const Matrix m = make_matrix(rows, k, rng);
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
      SCOPED_TRACE(testing::Message()
                   << rows << "x" << k << " n_tok " << n_tok << " variant " << variant);
      // The row-major reference on the kernel the tiled call takes: one token, gemv_mma.cu at
      // gemv_nvfp4_tiled_mma's warps and stages; else the slab (the batch tensor-core kernel, which reads
      // tiled weights only, off here: gemv_batch_test.cpp holds it to the one-token launches).
      int warps = 0, stages = 0;
      gemv_nvfp4_tiled_mma(rows, k, warps, stages);
      if (n_tok == 1) {
        gemv_set_nvfp4_override(3, 0, 0);
        gemv_set_nvfp4_mma(warps, stages);
      }
      const int64_t mma0 = gemv_nvfp4_mma_launches();
      const std::vector<float> want = run_gemv(m, false, dxq, n_tok, rs, use_rs, round, acc, init);
      gemv_set_nvfp4_override(-1, 0, 0);
      gemv_set_nvfp4_mma(0, 0);
      const int64_t mma1 = gemv_nvfp4_mma_launches();
      gemv_set_nvfp4_mma_batch(false);
      const std::vector<float> got = run_gemv(m, true, dxq, n_tok, rs, use_rs, round, acc, init);
      gemv_set_nvfp4_mma_batch(true);
      const int64_t ran =
          n_tok == 1 ? 1 : 0;  // both calls ran the tensor-core kernel at one token, else the slab
      EXPECT_EQ(mma1 - mma0, ran);
      EXPECT_EQ(gemv_nvfp4_mma_launches() - mma1, ran);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "tiled differs from row-major";
      // The twin, within the fp32 reassociation bound.
      std::vector<float> ref = init;
      gemv_q8_ref(GgmlType::NVFP4, m.w.data(), m.rb, k, rows, xq.data(), n_tok, ref.data(), rows,
                  use_rs ? rsv.data() : nullptr, use_rs ? 0.75f : 1.0f, round, acc);
      std::vector<float> wd(static_cast<size_t>(k));
      for (int64_t r = 0; r < rows; r += 5) {
        quant::dequantize_row_ref(GgmlType::NVFP4, m.w.data() + r * m.rb, wd.data(), k);
        for (int64_t t = 0; t < n_tok; ++t) {
          const float g = got[static_cast<size_t>(t * rows + r)],
                      w = ref[static_cast<size_t>(t * rows + r)];
          double mag = 0;
          const uint8_t* xt = xq.data() + t * act_q8_row_bytes(k);
          for (int64_t i = 0; i < k; ++i)
            mag += std::fabs(wd[static_cast<size_t>(i)] * act_q8_value(xt, k, i));
          const double s = use_rs ? 0.75 * rsv[static_cast<size_t>(r)] : 1.0;
          const double ulp = round == Round::kBF16 ? 1.0 / 128 : 0.0;
          ASSERT_LE(
              std::fabs(static_cast<double>(g) - w),
              1e-5 * mag * s + ulp * std::fabs(w) + (acc ? 2.4e-7 * std::fabs(w) : 0.0) + 1e-30)
              << "row " << r << " token " << t;
        }
      }
    }
  }
}

// The bulk-copy tensor-core GEMV (gemv_mma_tma.cu) reads row-major weights only: forced on every
// one-token shape (FT_GEMV_NVFP4_TMA=2 / gemv_set_nvfp4_tma, benchmarks), a tiled call still takes
// gemv_mma.cu, with the bits of gemv_mma.cu on the row-major bytes.
// A one-token launch released under a large GEMV (GemvArgs::after_gemv) runs at gemv_nvfp4_tiled_launch's
// shared-memory floor and stages (Llama-8B's qkv: 4 warps at 3 stages, not 2) -- the same warps, so the same
// steps a warp in the same order: the same bits as the plain launch. Each case's two launches differ (a case
// where they did not would test nothing).
TEST(CudaNvfp4Tiled, AfterGemvLaunchEqualsThePlainOne) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(47);
  int tested = 0;
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{6144, 4096}, {1024, 2048}, {4224, 4096}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(k));
    if ((rows + 15) / 16 > 4 * int64_t{sm_count()}) continue;  // over one wave on this GPU: no floor to test
    ++tested;
    const TiledLaunch plain_l = gemv_nvfp4_tiled_launch(rows, k, false, sm_count()),
                      after_l = gemv_nvfp4_tiled_launch(rows, k, true, sm_count());
    EXPECT_EQ(after_l.warps, plain_l.warps);
    EXPECT_EQ(plain_l.smem, 0);
    EXPECT_EQ(after_l.smem, kNvfp4AfterGemvSmem);
    EXPECT_EQ(after_l.stages, kNvfp4AfterGemvStages);
    EXPECT_NE(after_l.stages, plain_l.stages) << "the after-GEMV launch would test the floor alone";
    const Matrix m = make_matrix(rows, k, rng);
    const DeviceBuffer dxq = to_device(quantised_x(k, 1, rng));
    const std::vector<float> rsv(static_cast<size_t>(rows), 1.25f);
    const DeviceBuffer rs = to_device(rsv);
    const std::vector<float> init(static_cast<size_t>(rows), std::nanf(""));
    auto run = [&](bool after) {
      const int64_t mma0 = gemv_nvfp4_mma_launches();
      std::vector<float> y = run_gemv(m, true, dxq, 1, rs, true, Round::kNone, false, init, after);
      EXPECT_EQ(gemv_nvfp4_mma_launches() - mma0, 1) << "not the tensor-core kernel";
      return y;
    };
    const std::vector<float> plain = run(false), after = run(true);
    for (size_t i = 0; i < plain.size(); ++i) ASSERT_FALSE(std::isnan(plain[i])) << "row " << i << " not written";
    ASSERT_EQ(std::memcmp(after.data(), plain.data(), plain.size() * sizeof(float)), 0) << "after-GEMV launch differs";
  }
  EXPECT_GT(tested, 0) << "no case fits one wave on this GPU: nothing was compared";
}

TEST(CudaNvfp4Tiled, ForcedBulkCopyKernelLeavesTiledCallsToTheMmaKernel) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(23);
  const DeviceBuffer rs = to_device(std::vector<float>(4224, 1.0f));
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{96, 2048}, {4224, 4096}, {64, 1024}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << k);
    const Matrix m = make_matrix(rows, k, rng);
    const DeviceBuffer dxq = to_device(quantised_x(k, 1, rng));
    const std::vector<float> init(static_cast<size_t>(rows), std::nanf(""));
    int warps = 0, stages = 0;
    gemv_nvfp4_tiled_mma(rows, k, warps, stages);
    gemv_set_nvfp4_override(3, 0, 0);
    gemv_set_nvfp4_mma(warps, stages);
    const std::vector<float> want = run_gemv(m, false, dxq, 1, rs, false, Round::kNone, false, init);
    gemv_set_nvfp4_override(-1, 0, 0);
    gemv_set_nvfp4_mma(0, 0);
    gemv_set_nvfp4_tma(2, 4, 0, 0);
    const int64_t t0 = gemv_nvfp4_tma_launches(), m0 = gemv_nvfp4_mma_launches();
    const std::vector<float> got = run_gemv(m, true, dxq, 1, rs, false, Round::kNone, false, init);
    gemv_set_nvfp4_tma(0, 0, 0, 0);
    EXPECT_EQ(gemv_nvfp4_tma_launches() - t0, 0) << "the bulk-copy kernel took tiled weights";
    EXPECT_EQ(gemv_nvfp4_mma_launches() - m0, 1);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
}

TEST(CudaNvfp4Tiled, GemmEqualsRowMajorBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(13);
  const int64_t rows = 384, k = 512, n_tok = 40;
  const Matrix m = make_matrix(rows, k, rng);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * k));
  for (auto& v : x) v = unit(rng);
  const DeviceBuffer dx = to_device(x);
  // A workspace of ~200 rows at a time: chunks of whole tiles (128 rows), the last one short.
  Gemm gemm(k, n_tok, size_t{1} << 20);
  auto run = [&](bool tiled, GemmPrec prec) {
    DeviceBuffer dy(static_cast<size_t>(n_tok * rows) * 4);
    GemmArgs g;
    g.type = GgmlType::NVFP4;
    g.w = (tiled ? m.tiled : m.row_major).as<uint8_t>();
    g.row_bytes = m.rb, g.k = k, g.rows = rows;
    g.x = dx.as<float>(), g.ldx = k, g.n_tok = n_tok;
    g.y = dy.as<float>(), g.ldy = rows;
    g.prec = prec;
    g.tiled = tiled;
    gemm.run(g, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    return to_host<float>(dy, static_cast<size_t>(n_tok * rows));
  };
  std::vector<float> cublas_bf16;
  for (GemmPrec prec : {GemmPrec::kBF16, GemmPrec::kF32}) {
    const std::vector<float> want = run(false, prec), got = run(true, prec);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "prec " << static_cast<int>(prec);
    if (prec == GemmPrec::kBF16) cublas_bf16 = want;
  }
  // The fused route reads row-major weights only: a tiled call forced onto it still takes cuBLAS
  // (its bits; on the tiled bytes the fused kernel would read the wrong blocks).
  // Which route ran is told by the fused kernel's launch count (at this shape its bits can equal
  // cuBLAS's: H200 session 20), which the row-major call shows can move.
  gemm.set_route(GemmRoute::kFused);
  const int64_t f0 = gemm_fused_launches();
  const std::vector<float> forced = run(true, GemmPrec::kBF16);
  EXPECT_EQ(gemm_fused_launches() - f0, 0) << "the fused kernel took tiled weights";
  EXPECT_EQ(std::memcmp(forced.data(), cublas_bf16.data(), forced.size() * sizeof(float)), 0);
  run(false, GemmPrec::kBF16);
  EXPECT_EQ(gemm_fused_launches() - f0, 1) << "the forced fused route did not run the fused kernel";
}

// GemvArgs::glu_xq on a dense tiled gate|up (one token): the tensor-core kernel's SwiGLU tail
// writes the product, and the SwiGLU rows and Q8 bytes swiglu_q8 makes of it, bit for bit, and
// leaves its counters at zero (checked by a second call on them); at Llama-8B's shape and a small
// one, with and without bf16 rounding and a row scale, its CTAs in SwiGLU block order (the default) and in
// row order (gemv_set_glu_order).
TEST(CudaNvfp4Tiled, SwigluTailEqualsItsLaunch) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2406);
  for (const auto& [n_ff, k, bf16] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {14336, 4096, false}, {14336, 4096, true}, {96, 512, false}}) {
    SCOPED_TRACE("n_ff " + std::to_string(n_ff) + " k " + std::to_string(k) + (bf16 ? " bf16" : ""));
    const Matrix m = make_matrix(2 * n_ff, k, rng);
    const DeviceBuffer dxq = to_device(quantised_x(k, 1, rng));
    std::uniform_real_distribution<float> unit(0.5f, 1.5f);
    std::vector<float> rs(static_cast<size_t>(2 * n_ff));
    for (auto& v : rs) v = unit(rng);
    const DeviceBuffer drs = to_device(rs);
    DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(n_ff / 32), 0u));
    GemvArgs a;
    a.type = GgmlType::NVFP4;
    a.w = m.tiled.as<uint8_t>();
    a.tiled = true;
    a.row_bytes = m.rb;
    a.k = k;
    a.rows = 2 * n_ff;
    a.xq = dxq.get();
    a.row_scale = drs.as<float>();
    a.round = bf16 ? Round::kBF16 : Round::kNone;
    const tiled_test::GluOut r0 = tiled_test::run_glu(a, n_ff, false, nullptr);
    for (int rep = 0; rep < 4; ++rep) {
      gemv_set_glu_order(rep < 2 ? 1 : 0);
      const int64_t go0 = gemv_glu_order_launches();
      const tiled_test::GluOut r1 = tiled_test::run_glu(a, n_ff, true, dcount.as<unsigned>());
      gemv_set_glu_order(-1);
      EXPECT_EQ(gemv_glu_order_launches() - go0, rep < 2 ? 1 : 0) << "the block-order instance (rep " << rep << ")";
      ASSERT_EQ(std::memcmp(r1.y.data(), r0.y.data(), r0.y.size() * sizeof(float)), 0) << "gate|up outputs differ";
      for (size_t i = 0; i < r1.h.size(); ++i) ASSERT_FALSE(std::isnan(r1.h[i])) << "SwiGLU value " << i << " not written";
      ASSERT_EQ(std::memcmp(r1.h.data(), r0.h.data(), r0.h.size() * sizeof(float)), 0) << "SwiGLU rows differ";
      ASSERT_EQ(r1.q, r0.q) << "Q8 bytes differ";
      const std::vector<unsigned> cnt = to_host<unsigned>(dcount, static_cast<size_t>(n_ff / 32));
      for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "counter " << i << " left armed";
    }
  }
  // Calls the tail cannot serve are refused before anything launches.
  const Matrix m = make_matrix(192, 512, rng);
  const DeviceBuffer dxq = to_device(quantised_x(512, 1, rng));
  DeviceBuffer dy = to_device(std::vector<float>(192 * 2, 0.0f)), dh = to_device(std::vector<float>(96, 0.0f));
  DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(act_q8_bytes(96, 1)), 0));
  DeviceBuffer dcount = to_device(std::vector<unsigned>(3, 0u));
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = m.tiled.as<uint8_t>();
  g.tiled = true;
  g.row_bytes = m.rb;
  g.k = 512;
  g.rows = 192;
  g.xq = dxq.get();
  g.n_tok = 1;
  g.y = dy.as<float>();
  g.ldy = 192;
  g.glu_xq = dq.get();
  g.glu_h = dh.as<float>();
  g.glu_count = dcount.as<unsigned>();
  GemvArgs bad = g;
  bad.accumulate = true;
  EXPECT_THROW(gemv(bad), Error) << "accumulate";
  bad = g;
  bad.n_tok = 2;
  EXPECT_THROW(gemv(bad), Error) << "two tokens";
  bad = g;
  bad.glu_count = nullptr;
  EXPECT_THROW(gemv(bad), Error) << "no counters";
}

TEST(CudaNvfp4Tiled, RefusesCallersThatCannotReadIt) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(17);
  const Matrix m = make_matrix(32, 256, rng);
  std::vector<float> x(256, 0.5f);
  const DeviceBuffer dx = to_device(x), dy(32 * 4);
  GemvArgs g;
  g.type = GgmlType::NVFP4, g.w = m.tiled.as<uint8_t>(), g.row_bytes = m.rb, g.k = 256, g.rows = 32;
  g.x = dx.as<float>(), g.ldx = 256, g.y = const_cast<float*>(dy.as<float>()), g.ldy = 32,
  g.tiled = true;
  EXPECT_THROW(gemv(g), Error) << "the float path";
  g.rows = 24;  // not whole tiles
  const std::vector<uint8_t> xq = quantised_x(256, 1, rng);
  const DeviceBuffer dxq = to_device(xq);
  g.xq = dxq.get();
  EXPECT_THROW(gemv(g), Error) << "rows not a multiple of 16";
  EXPECT_THROW(nvfp4_tile(m.tiled.as<uint8_t>(), 24, m.rb, nullptr), Error);
}

}  // namespace
}  // namespace ft::cuda
