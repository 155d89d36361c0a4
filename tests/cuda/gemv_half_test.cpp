// gemv_half (BF16 / F16 weights, fp32 activations, straight to registers) against a double
// reference on the host: every shape the kernel tiles differently (rows not a multiple of
// the warp's rows or of the CTA's, k not a multiple of the 256-element lane stride, one
// piece), 1..8 tokens, row scales, accumulate, and the bf16 / f16 output roundings.
#include "cuda/gemv_half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

float rounded(Round r, float v) {
  if (r == Round::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (r == Round::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

struct Case {
  GgmlType type;
  int64_t rows, k, n_tok;
  bool row_scale, accumulate;
  Round round;
};

void check(const Case& c) {
  SCOPED_TRACE(std::string(c.type == GgmlType::BF16 ? "bf16" : "f16") + " rows " + std::to_string(c.rows) + " k " +
               std::to_string(c.k) + " n_tok " + std::to_string(c.n_tok) + " row_scale " +
               std::to_string(c.row_scale) + " acc " + std::to_string(c.accumulate) + " round " +
               std::to_string(static_cast<int>(c.round)));
  const int64_t row_bytes = c.k * 2 + 32;  // padded rows: the stride is not the row length
  const auto wf = randn(static_cast<size_t>(c.rows * c.k), static_cast<uint64_t>(c.rows + c.k), 0.5f);
  std::vector<uint8_t> w(static_cast<size_t>(c.rows * row_bytes), 0xEE);
  std::vector<float> wq(wf.size());  // the weights as the kernel sees them
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t i = 0; i < c.k; ++i) {
      const float v = wf[static_cast<size_t>(r * c.k + i)];
      const uint16_t h = c.type == GgmlType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(&w[static_cast<size_t>(r * row_bytes + 2 * i)], &h, 2);
      wq[static_cast<size_t>(r * c.k + i)] = c.type == GgmlType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  const int64_t ldx = c.k + 4, ldy = c.rows + 3;
  const auto x = randn(static_cast<size_t>(c.n_tok * ldx), 7, 1.0f);
  const auto rs = randn(static_cast<size_t>(c.rows), 9, 1.0f);
  const auto y0 = randn(static_cast<size_t>(c.n_tok * ldy), 11, 1.0f);
  const float scale = 0.75f;

  DeviceBuffer dw = to_device(w), dx = to_device(x), drs = to_device(rs), dy = to_device(y0);
  GemvArgs a;
  a.type = c.type;
  a.w = dw.as<uint8_t>();
  a.row_bytes = row_bytes;
  a.k = c.k;
  a.rows = c.rows;
  a.x = dx.as<float>();
  a.ldx = ldx;
  a.n_tok = c.n_tok;
  a.y = dy.as<float>();
  a.ldy = ldy;
  a.row_scale = c.row_scale ? drs.as<float>() : nullptr;
  a.scale = scale;
  a.round = c.round;
  a.accumulate = c.accumulate;
  ASSERT_TRUE(gemv_half_supported(a));
  gemv_half(a);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = to_host<float>(dy, y0.size());
  int64_t bad = 0;
  for (int64_t t = 0; t < c.n_tok; ++t) {
    for (int64_t r = 0; r < c.rows; ++r) {
      double dot = 0.0, mag = 0.0;
      for (int64_t i = 0; i < c.k; ++i) {
        const double p = static_cast<double>(wq[static_cast<size_t>(r * c.k + i)]) * x[static_cast<size_t>(t * ldx + i)];
        dot += p;
        mag += std::fabs(p);
      }
      const double s = (c.row_scale ? rs[static_cast<size_t>(r)] : 1.0f) * scale;
      const float base = c.accumulate ? y0[static_cast<size_t>(t * ldy + r)] : 0.0f;
      const double want = base + dot * s;
      // fp32 summation-order error, then one rounding step of the output type.
      double tol = 4e-6 * mag * std::fabs(s) + 1e-30;
      if (c.round == Round::kBF16) tol += std::fabs(dot * s) * (1.0 / 256);
      if (c.round == Round::kF16) tol += std::fabs(dot * s) * (1.0 / 2048) + 6e-8;
      const float g = got[static_cast<size_t>(t * ldy + r)];
      if (!(std::fabs(g - want) <= tol) && bad++ < 3)
        ADD_FAILURE() << "t " << t << " row " << r << ": got " << g << " want " << want << " tol " << tol;
      if (!c.accumulate && rounded(c.round, g) != g && bad++ < 3)
        ADD_FAILURE() << "t " << t << " row " << r << ": " << g << " is not a value of the output type";
    }
    // Rows past `rows` (the ldy padding) are untouched.
    for (int64_t r = c.rows; r < ldy; ++r) EXPECT_EQ(got[static_cast<size_t>(t * ldy + r)], y0[static_cast<size_t>(t * ldy + r)]);
  }
  EXPECT_EQ(bad, 0);
}

TEST(CudaGemvHalf, MatchesDoubleReference) {
  FT_OPS_REQUIRE_GPU();
  const Case cases[] = {
      {GgmlType::BF16, 1, 8, 1, false, false, Round::kNone},     {GgmlType::BF16, 7, 264, 1, true, false, Round::kNone},
      {GgmlType::BF16, 4097, 4096, 1, false, false, Round::kNone}, {GgmlType::F16, 4097, 4096, 1, true, true, Round::kNone},
      {GgmlType::BF16, 33, 2048, 2, true, true, Round::kNone},   {GgmlType::F16, 17, 1032, 3, false, false, Round::kNone},
      {GgmlType::BF16, 129, 768, 5, true, false, Round::kNone},  {GgmlType::F16, 65, 4104, 8, false, true, Round::kNone},
      {GgmlType::BF16, 300, 2048, 1, false, false, Round::kBF16}, {GgmlType::F16, 300, 2048, 2, true, false, Round::kF16},
      {GgmlType::BF16, 151, 8200, 4, false, false, Round::kF16},
  };
  for (const Case& c : cases) check(c);
}

TEST(CudaGemvHalf, RefusesWhatItCannotTake) {
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  EXPECT_FALSE(gemv_half_supported(a));
  a.type = GgmlType::BF16;
  a.k = 12;  // not a multiple of 8
  a.rows = 1;
  a.row_bytes = 32;
  a.ldx = 12;
  EXPECT_FALSE(gemv_half_supported(a));
  EXPECT_THROW(gemv_half(a), Error);
}

}  // namespace
}  // namespace ft::cuda
