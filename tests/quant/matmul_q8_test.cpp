// The q8 route (MatmulArgs::act_quant = kQ8): the AVX2 packer against its scalar twin,
// and the fast kernels (integer ones for NVFP4/MXFP4/Q4_0/Q8_0/Q4_K/Q6_K, fp32 ones on
// rounded activations for the rest) against matmul_ref's definition, for every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "act_test_data.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul.h"
#include "random_blocks.h"

namespace ft::quant {
namespace {

TEST(ActQuant, PackedQ8_0FastEqualsRef) {
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(11);
  for (int rep = 0; rep < 30; ++rep) {
    const auto x = testing::act_rows_with_corners(1024, rng);
    const int64_t k = 1024, nb = packed_act_bytes(GgmlType::Q8_0, k);
    std::vector<uint8_t> a(static_cast<size_t>(nb), 0xAA), b(static_cast<size_t>(nb), 0xAA);
    pack_act_ref(GgmlType::Q8_0, x.data(), a.data(), k);
    pack_act(GgmlType::Q8_0, x.data(), b.data(), k);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(k + 4 * (k / 32))), 0)
        << "rep " << rep;
  }
}

// The round trip is what the int8 blocks mean: d * q, and a zero block stays zero.
TEST(ActQuant, RoundTripIsDequantisedBlocks) {
  std::mt19937 rng(12);
  const auto x = testing::act_rows_with_corners(512, rng);
  std::vector<BlockQ8_0> q0(16);
  std::vector<BlockQ8_K> qk(2);
  quantize_q8_0_ref(x.data(), q0.data(), 512);
  quantize_q8_K_ref(x.data(), qk.data(), 512);
  std::vector<float> r0(512), rk(512);
  round_trip_act(GgmlType::Q8_0, x.data(), r0.data(), 512);
  round_trip_act(GgmlType::Q8_K, x.data(), rk.data(), 512);
  for (int i = 0; i < 512; ++i) {
    EXPECT_EQ(r0[i], f16_to_f32(q0[i / 32].d) * q0[i / 32].qs[i % 32]);
    EXPECT_EQ(rk[i], qk[i / 256].d * qk[i / 256].qs[i % 256]);
    // Within half a step of x, plus what rounding d to fp16 moves q = 127 by.
    float amax = 0.0f;
    for (int j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, d16 = f16_to_f32(q0[i / 32].d);
    EXPECT_LE(std::fabs(r0[i] - x[i]), 0.5001f * d + 127.0f * std::fabs(d16 - d)) << i;
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r0[i], 0.0f);  // act_rows_with_corners: block 0 is zero
}

struct Problem {
  GgmlType type;
  int64_t k, rows, n_tok;
};

// Fast kQ8 against matmul_ref kQ8: equal up to fp32 summation order.
void check(const Problem& p, std::mt19937& rng) {
  const int64_t rb = row_bytes(p.type, p.k) + 4;
  std::vector<uint8_t> w(static_cast<size_t>(rb * p.rows));
  for (int64_t r = 0; r < p.rows; ++r) {
    const auto row = testing::random_row(p.type, p.k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  const int64_t ldx = p.k + 5, ldy = p.rows + 1;
  std::vector<float> x(static_cast<size_t>(ldx * p.n_tok));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& v : x) v = unit(rng) * (1.0f + 9.0f * (unit(rng) > 0.9f));
  MatmulArgs a;
  a.type = p.type;
  a.w = w.data();
  a.row_bytes = rb;
  a.k = p.k;
  a.x = x.data();
  a.ldx = ldx;
  a.n_tok = p.n_tok;
  a.ldy = ldy;
  a.scale = 0.37f;
  a.act_quant = ActQuant::kQ8;
  std::vector<float> y_ref(static_cast<size_t>(ldy * p.n_tok), -1.0f), y_fast(y_ref.size(), -1.0f);
  a.y = y_ref.data();
  matmul_ref(a, 0, p.rows);
  a.y = y_fast.data();
  matmul(a, 0, p.rows);

  // Q4_1/Q5_1 run one scalar routine on every ISA (matmul_q8_1.cpp): identical output.
  if (act_dot_type(p.type) == GgmlType::Q8_1) {
    for (size_t i = 0; i < y_ref.size(); ++i)
      ASSERT_EQ(y_ref[i], y_fast[i]) << type_name(p.type) << " " << i;
    return;
  }
  const GgmlType dot = act_dot_type(p.type);
  std::vector<float> wrow(static_cast<size_t>(p.k)), xr(static_cast<size_t>(p.k));
  for (int64_t t = 0; t < p.n_tok; ++t) {
    round_trip_act(dot, x.data() + t * ldx, xr.data(), p.k);
    for (int64_t r = 0; r < p.rows; ++r) {
      dequantize_row_ref(p.type, w.data() + r * rb, wrow.data(), p.k);
      double abs_sum = 0;
      for (int64_t e = 0; e < p.k; ++e) abs_sum += std::fabs(static_cast<double>(wrow[e]) * xr[e]);
      const float ref = y_ref[t * ldy + r], got = y_fast[t * ldy + r];
      ASSERT_LE(std::fabs(static_cast<double>(got) - ref), 2e-6 * abs_sum * a.scale + 1e-30)
          << type_name(p.type) << " k=" << p.k << " rows=" << p.rows << " n_tok=" << p.n_tok
          << " r=" << r << " t=" << t << " ref=" << ref << " got=" << got;
    }
    ASSERT_EQ(y_fast[t * ldy + p.rows], -1.0f);  // padding untouched
  }
}

class MatmulQ8FastVsRef : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulQ8FastVsRef, Shapes) {
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "no SIMD kernels";
  const GgmlType t = GetParam();
  const int64_t bs = traits(t).block_size;
  const int64_t unit = std::max<int64_t>(bs, act_dot_type(t) == GgmlType::Q8_K ? 256 : 32);
  std::mt19937 rng(300 + static_cast<int>(t));
  for (int64_t nb : {1, 3, 8})
    for (int64_t rows : {1, 2, 3, 5, 9})
      for (int64_t n_tok : {1, 2, 3, 4, 5, 7, 8, 13}) {
        check({t, nb * unit, rows, n_tok}, rng);
        if (HasFatalFailure()) return;
      }
}

// Enough tokens that the k loop is cut into chunks (256 KiB of int8 activations per
// chunk: 600 tokens x 1024 -> 4 chunks of 256 elements), for each tile family.
TEST(MatmulQ8, KChunksManyTokens) {
  if (active_isa() == Isa::kScalar) GTEST_SKIP() << "no SIMD kernels";
  std::mt19937 rng(14);
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    check({t, 1024, 3, 600}, rng);
    if (HasFatalFailure()) return;
  }
}

// A row range that starts inside the matrix writes only its rows, with the right values.
TEST(MatmulQ8, RowRangeOffset) {
  std::mt19937 rng(15);
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q6_K, GgmlType::Q5_K}) {
    const int64_t k = 512, rows = 11, n_tok = 3;
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = testing::random_row(t, k, rng);
      w.insert(w.end(), row.begin(), row.end());
    }
    std::vector<float> x(static_cast<size_t>(k * n_tok));
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (auto& v : x) v = unit(rng);
    std::vector<float> y_all(static_cast<size_t>(rows * n_tok)), y(y_all.size(), -5.0f);
    MatmulArgs a;
    a.type = t;
    a.w = w.data();
    a.row_bytes = row_bytes(t, k);
    a.k = k;
    a.x = x.data();
    a.ldx = k;
    a.n_tok = n_tok;
    a.ldy = rows;
    a.act_quant = ActQuant::kQ8;
    a.y = y_all.data();
    matmul_ref(a, 0, rows);
    a.y = y.data();
    matmul(a, 3, 10);
    for (int64_t tk = 0; tk < n_tok; ++tk)
      for (int64_t r = 0; r < rows; ++r) {
        const float got = y[tk * rows + r], want = y_all[tk * rows + r];
        if (r < 3 || r >= 10) {
          EXPECT_EQ(got, -5.0f) << type_name(t) << " row " << r;
        } else {
          EXPECT_NEAR(got, want, 1e-4f * std::fabs(want) + 1e-4f) << type_name(t) << " row " << r;
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulQ8FastVsRef, ::testing::ValuesIn(testing::first_types()),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                           return std::string(type_name(i.param));
                         });

// kQ8 really rounds the activations of quantised weights, and leaves F32 weights alone.
TEST(MatmulQ8, ChangesQuantisedLeavesF32) {
  std::mt19937 rng(13);
  for (GgmlType t : {GgmlType::F32, GgmlType::NVFP4, GgmlType::Q4_K, GgmlType::F16}) {
    const int64_t k = 512, rows = 8;
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = testing::random_row(t, k, rng);
      w.insert(w.end(), row.begin(), row.end());
    }
    std::vector<float> x(static_cast<size_t>(k));
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (auto& v : x) v = unit(rng);
    std::vector<float> y0(rows), y1(rows), y2(rows);
    MatmulArgs a;
    a.type = t;
    a.w = w.data();
    a.row_bytes = row_bytes(t, k);
    a.k = k;
    a.x = x.data();
    a.ldx = k;
    a.ldy = rows;
    a.y = y0.data();
    matmul(a, 0, rows);
    a.act_quant = ActQuant::kQ8;
    a.y = y1.data();
    matmul(a, 0, rows);
    a.y = y2.data();
    matmul_ref(a, 0, rows);
    int differ = 0;
    for (int64_t r = 0; r < rows; ++r) differ += y0[r] != y1[r];
    if (t == GgmlType::F32) {
      // Activations stay as they are; one token only sums in ggml's vec_dot order
      // (matmul_vec_dot.cpp), so the results agree to rounding.
      for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(y0[r], y1[r], 1e-5f * (1.0f + std::fabs(y0[r])));
    } else {
      EXPECT_GT(differ, rows / 2) << type_name(t);
    }
  }
}

}  // namespace
}  // namespace ft::quant
