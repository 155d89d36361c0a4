// The GEMV block decoders (src/cuda/gemv_formats.cuh) run on the host too: every piece of
// every unit of random rows must equal quant::dequantize_row_ref (exactly for the E2M1
// formats, whose bit tricks are the risky part; to fp32 rounding where the kernel factors
// the scale out). Needs no GPU.
#include "cuda/gemv_formats.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "quant/dequant.h"

namespace ft::cuda::gemv_detail {
namespace {

template <class F>
void check_format(GgmlType t) {
  SCOPED_TRACE(std::string(type_name(t)));
  std::mt19937 rng(static_cast<unsigned>(t) + 11);
  constexpr int k = 1024;  // one staged chunk: 32 units of 32 elements
  std::vector<float> ref(k);
  alignas(16) static uint8_t chunk[4096];
  for (int rep = 0; rep < 100; ++rep) {
    const auto row = quant::testing::random_row(t, k, rng);
    quant::dequantize_row_ref(t, row.data(), ref.data(), k);
    std::memcpy(chunk, row.data(), row.size());
    for (int u = 0; u < 32; ++u)
      for (int p = 0; p < 4; ++p) {
        float q[8], d, m;
        F::piece(chunk, u, p, q, d, m);
        for (int i = 0; i < 8; ++i) {
          const double want = ref[static_cast<size_t>(32 * u + 8 * p + i)];
          if constexpr (F::kE2M1) {
            // q = E2M1 * 2^-126 and d the half-scale: q * 2^127 * d is the weight, exactly.
            ASSERT_EQ(static_cast<double>(q[i]) * std::ldexp(1.0, 127) * d, want) << "u " << u << " p " << p << " i " << i;
          } else {
            const double got = static_cast<double>(q[i]) * d - m;
            ASSERT_LE(std::fabs(got - want), 1e-6 * std::fabs(want) + 1e-30) << "u " << u << " p " << p << " i " << i;
          }
        }
      }
  }
}

TEST(CudaGemvFormats, DecodersMatchDequantizeRowRef) {
  check_format<FmtF32>(GgmlType::F32);
  check_format<FmtF16>(GgmlType::F16);
  check_format<FmtBF16>(GgmlType::BF16);
  check_format<FmtQ8_0>(GgmlType::Q8_0);
  check_format<FmtQ4_K>(GgmlType::Q4_K);
  check_format<FmtQ6_K>(GgmlType::Q6_K);
  check_format<FmtMXFP4>(GgmlType::MXFP4);
  check_format<FmtNVFP4>(GgmlType::NVFP4);
}

}  // namespace
}  // namespace ft::cuda::gemv_detail
