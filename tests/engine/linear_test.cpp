#include "engine/linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/exec.h"
#include "quant/dequant.h"
#include "test_util.h"

namespace ft::engine {
namespace {

// y = dequant(W) @ x * s (+ b), in double, from the dequantised rows.
std::vector<float> dense_ref(const model::Tensor& w, float s, const float* bias, const std::vector<float>& x,
                             int64_t n_tok) {
  const int64_t k = w.ne[0], rows = w.ne[1];
  std::vector<float> row(k), y(n_tok * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row_ref(w.type, w.data + r * w.row_bytes(), row.data(), k);
    for (int64_t t = 0; t < n_tok; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += (double)row[i] * x[t * k + i];
      y[t * rows + r] = static_cast<float>(acc * s + (bias ? bias[r] : 0.0f));
    }
  }
  return y;
}

// A fused projection of parts with different types and scales equals its parts run alone.
TEST(Linear, FusedPartsWithScalesAndBias) {
  const int64_t k = 128, n_tok = 3;
  std::vector<uint8_t> s0, s1, s2;
  const auto w0 = test::make_weight(GgmlType::NVFP4, k, 48, 1, 1, s0);
  const auto w1 = test::make_weight(GgmlType::BF16, k, 16, 1, 2, s1);
  const auto w2 = test::make_weight(GgmlType::NVFP4, k, 32, 1, 3, s2);
  auto bias = test::randn(16, 9);
  model::Tensor b;
  b.data = reinterpret_cast<const uint8_t*>(bias.data());
  Linear l;
  l.add(w0, 0.01f);
  l.add(w1, 1.0f, b);
  l.add(w2, 3.5f);
  EXPECT_EQ(l.rows(), 96);
  EXPECT_FALSE(l.same_type());
  const auto rs = l.row_scales();
  EXPECT_EQ(rs[0], 0.01f);
  EXPECT_EQ(rs[50], 1.0f);
  EXPECT_EQ(rs[95], 3.5f);

  const auto x = test::randn(n_tok * k, 4);
  ThreadPool pool(3);
  Exec ex{&pool, ActType::kF32};
  std::vector<float> y(n_tok * 96), yr(n_tok * 96);
  linear(ex, l, x.data(), k, n_tok, y.data(), 96);
  linear_ref(ActType::kF32, l, x.data(), k, n_tok, yr.data(), 96);
  const auto r0 = dense_ref(w0, 0.01f, nullptr, x, n_tok), r1 = dense_ref(w1, 1.0f, bias.data(), x, n_tok),
             r2 = dense_ref(w2, 3.5f, nullptr, x, n_tok);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < 48; ++r) EXPECT_NEAR(y[t * 96 + r], r0[t * 48 + r], 1e-4f + 1e-4f * std::fabs(r0[t * 48 + r]));
    for (int64_t r = 0; r < 16; ++r) EXPECT_NEAR(y[t * 96 + 48 + r], r1[t * 16 + r], 1e-3f);
    for (int64_t r = 0; r < 32; ++r) EXPECT_NEAR(y[t * 96 + 64 + r], r2[t * 32 + r], 1e-3f);
  }
  EXPECT_LT(test::max_abs_diff(y, yr), 1e-3f);
}

// The point of applying the NVFP4 scale in the fp32 epilogue: with a small second-level
// scale the unscaled products exceed fp16's range. Rounding to fp16 BEFORE the scale (what a
// half-precision matmul followed by a scale multiply does) gives inf; ours stays finite and
// close to the fp32 result.
TEST(Linear, Fp16WithTinyScaleStaysFinite) {
  const int64_t k = 512, rows = 32;
  std::vector<uint8_t> store;
  // |W| ~ 1000 (large E4M3 block scales), x ~ 30: unscaled dot products ~ 1e6 > 65504.
  const auto w = test::make_weight(GgmlType::NVFP4, k, rows, 1, 11, store, 1000.0f);
  const float s = 1e-4f;
  Linear l;
  l.add(w, s);
  auto x = test::randn(k, 12, 30.0f);
  ThreadPool pool(2);
  std::vector<float> y16(rows), y32(rows);
  linear(Exec{&pool, ActType::kF16}, l, x.data(), k, 1, y16.data(), rows);
  linear(Exec{&pool, ActType::kF32}, l, x.data(), k, 1, y32.data(), rows);

  // Rounding first: the unscaled result rounded to fp16, then scaled.
  Linear unscaled;
  unscaled.add(w, 1.0f);
  std::vector<float> yu(rows);
  linear(Exec{&pool, ActType::kF16}, unscaled, x.data(), k, 1, yu.data(), rows);
  int n_inf = 0;
  for (int64_t r = 0; r < rows; ++r) n_inf += std::isinf(yu[r] * s);
  EXPECT_GT(n_inf, rows / 2) << "the test weights are not large enough to show the overflow";

  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(std::isfinite(y16[r]));
    EXPECT_NEAR(y16[r], y32[r], 1e-3f * std::fabs(y32[r]) + 1e-3f);
  }
}

}  // namespace
}  // namespace ft::engine
