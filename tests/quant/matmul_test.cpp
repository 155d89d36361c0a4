// Fast matmul kernels (every ISA this CPU has) against matmul_ref, for every type with a
// reference decoder, over odd shapes, token counts, scales and output roundings.
#include "quant/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "random_blocks.h"

namespace ft::quant {
namespace {

struct Problem {
  GgmlType type;
  int64_t k, rows, n_tok;
  int scale_mode;  // 0 none, 1 scalar, 2 per-row, 3 both
  Round round;
};

std::string describe(const Problem& p, Isa isa) {
  return std::string(type_name(p.type)) + " isa=" + isa_name(isa) + " k=" + std::to_string(p.k) +
         " rows=" + std::to_string(p.rows) + " n_tok=" + std::to_string(p.n_tok) +
         " scale=" + std::to_string(p.scale_mode) + " round=" + std::to_string(static_cast<int>(p.round));
}

// Runs p on `isa` and on matmul_ref; every output must agree within fp32 reordering
// error (1e-5 of sum |w*x|, times the scale) plus one unit of the output rounding.
void check(const Problem& p, Isa isa, std::mt19937& rng) {
  std::vector<uint8_t> w;
  const int64_t rb = row_bytes(p.type, p.k) + 8;  // padded stride: rows are not packed
  w.resize(static_cast<size_t>(rb * p.rows));
  for (int64_t r = 0; r < p.rows; ++r) {
    const auto row = testing::random_row(p.type, p.k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  const int64_t ldx = p.k + 3, ldy = p.rows + 2;
  std::vector<float> x(static_cast<size_t>(ldx * p.n_tok));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& v : x) v = unit(rng);
  std::vector<float> row_scale(static_cast<size_t>(p.rows));
  for (auto& v : row_scale) v = 0.5f + unit(rng) * 0.25f;

  MatmulArgs a;
  a.type = p.type;
  a.w = w.data();
  a.row_bytes = rb;
  a.k = p.k;
  a.x = x.data();
  a.ldx = ldx;
  a.n_tok = p.n_tok;
  a.ldy = ldy;
  a.row_scale = (p.scale_mode & 2) ? row_scale.data() : nullptr;
  a.scale = (p.scale_mode & 1) ? 3.0e-4f : 1.0f;
  a.round = p.round;
  std::vector<float> y_ref(static_cast<size_t>(ldy * p.n_tok), -1.0f), y_fast(y_ref.size(), -1.0f);
  a.y = y_ref.data();
  matmul_ref(a, 0, p.rows);
  a.y = y_fast.data();
  matmul_on(isa, a, 0, p.rows);

  std::vector<float> wrow(static_cast<size_t>(p.k));
  for (int64_t r = 0; r < p.rows; ++r) {
    dequantize_row_ref(p.type, w.data() + r * rb, wrow.data(), p.k);
    const float s = std::fabs(a.scale * (a.row_scale ? a.row_scale[r] : 1.0f));
    for (int64_t t = 0; t < p.n_tok; ++t) {
      double abs_sum = 0;
      for (int64_t e = 0; e < p.k; ++e) abs_sum += std::fabs(static_cast<double>(wrow[e]) * x[t * ldx + e]);
      const float ref = y_ref[t * ldy + r], got = y_fast[t * ldy + r];
      const double ulp = p.round == Round::kBF16 ? 1.0 / 128 : p.round == Round::kF16 ? 1.0 / 1024 : 0.0;
      const double subnormal_step = p.round == Round::kF16 ? std::ldexp(1.0, -24) : 0.0;  // fp16 below 2^-14
      const double tol = 1e-5 * abs_sum * s + ulp * std::fabs(ref) + subnormal_step + 1e-30;
      ASSERT_LE(std::fabs(static_cast<double>(got) - ref), tol)
          << describe(p, isa) << " r=" << r << " t=" << t << " ref=" << ref << " got=" << got;
    }
    // Padding between rows of y stays untouched.
    for (int64_t t = 0; t < p.n_tok; ++t) ASSERT_EQ(y_fast[t * ldy + p.rows], -1.0f);
  }
}

std::vector<Isa> fast_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

class MatmulFastVsRef : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulFastVsRef, Shapes) {
  const GgmlType t = GetParam();
  const int64_t bs = traits(t).block_size;
  std::vector<int64_t> ks;
  if (bs == 1) {
    ks = {1, 7, 8, 17, 64, 65, 130, 1000};
  } else {
    for (int64_t nb : {1, 2, 3, 5, 7}) ks.push_back(nb * bs);
    if (bs == 32) ks.push_back(33 * bs);  // more than one k chunk
  }
  const int64_t rows_list[] = {1, 2, 3, 5, 67};
  const int64_t tok_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 33};
  std::mt19937 rng(77 + static_cast<int>(t));
  const auto isas = fast_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  int variant = 0;
  for (int64_t k : ks) {
    for (int64_t rows : rows_list) {
      for (int64_t n_tok : tok_list) {
        // 67 rows x 33 tokens at the largest k is slow against the reference; skip it.
        if (rows == 67 && n_tok == 33 && k > 1000) continue;
        ++variant;
        const Problem p{t, k, rows, n_tok, variant % 4, static_cast<Round>((variant / 4) % 3)};
        for (Isa isa : isas) check(p, isa, rng);
        if (HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulFastVsRef, ::testing::ValuesIn(testing::first_types()),
                         [](const ::testing::TestParamInfo<GgmlType>& i) { return std::string(type_name(i.param)); });

// nvfp4-scales.md §6.4: one-hot(40) picks element 40 = -2688; with the tensor's second
// level scale s2 the output is -0.75.
TEST(Matmul, Nvfp4ScalesRowOneHot) {
  const uint8_t blk[36] = {0x79, 0x68, 0x7e, 0x67, 0x2b, 0x01, 0xa9, 0x12, 0x90, 0x27, 0x01, 0xa9,
                           0x35, 0xdb, 0x67, 0x92, 0xfe, 0x46, 0xda, 0x7f, 0xf0, 0x29, 0x01, 0x99,
                           0x12, 0x00, 0xa9, 0x01, 0xfe, 0x56, 0xc9, 0x7f, 0x14, 0xed, 0x67, 0xc0};
  std::vector<float> x(64, 0.0f);
  x[40] = 1.0f;
  float y = 0;
  MatmulArgs a;
  a.type = GgmlType::NVFP4;
  a.w = blk;
  a.row_bytes = 36;
  a.k = 64;
  a.x = x.data();
  a.ldx = 64;
  a.y = &y;
  a.ldy = 1;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    a.scale = 1.0f;
    matmul_on(isa, a, 0, 1);
    EXPECT_EQ(y, -2688.0f) << isa_name(isa);
    a.scale = bits_to_f32(0x39924925);  // s2 = 0.75 / 2688
    matmul_on(isa, a, 0, 1);
    EXPECT_NEAR(y, -0.75f, 1e-7f) << isa_name(isa);
  }
}

// A tiny scale must meet the fp32 accumulator before the fp16 rounding: 60000 * 60000
// overflows fp16 but times 1e-4 it is 360000 -> still inf; 6e4*6e2*1e-4 = 3600 is fine.
TEST(Matmul, ScaleAppliedBeforeRounding) {
  std::vector<float> w = {60000.0f, 600.0f};
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f};  // token 0 picks w[0], token 1 picks w[1]
  float y[2] = {0, 0};
  MatmulArgs a;
  a.type = GgmlType::F32;
  a.w = reinterpret_cast<const uint8_t*>(w.data());
  a.row_bytes = 8;
  a.k = 2;
  a.x = x.data();
  a.ldx = 2;
  a.n_tok = 2;
  a.y = y;
  a.ldy = 1;
  a.scale = 1.0e-4f;
  a.round = Round::kF16;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    matmul_on(isa, a, 0, 1);
    EXPECT_EQ(y[0], f16_to_f32(f32_to_f16(60000.0f * 1.0e-4f))) << isa_name(isa);
    EXPECT_EQ(y[1], f16_to_f32(f32_to_f16(600.0f * 1.0e-4f))) << isa_name(isa);
  }
}

TEST(Matmul, RowRangeOnlyWritesItsRows) {
  std::mt19937 rng(5);
  const auto w = testing::random_row(GgmlType::Q4_K, 256 * 8, rng);  // 8 rows of 256
  std::vector<float> x(256, 0.5f), y(8, -7.0f), y_all(8);
  MatmulArgs a;
  a.type = GgmlType::Q4_K;
  a.w = w.data();
  a.row_bytes = 144;
  a.k = 256;
  a.x = x.data();
  a.ldx = 256;
  a.ldy = 8;
  a.y = y_all.data();
  matmul_ref(a, 0, 8);
  a.y = y.data();
  matmul(a, 3, 6);
  for (int r = 0; r < 8; ++r) {
    if (r < 3 || r >= 6) {
      EXPECT_EQ(y[r], -7.0f);
    } else {
      EXPECT_NEAR(y[r], y_all[r], 1e-4f * std::fabs(y_all[r]) + 1e-6f);
    }
  }
}

TEST(Matmul, RejectsBadArguments) {
  std::vector<uint8_t> w(1024);
  std::vector<float> x(256), y(4);
  MatmulArgs a;
  a.type = GgmlType::Q2_K;
  a.w = w.data();
  a.row_bytes = 84;
  a.k = 256;
  a.x = x.data();
  a.ldx = 256;
  a.y = y.data();
  a.ldy = 4;
  EXPECT_FALSE(matmul_supported(GgmlType::Q2_K));
  EXPECT_THROW(matmul(a, 0, 1), Error);
  a.type = GgmlType::Q8_0;
  a.k = 48;  // not a multiple of 32
  a.row_bytes = 68;
  EXPECT_THROW(matmul(a, 0, 1), Error);
}

TEST(CpuFeatures, NamesAndActiveIsa) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) EXPECT_EQ(isa_from_name(isa_name(i)), i);
  EXPECT_FALSE(isa_from_name("sse9").has_value());
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(active_isa()));
  EXPECT_STREQ(matmul_isa(), isa_name(active_isa()));
  // The best family must be supported and nothing faster than it.
  const Isa b = best_isa();
  EXPECT_TRUE(isa_supported(b));
  if (b != Isa::kAvx512) {
    EXPECT_FALSE(isa_supported(Isa::kAvx512));
  }
}

}  // namespace
}  // namespace ft::quant
