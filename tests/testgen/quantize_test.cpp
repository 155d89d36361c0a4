// Reference quantisers: worked example of nvfp4-scales.md §6.4, E4M3/E2M1 encoders,
// round-trip error bounds per type (decoded with quant::dequantize_row_ref).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "testgen/rng.h"

namespace {

using ft::GgmlType;
namespace q = ft::quant;

std::vector<uint8_t> from_hex(const char* h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; h[i] && h[i + 1]; i += 2) {
    if (h[i] == ' ') {
      --i;
      continue;
    }
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(h + i, 2), nullptr, 16)));
  }
  return out;
}

TEST(Quantize, Nvfp4WorkedExampleFromSpec) {
  // nvfp4-scales.md §6.4: x[j] = (((37*j) mod 23) - 11) * 0.01, x[5] = 0.5, x[40] = -0.75.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[j] = static_cast<float>(((37 * j) % 23) - 11) * 0.01f;
  x[5] = 0.5f;
  x[40] = -0.75f;
  const float s2 = q::nvfp4_tensor_scale(x.data(), 64);
  EXPECT_EQ(ft::f32_to_bits(s2), 0x39924925u);
  uint8_t blk[36];
  q::quantize_row_ref(GgmlType::NVFP4, x.data(), blk, 64, s2);
  const auto want = from_hex("79687e672b01a912902701a935db6792fe46da7ff02901991200a901fe56c97f14ed67c0");
  ASSERT_EQ(want.size(), 36u);
  EXPECT_EQ(std::vector<uint8_t>(blk, blk + 36), want);
  float y[64];
  q::dequantize_row_ref(GgmlType::NVFP4, blk, y, 64);
  EXPECT_EQ(y[0], -432.0f);
  EXPECT_EQ(y[5], 1728.0f);
  EXPECT_EQ(y[40], -2688.0f);
  EXPECT_FLOAT_EQ(y[40] * s2, -0.75f);  // s2 is rounded to f32, so within an ulp
}

TEST(Quantize, E4m3EncodeIsExactOnEveryCodeAndRoundsToNearestEven) {
  for (int c = 0; c <= 0x7E; ++c) {
    const float v = q::e4m3_value(static_cast<uint8_t>(c));
    EXPECT_EQ(q::e4m3_encode_rne(v), c) << "code " << c;
    // ue4m3_half used by the decoder is exactly half the value.
    EXPECT_EQ(q::ue4m3_half(static_cast<uint8_t>(c)) * 2, c == 0 ? 0.0f : v);
    if (c > 0 && c < 0x7E) {
      const float next = q::e4m3_value(static_cast<uint8_t>(c + 1));
      const float mid = 0.5f * (v + next);
      EXPECT_EQ(q::e4m3_encode_rne(mid), (c & 1) ? c + 1 : c) << "tie between " << c << " and " << c + 1;
      EXPECT_EQ(q::e4m3_encode_rne(std::nextafter(mid, 0.0f)), c);
      EXPECT_EQ(q::e4m3_encode_rne(std::nextafter(mid, 1e9f)), c + 1);
    }
  }
  EXPECT_EQ(q::e4m3_encode_rne(1e9f), 0x7E);
  EXPECT_EQ(q::e4m3_encode_rne(-1.0f), 0);
  EXPECT_EQ(q::e4m3_encode_rne(0.0f), 0);
}

TEST(Quantize, E2m1TiesGoToEvenCode) {
  EXPECT_EQ(q::e2m1_encode_rne(0.25f), 0);   // 0 vs 0.5
  EXPECT_EQ(q::e2m1_encode_rne(0.75f), 2);   // 0.5 vs 1
  EXPECT_EQ(q::e2m1_encode_rne(1.25f), 2);   // 1 vs 1.5
  EXPECT_EQ(q::e2m1_encode_rne(1.75f), 4);   // 1.5 vs 2
  EXPECT_EQ(q::e2m1_encode_rne(2.5f), 4);    // 2 vs 3
  EXPECT_EQ(q::e2m1_encode_rne(3.5f), 6);    // 3 vs 4
  EXPECT_EQ(q::e2m1_encode_rne(5.0f), 6);    // 4 vs 6
  EXPECT_EQ(q::e2m1_encode_rne(-5.0f), 14);
  EXPECT_EQ(q::e2m1_encode_rne(100.0f), 7);  // clip
  EXPECT_EQ(q::e2m1_encode_rne(-0.1f), 0);   // zero is code 0, never 8
}

struct Bound {
  GgmlType type;
  float max_rel_rms;  // RMS error / RMS of the input, for Gaussian rows
};

TEST(Quantize, RoundTripErrorWithinTypeBounds) {
  // Measured relative RMS errors on Gaussian data (n = 1024, seed 3): f16 0.0002, bf16 0.0017,
  // q8_0 0.0054, q6_K 0.018, q4_K 0.072, q4_0 0.086, mxfp4 0.123, nvfp4 0.096; bounds have
  // ~1.4x headroom. A wrong layout or scale gives errors of order 1.
  const Bound bounds[] = {{GgmlType::F32, 0},       {GgmlType::F16, 5e-4f},   {GgmlType::BF16, 3e-3f},
                          {GgmlType::Q8_0, 0.008f}, {GgmlType::Q6_K, 0.025f}, {GgmlType::Q4_K, 0.1f},
                          {GgmlType::Q4_0, 0.12f},  {GgmlType::MXFP4, 0.17f}, {GgmlType::NVFP4, 0.13f}};
  ft::testgen::Rng rng(3);
  const int64_t n = 1024;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = rng.normal() * 0.05f;
  for (const auto& b : bounds) {
    const float s2 = b.type == GgmlType::NVFP4 ? q::nvfp4_tensor_scale(x.data(), n) : 1.0f;
    std::vector<uint8_t> buf(static_cast<size_t>(ft::row_bytes(b.type, n)));
    q::quantize_row_ref(b.type, x.data(), buf.data(), n, s2);
    q::dequantize_row_ref(b.type, buf.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += std::pow(y[i] * s2 - x[i], 2);
      ref += std::pow(x[i], 2);
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LE(rel, b.max_rel_rms) << ft::type_name(b.type);
  }
}

TEST(Quantize, PerElementBoundsOfSimpleTypes) {
  ft::testgen::Rng rng(5);
  std::vector<float> x(256), y(256);
  for (auto& v : x) v = rng.normal();
  // Q8_0: |err| <= d/2 (+ f16 rounding of d).
  std::vector<uint8_t> b(ft::row_bytes(GgmlType::Q8_0, 256));
  q::quantize_row_ref(GgmlType::Q8_0, x.data(), b.data(), 256);
  q::dequantize_row_ref(GgmlType::Q8_0, b.data(), y.data(), 256);
  for (int blk = 0; blk < 8; ++blk) {
    uint16_t h;
    std::memcpy(&h, b.data() + 34 * blk, 2);
    const float d = ft::f16_to_f32(h);
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(y[32 * blk + j] - x[32 * blk + j]), 0.5f * d * 1.01f + 1e-6f);
  }
  // NVFP4: the sub-block amax element is reproduced within E4M3 rounding (2^-4 relative).
  const float s2 = q::nvfp4_tensor_scale(x.data(), 256);
  std::vector<uint8_t> nb(ft::row_bytes(GgmlType::NVFP4, 256));
  q::quantize_row_ref(GgmlType::NVFP4, x.data(), nb.data(), 256, s2);
  q::dequantize_row_ref(GgmlType::NVFP4, nb.data(), y.data(), 256);
  for (int s = 0; s < 16; ++s) {
    int k = 16 * s;
    for (int j = 16 * s; j < 16 * s + 16; ++j)
      if (std::fabs(x[j]) > std::fabs(x[k])) k = j;
    EXPECT_NEAR(y[k] * s2, x[k], std::fabs(x[k]) * 0.0625f) << "sub-block " << s;
  }
}

TEST(Quantize, ZeroRowsAndBadLengths) {
  std::vector<float> x(256, 0.0f), y(256, 1.0f);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4}) {
    std::vector<uint8_t> b(ft::row_bytes(t, 256));
    q::quantize_row_ref(t, x.data(), b.data(), 256);
    q::dequantize_row_ref(t, b.data(), y.data(), 256);
    for (float v : y) EXPECT_EQ(v, 0.0f) << ft::type_name(t);
  }
  EXPECT_EQ(q::nvfp4_tensor_scale(x.data(), 256), 1.0f);
  uint8_t dummy[64];
  EXPECT_THROW(q::quantize_row_ref(GgmlType::Q8_0, x.data(), dummy, 33), ft::Error);
  EXPECT_THROW(q::quantize_row_ref(GgmlType::IQ3_XXS, x.data(), dummy, 256), ft::Error);
  EXPECT_THROW(q::quantize_row_ref(GgmlType::NVFP4, x.data(), dummy, 64, 0.0f), ft::Error);
}

}  // namespace
