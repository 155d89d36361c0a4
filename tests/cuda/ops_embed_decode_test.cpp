// The embedding lookup's element decoders (src/cuda/embed_decode.cuh) run on the host too:
// every 8-element piece of random rows must equal quant::dequantize_row_ref bit for bit.
// Needs no GPU.
#include "cuda/embed_decode.cuh"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "quant/dequant.h"

namespace ft::cuda::embed_detail {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <GgmlType T>
void check_type() {
  SCOPED_TRACE(std::string(type_name(T)));
  std::mt19937 rng(static_cast<unsigned>(T) + 3);
  for (int64_t n : {256, 512, 2048}) {
    std::vector<float> ref(static_cast<size_t>(n));
    for (int rep = 0; rep < 20; ++rep) {
      const auto row = quant::testing::random_row(T, n, rng);
      quant::dequantize_row_ref(T, row.data(), ref.data(), n);
      for (int64_t e = 0; e < n; e += 8) {
        float y[8];
        Decode<T>::run(row.data(), e, y);
        for (int i = 0; i < 8; ++i)
          ASSERT_EQ(bits(y[i]), bits(ref[static_cast<size_t>(e + i)]))
              << "n " << n << " element " << e + i << ": " << y[i] << " vs " << ref[static_cast<size_t>(e + i)];
      }
    }
  }
}

TEST(CudaOpsEmbedDecode, E2M1DoubledMatchesTable) {
  for (uint32_t n = 0; n < 16; ++n) EXPECT_EQ(e2m1_doubled(n), quant::kE2M1Doubled[n]) << n;
}

TEST(CudaOpsEmbedDecode, DecodersMatchDequantizeRowRef) {
  check_type<GgmlType::F32>();
  check_type<GgmlType::F16>();
  check_type<GgmlType::BF16>();
  check_type<GgmlType::Q8_0>();
  check_type<GgmlType::Q4_K>();
  check_type<GgmlType::Q6_K>();
  check_type<GgmlType::MXFP4>();
  check_type<GgmlType::NVFP4>();
}

}  // namespace
}  // namespace ft::cuda::embed_detail
