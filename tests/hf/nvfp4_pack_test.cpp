// ModelOpt <-> block_nvfp4 repacking against the spec's worked example
// (shared/spec/nvfp4-scales.md §6.4, bytes checked there with ggml's own decoder).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "hf/nvfp4_pack.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> b;
  std::string digits;
  for (char c : s)
    if (c != ' ') digits += c;
  for (size_t i = 0; i + 1 < digits.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return b;
}

TEST(Nvfp4Pack, SpecWorkedExample) {
  const auto weight = hex("1b297091021a29a0b5276efad3964f7d909102192f90010a6ef9d4075f7ce1c6");
  const std::vector<uint8_t> scale = {0x79, 0x68, 0x7e, 0x67};
  const auto want = hex("79687e67 2b01a912902701a9 35db6792fe46da7f f02901991200a901 fe56c97f14ed67c0");
  std::vector<uint8_t> got(36);
  ft::hf::nvfp4_repack_modelopt(weight.data(), scale.data(), 1, 64, got.data());
  EXPECT_EQ(got, want);
  std::vector<uint8_t> w2(32), s2(4);
  ft::hf::nvfp4_unpack_to_modelopt(got.data(), 1, 64, w2.data(), s2.data());
  EXPECT_EQ(w2, weight);
  EXPECT_EQ(s2, scale);
  // The spec's decoded values (ggml's dequantize_row_nvfp4): y[0] -432, y[5] 1728, y[40] -2688.
  std::vector<float> y(64);
  ft::quant::dequantize_row_ref(ft::GgmlType::NVFP4, got.data(), y.data(), 64);
  EXPECT_EQ(y[0], -432.0f);
  EXPECT_EQ(y[5], 1728.0f);
  EXPECT_EQ(y[40], -2688.0f);
  EXPECT_EQ(y[63], -120.0f);
}

TEST(Nvfp4Pack, QuantiserMatchesTheSpecRow) {
  // §6.4 input row through the ModelOpt recipe gives the same ModelOpt bytes.
  std::vector<float> x(64);
  for (int j = 0; j < 64; ++j) x[static_cast<size_t>(j)] = static_cast<float>(((37 * j) % 23) - 11) * 0.01f;
  x[5] = 0.5f;
  x[40] = -0.75f;
  const float s2 = ft::quant::nvfp4_tensor_scale(x.data(), 64);
  const auto blocks = ft::quant::quantize_rows_ref(ft::GgmlType::NVFP4, x.data(), 1, 64, s2);
  std::vector<uint8_t> w(32), s(4);
  ft::hf::nvfp4_unpack_to_modelopt(blocks.data(), 1, 64, w.data(), s.data());
  EXPECT_EQ(w, hex("1b297091021a29a0b5276efad3964f7d909102192f90010a6ef9d4075f7ce1c6"));
  EXPECT_EQ(s, (std::vector<uint8_t>{0x79, 0x68, 0x7e, 0x67}));
}

TEST(Nvfp4Pack, RoundTripAndSignBitStripped) {
  std::mt19937 rng(3);
  const int64_t rows = 3, k = 128;
  std::vector<uint8_t> w(static_cast<size_t>(rows * k / 2)), s(static_cast<size_t>(rows * k / 16));
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (auto& b : s) b = static_cast<uint8_t>(rng() % 0x7F);
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * (k / 64) * 36));
  ft::hf::nvfp4_repack_modelopt(w.data(), s.data(), rows, k, blocks.data());
  // Element-order decode of a slow twin: element i of row r is nibble (i&1) of byte i/2.
  std::vector<float> y(static_cast<size_t>(rows * k));
  ft::quant::dequantize_row_ref(ft::GgmlType::NVFP4, blocks.data(), y.data(), rows * k);
  static const float kv[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = w[static_cast<size_t>(r * k / 2 + i / 2)];
      const int code = (i & 1) ? byte >> 4 : byte & 0xF;
      // E2M1 x E4M3 (ue4m3_half is ggml's halved scale).
      const float want = kv[code] * 2.0f * ft::quant::ue4m3_half(s[static_cast<size_t>(r * k / 16 + i / 16)]);
      ASSERT_EQ(y[static_cast<size_t>(r * k + i)], want) << "row " << r << " element " << i;
    }
  std::vector<uint8_t> w2(w.size()), s2(s.size());
  ft::hf::nvfp4_unpack_to_modelopt(blocks.data(), rows, k, w2.data(), s2.data());
  EXPECT_EQ(w2, w);
  EXPECT_EQ(s2, s);
  // The E4M3 sign bit is stripped (UE4M3 in ggml).
  s[0] |= 0x80;
  ft::hf::nvfp4_repack_modelopt(w.data(), s.data(), rows, k, blocks.data());
  EXPECT_EQ(blocks[0], s[0] & 0x7F);
}

}  // namespace
