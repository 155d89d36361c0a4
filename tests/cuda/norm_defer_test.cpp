// The deferred decode RMSNorm (cuda/norm_defer.h): the stand-alone pieces against a host twin
// (Q8 bytes exactly, block sums within double rounding); the tensor-core GEMV's producer tail
// and consumer scale against the plain product followed by the stand-alone kernels, bit for
// bit, counters left at zero; the whole deferred chain against rmsnorm_q8 + GEMV within fp32
// rounding; calls it cannot serve refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/norm.h"
#include "cuda/norm_defer.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

struct Tiled {
  int64_t rb = 0;
  DeviceBuffer w;
};

Tiled tiled_matrix(int64_t rows, int64_t k, std::mt19937& rng) {
  Tiled m;
  m.rb = row_bytes(GgmlType::NVFP4, k);
  m.w = to_device(quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng));
  nvfp4_tile(m.w.as<uint8_t>(), rows, m.rb, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

std::vector<float> random_row(int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = u(rng) * std::exp(u(rng));
  return v;
}

GemvArgs tiled_args(const Tiled& m, int64_t rows, int64_t k, const void* xq, float* y) {
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  a.w = m.w.as<uint8_t>();
  a.tiled = true;
  a.row_bytes = m.rb;
  a.k = k;
  a.rows = rows;
  a.xq = xq;
  a.n_tok = 1;
  a.y = y;
  a.ldy = rows;
  return a;
}

TEST(CudaNormDefer, PiecesEqualHostTwin) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(25);
  for (int64_t n : {32, 2048, 4096, 8192}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<float> x = random_row(n, rng), w = random_row(n, rng, 0.2f, 1.2f);
    const DeviceBuffer dx = to_device(x), dw = to_device(w);
    DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(act_q8_bytes(n, 1)), 0xA5));
    DeviceBuffer dss = to_device(std::vector<double>(static_cast<size_t>(n / 32), -1.0));
    norm_defer_pieces(dx.as<float>(), dw.as<float>(), n, dq.get(), dss.as<double>(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> xw(static_cast<size_t>(n));
    for (size_t i = 0; i < xw.size(); ++i) xw[i] = x[i] * w[i];
    std::vector<uint8_t> q(static_cast<size_t>(act_q8_bytes(n, 1)));
    quantize_act_q8_row_ref(xw.data(), n, q.data());
    EXPECT_EQ(to_host<uint8_t>(dq, q.size()), q) << "Q8 bytes of x * w";
    const std::vector<double> ss = to_host<double>(dss, static_cast<size_t>(n / 32));
    for (int64_t b = 0; b < n / 32; ++b) {
      double s = 0.0;
      for (int64_t i = 32 * b; i < 32 * b + 32; ++i) s += static_cast<double>(x[i] * x[i]);
      EXPECT_NEAR(ss[b], s, 1e-13 * s) << "block " << b;
    }
  }
}

// Producer: the down projection's tail (accumulate into a residual row) writes the same y, Q8
// bytes and block sums as the plain product + norm_defer_pieces; twice, counters re-armed.
TEST(CudaNormDefer, GemvTailEqualsItsLaunch) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2501);
  for (const auto& [rows, k] : std::vector<std::tuple<int64_t, int64_t>>{{4096, 14336}, {2048, 768}, {64, 512}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k));
    const Tiled m = tiled_matrix(rows, k, rng);
    std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(k, 1)));
    const std::vector<float> xk = random_row(k, rng);
    quantize_act_q8_row_ref(xk.data(), k, xq.data());
    const DeviceBuffer dxq = to_device(xq);
    const std::vector<float> resid = random_row(rows, rng, -4.0f, 4.0f), w = random_row(rows, rng, 0.2f, 1.2f);
    const DeviceBuffer dw = to_device(w);
    std::vector<float> rs = random_row(rows, rng, 0.5f, 1.5f);
    const DeviceBuffer drs = to_device(rs);
    DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(rows / 32), 0u));
    const size_t qbytes = static_cast<size_t>(act_q8_bytes(rows, 1));
    auto run = [&](bool fused, std::vector<float>& y, std::vector<uint8_t>& q, std::vector<double>& ss) {
      DeviceBuffer dy = to_device(resid);
      DeviceBuffer dq = to_device(std::vector<uint8_t>(qbytes, 0xA5));
      DeviceBuffer dss = to_device(std::vector<double>(static_cast<size_t>(rows / 32), -1.0));
      GemvArgs a = tiled_args(m, rows, k, dxq.get(), dy.as<float>());
      a.row_scale = drs.as<float>();
      a.scale = 0.75f;
      a.accumulate = true;
      a.y_early = true;
      if (fused) a.nd_w = dw.as<float>(), a.nd_xq = dq.get(), a.nd_ss = dss.as<double>(), a.nd_count = dcount.as<unsigned>();
      gemv(a);
      if (!fused) norm_defer_pieces(dy.as<float>(), dw.as<float>(), rows, dq.get(), dss.as<double>(), nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      y = to_host<float>(dy, static_cast<size_t>(rows));
      q = to_host<uint8_t>(dq, qbytes);
      ss = to_host<double>(dss, static_cast<size_t>(rows / 32));
    };
    std::vector<float> y0, y1;
    std::vector<uint8_t> q0, q1;
    std::vector<double> s0, s1;
    run(false, y0, q0, s0);
    for (int rep = 0; rep < 2; ++rep) {
      run(true, y1, q1, s1);
      ASSERT_EQ(std::memcmp(y1.data(), y0.data(), y0.size() * sizeof(float)), 0) << "outputs differ";
      ASSERT_EQ(q1, q0) << "Q8 bytes differ";
      ASSERT_EQ(std::memcmp(s1.data(), s0.data(), s0.size() * sizeof(double)), 0) << "block sums differ";
      const std::vector<unsigned> cnt = to_host<unsigned>(dcount, static_cast<size_t>(rows / 32));
      for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "counter " << i << " left armed";
    }
  }
}

// Consumer: the qkv GEMV's scale in its epilogue equals the plain product + norm_defer_scale, bit
// for bit; past kNormDeferMaxN the call takes that pair itself.
TEST(CudaNormDefer, GemvScaleEqualsItsLaunch) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2502);
  for (const auto& [rows, k] : std::vector<std::tuple<int64_t, int64_t>>{
           {6144, 4096}, {5120, 2048}, {32, 512}, {64, kNormDeferMaxN * 2}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k));
    const Tiled m = tiled_matrix(rows, k, rng);
    std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(k, 1)));
    const std::vector<float> xk = random_row(k, rng);
    quantize_act_q8_row_ref(xk.data(), k, xq.data());
    const DeviceBuffer dxq = to_device(xq);
    std::vector<double> ss(static_cast<size_t>(k / 32));
    for (auto& v : ss) v = std::ldexp(static_cast<double>(rng() % 100000 + 1), -10);
    const DeviceBuffer dss = to_device(ss);
    auto run = [&](bool fused) {
      DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(rows), std::nanf("")));
      GemvArgs a = tiled_args(m, rows, k, dxq.get(), dy.as<float>());
      a.scale = 1.25f;
      if (fused) a.nd_in_ss = dss.as<double>(), a.nd_eps = 1e-5f;
      gemv(a);
      if (!fused) norm_defer_scale(dy.as<float>(), rows, dss.as<double>(), k, 1e-5f, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      return to_host<float>(dy, static_cast<size_t>(rows));
    };
    const std::vector<float> y0 = run(false), y1 = run(true);
    for (float v : y1) ASSERT_FALSE(std::isnan(v));
    ASSERT_EQ(std::memcmp(y1.data(), y0.data(), y0.size() * sizeof(float)), 0) << "outputs differ";
  }
}

// The whole deferral against the norm it replaces: residual row x -> (rmsnorm_q8, GEMV) and ->
// (pieces, GEMV with the scale) agree within fp32 rounding of the products (Q8 codes may move by
// one where the scale crosses a rounding boundary).
TEST(CudaNormDefer, DeferredChainMatchesNormThenGemv) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2503);
  for (const auto& [rows, k] : std::vector<std::tuple<int64_t, int64_t>>{{6144, 4096}, {512, 2048}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " k " + std::to_string(k));
    const Tiled m = tiled_matrix(rows, k, rng);
    const std::vector<float> x = random_row(k, rng, -3.0f, 3.0f), w = random_row(k, rng, 0.2f, 1.2f);
    const DeviceBuffer dx = to_device(x), dw = to_device(w);
    const float eps = 1e-5f;
    DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(act_q8_bytes(k, 1)), 0));
    DeviceBuffer dh(static_cast<size_t>(k) * sizeof(float)), dy0(static_cast<size_t>(rows) * sizeof(float)),
        dy1(static_cast<size_t>(rows) * sizeof(float));
    DeviceBuffer dss(static_cast<size_t>(k / 32) * sizeof(double));
    rmsnorm_q8(dx.as<float>(), k, dw.as<float>(), k, eps, 1, dh.as<float>(), k, Round::kNone, dq.get(), nullptr);
    gemv(tiled_args(m, rows, k, dq.get(), dy0.as<float>()));
    norm_defer_pieces(dx.as<float>(), dw.as<float>(), k, dq.get(), dss.as<double>(), nullptr);
    GemvArgs a = tiled_args(m, rows, k, dq.get(), dy1.as<float>());
    a.nd_in_ss = dss.as<double>();
    a.nd_eps = eps;
    gemv(a);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y0 = to_host<float>(dy0, static_cast<size_t>(rows)),
                             y1 = to_host<float>(dy1, static_cast<size_t>(rows));
    double ymax = 0.0, dmax = 0.0;
    for (size_t i = 0; i < y0.size(); ++i) {
      ymax = std::max(ymax, std::fabs(static_cast<double>(y0[i])));
      dmax = std::max(dmax, std::fabs(static_cast<double>(y1[i]) - y0[i]));
    }
    EXPECT_GT(ymax, 0.0);
    EXPECT_LE(dmax, 2e-3 * ymax) << "deferred norm moved the product by " << dmax << " of " << ymax;
  }
}

TEST(CudaNormDefer, RefusesCallsItCannotServe) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2504);
  const Tiled m = tiled_matrix(64, 512, rng);
  std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(512, 1)));
  const std::vector<float> xk = random_row(512, rng);
  quantize_act_q8_row_ref(xk.data(), 512, xq.data());
  const DeviceBuffer dxq = to_device(xq);
  DeviceBuffer dy = to_device(std::vector<float>(128, 0.0f)), dss = to_device(std::vector<double>(16, 1.0));
  DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(act_q8_bytes(64, 1)), 0));
  DeviceBuffer dcount = to_device(std::vector<unsigned>(2, 0u));
  GemvArgs g = tiled_args(m, 64, 512, dxq.get(), dy.as<float>());
  GemvArgs bad = g;
  bad.nd_in_ss = dss.as<double>();
  bad.accumulate = true;
  EXPECT_THROW(gemv(bad), Error) << "scale with accumulate";
  bad.accumulate = false;
  bad.round = Round::kBF16;
  EXPECT_THROW(gemv(bad), Error) << "scale with rounding";
  bad = g;
  bad.nd_xq = dq.get();
  bad.nd_ss = dss.as<double>();
  EXPECT_THROW(gemv(bad), Error) << "pieces without counters";
  bad.nd_count = dcount.as<unsigned>();
  bad.n_tok = 2;
  EXPECT_THROW(gemv(bad), Error) << "two tokens";
  EXPECT_THROW(norm_defer_pieces(dy.as<float>(), nullptr, 48, dq.get(), dss.as<double>(), nullptr), Error) << "n % 32";
}

}  // namespace
}  // namespace ft::cuda
