// core/fp16.h against the F16C hardware conversions (exhaustive for f16 -> f32, a dense
// sweep of fp32 for f32 -> f16) and against a bit-level restatement for bf16.
#include "core/fp16.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "core/cpu_features.h"

namespace ft {
namespace {

__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  return static_cast<uint16_t>(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT)));
}

TEST(Fp16, AllHalfValuesMatchF16C) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float sw = f16_to_f32(static_cast<uint16_t>(h));
    const float hw = hw_f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(hw)) {
      ASSERT_TRUE(std::isnan(sw)) << h;
      ASSERT_EQ(f32_to_bits(sw), f32_to_bits(hw)) << h;  // payload and sign preserved
    } else {
      ASSERT_EQ(f32_to_bits(sw), f32_to_bits(hw)) << std::hex << h;
    }
  }
}

TEST(Fp16, RoundTripAllHalfValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(Fp16, F32ToF16MatchesF16C) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  // Every 2^7-th fp32 bit pattern (33M values, all exponents, both signs) plus the
  // exact midpoints between neighbouring halves, where ties-to-even decides.
  for (uint64_t u = 0; u < (1ull << 32); u += 128) {
    const float f = bits_to_f32(static_cast<uint32_t>(u) | static_cast<uint32_t>((u >> 7) & 127));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << std::hex << f32_to_bits(f);
  }
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double mid = (static_cast<double>(f16_to_f32(static_cast<uint16_t>(h))) +
                        static_cast<double>(f16_to_f32(static_cast<uint16_t>(h + 1)))) / 2;
    const float f = static_cast<float>(mid);  // exact: halves have 11 significant bits
    ASSERT_EQ(f32_to_f16(f), hw_f32_to_f16(f)) << h;
    ASSERT_EQ(f32_to_f16(-f), hw_f32_to_f16(-f)) << h;
  }
  EXPECT_EQ(f32_to_f16(std::nanf("")) & 0x7e00, 0x7e00);
}

uint16_t bf16_round_reference(float f) {
  const uint32_t u = f32_to_bits(f);
  uint32_t t = u >> 16;
  const uint32_t rest = u & 0xffff;
  if (rest > 0x8000 || (rest == 0x8000 && (t & 1))) ++t;
  return static_cast<uint16_t>(t);
}

TEST(Fp16, Bf16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_bits(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 97) {
    const float f = bits_to_f32(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), bf16_round_reference(f)) << std::hex << u;
  }
}

}  // namespace
}  // namespace ft
