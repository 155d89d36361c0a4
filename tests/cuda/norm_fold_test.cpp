// The norm fold (cuda/norm_fold.h): its stand-alone launches against their host twins bit for
// bit; the GEMV tails (tiled tensor-core kernel, lean dense kernel) against the launch they save,
// bit for bit; the tensor-core consumer against norm_fold_apply + the plain product, bit for bit
// (with and without the SwiGLU tail); the fold against rmsnorm_q8 (the bytes it replaces: the same
// codes but at fp32 rounding ties, scales within an fp16 step); and the calls it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/norm.h"
#include "cuda/norm_fold.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

std::vector<float> random_row(int64_t n, std::mt19937& rng, float spread = 2.0f) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = unit(rng) * std::exp(spread * unit(rng));
  return v;
}

std::vector<float> norm_weight(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(0.25f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = unit(rng);
  return v;
}

TEST(CudaNormFold, LaunchesEqualHostTwins) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(3);
  for (int64_t n : {32, 256, 4096, 8192}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> y = random_row(n, rng), w = norm_weight(n, rng);
    if (n >= 256) std::fill(y.begin() + 64, y.begin() + 96, 0.0f);  // a zero block: scale 0, codes 0
    const int64_t qb = act_q8_row_bytes(n), nb = n / 32;
    const DeviceBuffer dy = to_device(y), dw = to_device(w);
    DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qb), 0xA5));
    DeviceBuffer dp = to_device(std::vector<double>(static_cast<size_t>(nb), std::nan("")));
    norm_fold_produce(dy.as<float>(), dw.as<float>(), n, dq.get(), dp.as<double>(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> want(static_cast<size_t>(qb), 0);
    std::vector<double> want_p(static_cast<size_t>(nb));
    norm_fold_produce_ref(y.data(), w.data(), n, want.data(), want_p.data());
    std::vector<uint8_t> got = to_host<uint8_t>(dq, static_cast<size_t>(qb));
    const std::vector<double> got_p = to_host<double>(dp, static_cast<size_t>(nb));
    ASSERT_EQ(std::memcmp(got.data(), want.data(), static_cast<size_t>(n + 8 * nb)), 0) << "Q8 bytes";
    ASSERT_EQ(std::memcmp(got_p.data(), want_p.data(), want_p.size() * 8), 0) << "block sums";
    const float eps = 1e-5f;
    norm_fold_apply(dq.get(), n, dp.as<double>(), eps, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    norm_fold_apply_ref(want.data(), n, want_p.data(), eps);
    got = to_host<uint8_t>(dq, static_cast<size_t>(qb));
    ASSERT_EQ(std::memcmp(got.data(), want.data(), static_cast<size_t>(n + 8 * nb)), 0) << "applied scales";
    // The twin's 1 / rms is the norm's: the double sum of the fp32 squares, then fp32.
    double s = 0;
    for (float v : y) s += static_cast<double>(v * v);
    const float mean = static_cast<float>(s / static_cast<double>(n));
    EXPECT_FLOAT_EQ(norm_fold_inv_rms_ref(want_p.data(), n, eps), 1.0f / std::sqrt(mean + eps));
  }
}

// What the fold replaces: rmsnorm_q8's Q8 row of the same y and w. The codes differ only where
// (y * s) * w and y * w round apart at a .5 boundary (by one), the scales by at most one fp16 step.
TEST(CudaNormFold, CloseToRmsnormQ8) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(5);
  const float eps = 1e-6f;
  int64_t codes = 0, code_diff = 0, scales = 0, scale_diff = 0;
  for (int rep = 0; rep < 8; ++rep) {
    const int64_t n = 4096, nb = n / 32, qb = act_q8_row_bytes(n);
    const std::vector<float> y = random_row(n, rng, 3.0f), w = norm_weight(n, rng);
    const DeviceBuffer dy = to_device(y), dw = to_device(w);
    DeviceBuffer dh(static_cast<size_t>(n) * 4), dq_norm(static_cast<size_t>(qb)), dq(static_cast<size_t>(qb));
    DeviceBuffer dp(static_cast<size_t>(nb) * 8);
    rmsnorm_q8(dy.as<float>(), n, dw.as<float>(), n, eps, 1, dh.as<float>(), n, Round::kNone, dq_norm.get(), nullptr);
    norm_fold_produce(dy.as<float>(), dw.as<float>(), n, dq.get(), dp.as<double>(), nullptr);
    norm_fold_apply(dq.get(), n, dp.as<double>(), eps, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> a = to_host<uint8_t>(dq_norm, static_cast<size_t>(qb));
    const std::vector<uint8_t> b = to_host<uint8_t>(dq, static_cast<size_t>(qb));
    for (int64_t i = 0; i < n; ++i) {
      const int d = static_cast<int8_t>(a[static_cast<size_t>(i)]) - static_cast<int8_t>(b[static_cast<size_t>(i)]);
      ASSERT_LE(std::abs(d), 1) << "code " << i;
      code_diff += d != 0, ++codes;
    }
    for (int64_t j = 0; j < nb; ++j) {
      ActQ8Scale sa, sb;
      std::memcpy(&sa, a.data() + n + 8 * j, 8);
      std::memcpy(&sb, b.data() + n + 8 * j, 8);
      ASSERT_LE(std::fabs(sa.d - sb.d), std::ldexp(std::fabs(sa.d), -10)) << "scale " << j;
      scale_diff += sa.d != sb.d, ++scales;
    }
  }
  std::printf("norm fold against rmsnorm_q8: %lld of %lld codes differ (by 1), %lld of %lld scales (one fp16 step)\n",
              static_cast<long long>(code_diff), static_cast<long long>(codes), static_cast<long long>(scale_diff),
              static_cast<long long>(scales));
  EXPECT_LE(code_diff * 1000, codes) << "more than 0.1% of the codes";
  EXPECT_LE(scale_diff * 20, scales) << "more than 5% of the scales";
}

struct Matrix {
  int64_t rows = 0, k = 0, rb = 0;
  bool tiled = false;
  DeviceBuffer w;
};

Matrix make_matrix(int64_t rows, int64_t k, bool tiled, std::mt19937& rng) {
  Matrix m;
  m.rows = rows, m.k = k, m.rb = row_bytes(GgmlType::NVFP4, k), m.tiled = tiled;
  m.w = to_device(quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng));
  if (tiled) nvfp4_tile(m.w.as<uint8_t>(), rows, m.rb, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

// One token of m on the integer path: xq in, y out.
GemvArgs one_token(const Matrix& m, const void* xq, float* y) {
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  a.w = m.w.as<uint8_t>();
  a.tiled = m.tiled;
  a.row_bytes = m.rb, a.k = m.k, a.rows = m.rows;
  a.xq = xq;
  a.n_tok = 1;
  a.y = y, a.ldy = m.rows;
  return a;
}

DeviceBuffer quantised_x(int64_t k, std::mt19937& rng) {
  const std::vector<float> x = random_row(k, rng);
  std::vector<uint8_t> xq(static_cast<size_t>(act_q8_row_bytes(k)));
  quantize_act_q8_row_ref(x.data(), k, xq.data());
  return to_device(xq);
}

// The producer: an accumulating one-token product into a residual row (the down projection,
// tiled, on gemv_mma.cu; wo, row-major, on the lean dense kernel) with nq_*, against the same
// product followed by norm_fold_produce: y, the Q8 row and the block sums bit for bit, the
// counters left at zero (a second call on them), and the tail taken where the kernel has one.
TEST(CudaNormFold, ProducerTailsEqualTheLaunch) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(17);
  // tail: 1 the kernel makes it (gemv_mma.cu, the lean dense kernel), -1 whichever the plan takes.
  for (const auto& [rows, k, tiled, tail] : std::vector<std::tuple<int64_t, int64_t, bool, int>>{
           {4096, 14336, true, 1}, {4096, 4096, false, 1}, {256, 512, true, 1}, {1024, 2048, false, -1}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(k) + (tiled ? " tiled" : " row-major"));
    const Matrix m = make_matrix(rows, k, tiled, rng);
    const DeviceBuffer dxq = quantised_x(k, rng);
    const std::vector<float> y0 = random_row(rows, rng), w = norm_weight(rows, rng);
    const DeviceBuffer dw = to_device(w);
    const int64_t qb = act_q8_row_bytes(rows), nb = rows / 32;
    DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(nb), 0u));
    auto run = [&](bool fused, std::vector<float>& y, std::vector<uint8_t>& q, std::vector<double>& part) {
      DeviceBuffer dy = to_device(y0);
      DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qb), 0xA5));
      DeviceBuffer dp = to_device(std::vector<double>(static_cast<size_t>(nb), std::nan("")));
      GemvArgs a = one_token(m, dxq.get(), dy.as<float>());
      a.accumulate = true;
      a.y_early = true;
      if (fused) {
        a.nq_w = dw.as<float>(), a.nq_xq = dq.get(), a.nq_part = dp.as<double>();
        a.nq_count = dcount.as<unsigned>();
      }
      const int64_t t0 = gemv_norm_fold_tails();
      gemv(a);
      if (fused && tail >= 0) {
        EXPECT_EQ(gemv_norm_fold_tails() - t0, tail) << "the kernel's tail";
      }
      if (!fused) norm_fold_produce(dy.as<float>(), dw.as<float>(), rows, dq.get(), dp.as<double>(), nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      y = to_host<float>(dy, static_cast<size_t>(rows));
      q = to_host<uint8_t>(dq, static_cast<size_t>(qb));
      part = to_host<double>(dp, static_cast<size_t>(nb));
    };
    std::vector<float> ya, yb;
    std::vector<uint8_t> qa, qb2;
    std::vector<double> pa, pb;
    run(false, ya, qa, pa);
    for (int rep = 0; rep < 2; ++rep) {
      run(true, yb, qb2, pb);
      ASSERT_EQ(std::memcmp(yb.data(), ya.data(), ya.size() * 4), 0) << "y";
      ASSERT_EQ(qb2, qa) << "Q8 bytes";
      ASSERT_EQ(std::memcmp(pb.data(), pa.data(), pa.size() * 8), 0) << "block sums";
      const std::vector<unsigned> cnt = to_host<unsigned>(dcount, static_cast<size_t>(nb));
      for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "counter " << i << " left armed";
    }
  }
}

// The consumer: the tiled tensor-core GEMV reading a folded row (norm_part) against
// norm_fold_apply on the row and then the plain product: the same y bit for bit (and the same
// SwiGLU tail), at Llama-8B's qkv and gate|up shapes (4 warps, one-pass build), k 8192 (8 warps)
// and a small one; a row-major call takes the apply launch itself.
TEST(CudaNormFold, ConsumerEqualsApplyThenGemv) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(29);
  const float eps = 1e-5f;
  // warps: the tensor-core kernel forced to 4 warps x 2 stages (0: the plan's) -- at k 8192 its one-pass
  // build declines and the batched build's scales are made afterwards (mma_norm_fix_xd).
  for (const auto& [rows, k, tiled, glu, warps] : std::vector<std::tuple<int64_t, int64_t, bool, bool, int>>{
           {6144, 4096, true, false, 0}, {28672, 4096, true, true, 0}, {4224, 8192, true, false, 0},
           {4224, 8192, true, false, 4}, {384, 256, true, true, 0}, {512, 1024, false, false, 0}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(k) + (glu ? " glu" : "") +
                 (warps ? " " + std::to_string(warps) + " warps" : std::string()));
    gemv_set_nvfp4_mma(warps, warps ? 2 : 0);
    const Matrix m = make_matrix(rows, k, tiled, rng);
    // A folded row: norm_fold_produce of a residual row.
    const std::vector<float> y = random_row(k, rng), w = norm_weight(k, rng);
    const DeviceBuffer dy = to_device(y), dw = to_device(w);
    const int64_t qb = act_q8_row_bytes(k), nb = k / 32;
    DeviceBuffer dq(static_cast<size_t>(qb)), dp(static_cast<size_t>(nb) * 8);
    norm_fold_produce(dy.as<float>(), dw.as<float>(), k, dq.get(), dp.as<double>(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> raw = to_host<uint8_t>(dq, static_cast<size_t>(qb));
    const int64_t n_ff = rows / 2, gqb = act_q8_bytes(n_ff, 1);
    DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(std::max<int64_t>(n_ff / 32, 1)), 0u));
    auto run = [&](bool fused, std::vector<float>& out, std::vector<uint8_t>& gq) {
      DeviceBuffer xq = to_device(raw);
      DeviceBuffer dout = to_device(std::vector<float>(static_cast<size_t>(rows), std::nanf("")));
      DeviceBuffer dh(static_cast<size_t>(std::max<int64_t>(n_ff, 1)) * 4);
      DeviceBuffer dgq = to_device(std::vector<uint8_t>(static_cast<size_t>(gqb), 0));
      if (!fused) norm_fold_apply(xq.get(), k, dp.as<double>(), eps, nullptr);
      GemvArgs a = one_token(m, xq.get(), dout.as<float>());
      if (fused) a.norm_part = dp.as<double>(), a.norm_eps = eps, a.after_gemv = true;
      if (glu) a.glu_xq = dgq.get(), a.glu_h = dh.as<float>(), a.glu_count = dcount.as<unsigned>();
      gemv(a);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      out = to_host<float>(dout, static_cast<size_t>(rows));
      gq = to_host<uint8_t>(dgq, static_cast<size_t>(gqb));
    };
    std::vector<float> ya, yb;
    std::vector<uint8_t> ga, gb;
    run(false, ya, ga);
    run(true, yb, gb);
    gemv_set_nvfp4_mma(0, 0);
    for (size_t i = 0; i < ya.size(); ++i) ASSERT_FALSE(std::isnan(ya[i])) << "row " << i << " not written";
    ASSERT_EQ(std::memcmp(yb.data(), ya.data(), ya.size() * 4), 0) << "products differ";
    if (glu) {
      ASSERT_EQ(gb, ga) << "SwiGLU Q8 rows differ";
    }
  }
}

TEST(CudaNormFold, RefusesCallsItCannotServe) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(31);
  const Matrix m = make_matrix(64, 256, true, rng);
  const DeviceBuffer dxq = quantised_x(256, rng);
  DeviceBuffer dy = to_device(std::vector<float>(64, 0.0f)), dw = to_device(std::vector<float>(64, 1.0f));
  DeviceBuffer dq(static_cast<size_t>(act_q8_bytes(64, 1))), dp(2 * 8), dc = to_device(std::vector<unsigned>(2, 0u));
  GemvArgs g = one_token(m, dxq.get(), dy.as<float>());
  g.accumulate = true;
  g.nq_w = dw.as<float>(), g.nq_xq = dq.get(), g.nq_part = dp.as<double>(), g.nq_count = dc.as<unsigned>();
  GemvArgs bad = g;
  bad.accumulate = false;
  EXPECT_THROW(gemv(bad), Error) << "a producer that does not accumulate";
  bad = g;
  bad.nq_count = nullptr;
  EXPECT_THROW(gemv(bad), Error) << "no counters";
  bad = g;
  bad.round = Round::kBF16;
  EXPECT_THROW(gemv(bad), Error) << "bf16 rounding";
  bad = g;
  bad.n_tok = 2;
  EXPECT_THROW(gemv(bad), Error) << "two tokens";
  GemvArgs c = g;
  c.accumulate = false;
  c.nq_w = nullptr, c.nq_xq = nullptr, c.nq_part = nullptr, c.nq_count = nullptr;
  c.norm_part = dp.as<double>();
  c.xq = nullptr;
  EXPECT_THROW(gemv(c), Error) << "a consumer on the float path";
  EXPECT_THROW(norm_fold_produce(dy.as<float>(), dw.as<float>(), 48, dq.get(), dp.as<double>(), nullptr), Error);
  EXPECT_THROW(norm_fold_apply(dq.get(), 16384, dp.as<double>(), 1e-5f, nullptr), Error);
}

}  // namespace
}  // namespace ft::cuda
