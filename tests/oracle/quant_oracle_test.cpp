// Our reference decoders against ggml's own to_float (the llama.cpp CPU library in
// .deps/llama/lib) on random blocks of every first type: outputs must be bit-identical.
#include <ggml.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/fp16.h"
#include "quant/dequant.h"

namespace ft::quant {
namespace {

void expect_same_as_ggml(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n, const char* what) {
  const ::ggml_type_traits* tr = ::ggml_get_type_traits(static_cast<ggml_type>(static_cast<int>(t)));
  ASSERT_NE(tr, nullptr);
  if (t == GgmlType::F32) {
    ASSERT_EQ(tr->to_float, nullptr);  // ggml has no F32 -> F32 decoder; ours is a copy
  } else {
    ASSERT_NE(tr->to_float, nullptr) << type_name(t);
  }
  ASSERT_EQ(tr->blck_size, traits(t).block_size) << type_name(t);
  ASSERT_EQ(static_cast<int64_t>(tr->type_size), traits(t).type_size) << type_name(t);
  std::vector<float> ours(static_cast<size_t>(n)), theirs(static_cast<size_t>(n));
  dequantize_row_ref(t, bytes.data(), ours.data(), n);
  if (tr->to_float != nullptr) {
    tr->to_float(bytes.data(), theirs.data(), n);
  } else {
    std::memcpy(theirs.data(), bytes.data(), static_cast<size_t>(n) * 4);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(theirs[i]) && std::isnan(ours[i])) continue;
    ASSERT_EQ(f32_to_bits(ours[i]), f32_to_bits(theirs[i]))
        << type_name(t) << " (" << what << ") element " << i << ": ours " << ours[i] << ", ggml " << theirs[i];
  }
}

TEST(QuantOracle, RandomBlocksEveryFirstType) {
  for (GgmlType t : testing::first_types()) {
    std::mt19937 rng(99 + static_cast<int>(t));
    const int64_t n = 4 * 256;  // a multiple of every block size
    for (int rep = 0; rep < 50; ++rep) {
      expect_same_as_ggml(t, testing::random_row(t, n, rng), n, "random");
      if (HasFatalFailure()) return;
    }
  }
}

// Raw random bytes, scales included (inf/NaN/subnormal f16 scales, every E8M0/UE4M3 byte).
TEST(QuantOracle, RawRandomBytes) {
  for (GgmlType t : testing::first_types()) {
    std::mt19937 rng(7 + static_cast<int>(t));
    const int64_t n = 8 * 256;
    std::vector<uint8_t> b(static_cast<size_t>(row_bytes(t, n)));
    for (int rep = 0; rep < 20; ++rep) {
      for (auto& v : b) v = static_cast<uint8_t>(rng());
      expect_same_as_ggml(t, b, n, "raw bytes");
      if (HasFatalFailure()) return;
    }
  }
}

TEST(QuantOracle, EveryHalfAndScaleByte) {
  std::vector<uint8_t> f16(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    f16[2 * h] = static_cast<uint8_t>(h);
    f16[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  expect_same_as_ggml(GgmlType::F16, f16, 65536, "all halves");
  expect_same_as_ggml(GgmlType::BF16, f16, 65536, "all bf16");
  // NVFP4: 256 blocks, block i has all four scales = i and codes 0..15 in every nibble.
  std::vector<uint8_t> nv(256 * 36), mx(256 * 17);
  for (int i = 0; i < 256; ++i) {
    for (int s = 0; s < 4; ++s) nv[36 * i + s] = static_cast<uint8_t>(i);
    for (int j = 0; j < 32; ++j) nv[36 * i + 4 + j] = static_cast<uint8_t>(j * 17 + i);
    mx[17 * i] = static_cast<uint8_t>(i);
    for (int j = 0; j < 16; ++j) mx[17 * i + 1 + j] = static_cast<uint8_t>(j * 16 + (15 - j));
  }
  expect_same_as_ggml(GgmlType::NVFP4, nv, 256 * 64, "every UE4M3 byte");
  expect_same_as_ggml(GgmlType::MXFP4, mx, 256 * 32, "every E8M0 byte");
}

}  // namespace
}  // namespace ft::quant
