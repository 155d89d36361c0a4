// Our reference quantisers (src/quant/quantize.cpp) against ggml's own
// (ggml_quantize_chunk without imatrix = quantize_row_*_ref): byte-identical for
// Q8_0, Q4_0, Q4_K, Q6_K, MXFP4, F16, BF16. NVFP4 differs on purpose (ModelOpt
// recipe with a second-level scale, E4M3 round-to-nearest-even, E2M1 ties to even;
// ggml rounds the E4M3 scale half-up and ties toward the lower code), so there we
// only check the decoded values agree closely with s2 = 1.
#include <ggml.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quant/dequant.h"
#include "quant/quantize.h"
#include "testgen/rng.h"

namespace {

using ft::GgmlType;

std::vector<float> gaussian_rows(uint64_t seed, int64_t n, float sd) {
  ft::testgen::Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = rng.normal() * sd;
  return x;
}

TEST(QuantizeOracle, ByteIdenticalToGgmlRefQuantisers) {
  const int64_t n_per_row = 512, nrows = 8;
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::F16,
                     GgmlType::BF16}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      // Mixed magnitudes: some rows tiny, some large, one with an outlier.
      auto x = gaussian_rows(seed, n_per_row * nrows, seed == 3 ? 1e-3f : 0.7f);
      x[17] = 40.0f;
      std::vector<uint8_t> ours(static_cast<size_t>(ft::row_bytes(t, n_per_row) * nrows));
      std::vector<uint8_t> ref(ours.size());
      for (int64_t r = 0; r < nrows; ++r)
        ft::quant::quantize_row_ref(t, x.data() + r * n_per_row, ours.data() + r * ft::row_bytes(t, n_per_row), n_per_row);
      const auto gt = static_cast<ggml_type>(static_cast<int>(t));
      ASSERT_FALSE(ggml_quantize_requires_imatrix(gt));
      const size_t wrote = ggml_quantize_chunk(gt, x.data(), ref.data(), 0, nrows, n_per_row, nullptr);
      ASSERT_EQ(wrote, ref.size());
      size_t first = 0;
      while (first < ours.size() && ours[first] == ref[first]) ++first;
      EXPECT_EQ(first, ours.size()) << ft::type_name(t) << " seed " << seed << ": first differing byte " << first;
    }
  }
}

TEST(QuantizeOracle, Nvfp4WithoutSecondLevelScaleCloseToGgml) {
  const int64_t n = 1024;
  auto x = gaussian_rows(9, n, 0.5f);
  std::vector<uint8_t> ours(static_cast<size_t>(ft::row_bytes(GgmlType::NVFP4, n))), ref(ours.size());
  ft::quant::quantize_row_ref(GgmlType::NVFP4, x.data(), ours.data(), n, 1.0f);
  ggml_quantize_chunk(GGML_TYPE_NVFP4, x.data(), ref.data(), 0, 1, n, nullptr);
  std::vector<float> yo(n), yr(n);
  ft::quant::dequantize_row_ref(GgmlType::NVFP4, ours.data(), yo.data(), n);
  ft::quant::dequantize_row_ref(GgmlType::NVFP4, ref.data(), yr.data(), n);
  double eo = 0, er = 0;
  int same = 0;
  for (int64_t i = 0; i < n; ++i) {
    eo += std::pow(yo[i] - x[i], 2);
    er += std::pow(yr[i] - x[i], 2);
    same += yo[i] == yr[i];
  }
  // Same recipe up to rounding rules: nearly every element decodes identically and
  // the errors are within 10% of each other.
  EXPECT_GT(same, n * 9 / 10);
  EXPECT_LT(std::fabs(std::sqrt(eo) - std::sqrt(er)), 0.1 * std::sqrt(er));
}

}  // namespace
