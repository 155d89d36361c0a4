// Exact decodes of hand-built blocks (spec worked examples) and of random blocks
// against per-element formulas written independently of src/quant/dequant.cpp (they
// compute each element from its index rather than walking the block).
#include "quant/dequant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/iq_tables.h"
#include "random_blocks.h"

namespace ft::quant {
namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : s)
    if (c != ' ' && c != '|') digits += c;
  for (size_t i = 0; i + 1 < digits.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), -999.0f);
  dequantize_row_ref(t, bytes.data(), y.data(), n);
  return y;
}

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// gguf-format.md §3.9 worked example.
TEST(Dequant, Nvfp4WorkedBlock) {
  const auto b = hex("38 30 41 7F A2 7F 00 00 00 00 00 00 15 00 00 00 00 00 00 00 C3 00 00 00 00 00 00 00 77 00 00 00 00 00 00 00");
  ASSERT_EQ(b.size(), 36u);
  const auto y = decode(GgmlType::NVFP4, b, 64);
  std::vector<float> want(64, 0.0f);
  want[0] = 1.0f, want[8] = -1.0f, want[1] = -6.0f, want[9] = 6.0f, want[16] = 1.5f, want[24] = 0.25f;
  want[32] = 3.375f, want[40] = -4.5f;
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], want[i]) << "element " << i;
}

// gguf-format.md §3.8 worked example, and the same block with e = 0x80 (values double).
TEST(Dequant, Mxfp4WorkedBlock) {
  auto b = hex("7F 2F 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
  ASSERT_EQ(b.size(), 17u);
  auto y = decode(GgmlType::MXFP4, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], i == 0 ? -6.0f : i == 16 ? 1.0f : 0.0f) << i;
  b[0] = 0x80;
  y = decode(GgmlType::MXFP4, b, 32);
  EXPECT_EQ(y[0], -12.0f);
  EXPECT_EQ(y[16], 2.0f);
}

// nvfp4-scales.md §6.4: the ggml block of the worked row.
TEST(Dequant, Nvfp4ScalesRow) {
  const auto b = hex("79687e67 2b01a912902701a9 35db6792fe46da7f f02901991200a901 fe56c97f14ed67c0");
  ASSERT_EQ(b.size(), 36u);
  const auto y = decode(GgmlType::NVFP4, b, 64);
  EXPECT_EQ(y[0], -432.0f);
  EXPECT_EQ(y[5], 1728.0f);
  EXPECT_EQ(y[40], -2688.0f);
  EXPECT_EQ(y[63], -120.0f);
  // Every element is E2M1(code) * E4M3(scale), codes as listed in the spec (element order).
  const int codes[64] = {11, 1, 9, 2, 0, 7, 1, 9, 2, 0, 10, 1, 9, 2, 0, 10, 5, 11, 7, 2, 14, 6, 10, 15, 3, 13, 6, 9,
                         15, 4, 13, 7, 0, 9, 1, 9, 2, 0, 9, 1, 15, 2, 0, 9, 1, 0, 10, 0, 14, 6, 9, 15, 4, 13, 7, 0,
                         15, 5, 12, 7, 1, 14, 6, 12};
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const float e4m3[4] = {288, 64, 448, 60};
  for (int i = 0; i < 64; ++i) {
    const float mag = e2m1[codes[i] & 7] * e4m3[i / 16];
    EXPECT_EQ(y[i], (codes[i] & 8) ? -mag : mag) << i;
  }
}

TEST(Dequant, Ue4m3AllBytes) {
  for (int x = 0; x < 256; ++x) {
    const int e = (x >> 3) & 15, m = x & 7;
    float want = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
    if (x == 0 || x == 0x7F) want = 0.0f;
    EXPECT_EQ(ue4m3_half(static_cast<uint8_t>(x)), want * 0.5f) << x;
    EXPECT_EQ(ue4m3_half_table()[x], ue4m3_half(static_cast<uint8_t>(x)));
  }
  EXPECT_EQ(ue4m3_half(0x7E), 224.0f);
  EXPECT_EQ(ue4m3_half(0xFF), 240.0f);  // bit 7 ignored: E=15, M=7 is 480, halved
}

TEST(Dequant, E8m0AllBytes) {
  for (int e = 0; e < 256; ++e) EXPECT_EQ(e8m0_half(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
}

TEST(Dequant, FloatTypes) {
  const float f[3] = {1.5f, -0.0f, 3.0e-39f};
  std::vector<uint8_t> b(12);
  std::memcpy(b.data(), f, 12);
  auto y = decode(GgmlType::F32, b, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(f[i]));
  // f16: 1.0, -2.0, smallest subnormal, inf; bf16: 1.0, -2.0.
  b = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c};
  y = decode(GgmlType::F16, b, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(y[3]));
  b = {0x80, 0x3f, 0x00, 0xc0};
  y = decode(GgmlType::BF16, b, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
}

TEST(Dequant, Q8_0HandBlock) {
  std::vector<uint8_t> b(34);
  testing::put_f16(b.data(), 0.5f);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const auto y = decode(GgmlType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * (j * 8 - 128)) << j;
}

TEST(Dequant, Q4AndQ5HandBlocks) {
  // qs[j] = j | (15-j) << 4: element j = j, element j+16 = 15-j (before offset/scale).
  std::vector<uint8_t> q4_0(18), q4_1(20), q5_0(22), q5_1(24);
  testing::put_f16(q4_0.data(), 0.25f);
  testing::put_f16(q4_1.data(), 0.25f);
  testing::put_f16(q4_1.data() + 2, -1.0f);
  testing::put_f16(q5_0.data(), 0.25f);
  testing::put_f16(q5_1.data(), 0.25f);
  testing::put_f16(q5_1.data() + 2, -1.0f);
  const uint32_t qh = 0xA5C3F00Fu;  // 5th bits
  std::memcpy(q5_0.data() + 2, &qh, 4);
  std::memcpy(q5_1.data() + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) {
    const auto v = static_cast<uint8_t>(j | (15 - j) << 4);
    q4_0[2 + j] = q4_1[4 + j] = q5_0[6 + j] = q5_1[8 + j] = v;
  }
  const auto y40 = decode(GgmlType::Q4_0, q4_0, 32), y41 = decode(GgmlType::Q4_1, q4_1, 32);
  const auto y50 = decode(GgmlType::Q5_0, q5_0, 32), y51 = decode(GgmlType::Q5_1, q5_1, 32);
  for (int i = 0; i < 32; ++i) {
    const int nib = i < 16 ? i : 15 - (i - 16);
    const int q5 = nib + 16 * static_cast<int>((qh >> i) & 1);
    EXPECT_EQ(y40[i], 0.25f * (nib - 8)) << i;
    EXPECT_EQ(y41[i], 0.25f * nib - 1.0f) << i;
    EXPECT_EQ(y50[i], 0.25f * (q5 - 16)) << i;
    EXPECT_EQ(y51[i], 0.25f * q5 - 1.0f) << i;
  }
}

// Bits [pos, pos+len) of a little-endian byte string.
int bits(const uint8_t* p, int pos, int len) {
  int v = 0;
  for (int i = 0; i < len; ++i) v |= ((p[(pos + i) / 8] >> ((pos + i) % 8)) & 1) << i;
  return v;
}

// K-quant 6-bit scale/min j of the 12-byte table, described as bit positions: j < 4
// in bytes j / j+4 bits 0-5; j >= 4 low 4 bits in byte j+4 (scale: low nibble, min:
// high nibble) and top 2 bits in bits 6-7 of byte j-4 (scale) / byte j (min).
void kq_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = bits(s, 8 * j, 6);
    m = bits(s, 8 * (j + 4), 6);
  } else {
    sc = bits(s, 8 * (j + 4), 4) + 16 * bits(s, 8 * (j - 4) + 6, 2);
    m = bits(s, 8 * (j + 4) + 4, 4) + 16 * bits(s, 8 * j + 6, 2);
  }
}

float q4k_elem(const uint8_t* b, int i) {
  const int sub = i / 32, c = i / 64, l = i % 32;
  const int q = bits(b + 16, 8 * (32 * c + l) + 4 * (sub % 2), 4);
  int sc, m;
  kq_scale_min(b + 4, sub, sc, m);
  return f16_at(b) * static_cast<float>(sc) * static_cast<float>(q) - f16_at(b + 2) * static_cast<float>(m);
}

float q5k_elem(const uint8_t* b, int i) {
  const int sub = i / 32, c = i / 64, l = i % 32;
  const int q = bits(b + 48, 8 * (32 * c + l) + 4 * (sub % 2), 4) + 16 * bits(b + 16, 8 * l + sub, 1);
  int sc, m;
  kq_scale_min(b + 4, sub, sc, m);
  return f16_at(b) * static_cast<float>(sc) * static_cast<float>(q) - f16_at(b + 2) * static_cast<float>(m);
}

float q6k_elem(const uint8_t* b, int i) {
  const int h = i / 128, g = (i % 128) / 32, l = i % 32;
  const int lo = bits(b, 8 * (64 * h + 32 * (g % 2) + l) + 4 * (g / 2), 4);
  const int hi = bits(b + 128, 8 * (32 * h + l) + 2 * g, 2);
  const int sc = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * g]);
  return f16_at(b + 208) * static_cast<float>(sc) * static_cast<float>(lo + 16 * hi - 32);
}

float iq3xxs_elem(const uint8_t* b, int i) {
  const int ib = i / 32, l = (i % 32) / 8, j = i % 8;
  const uint8_t* ss = b + 2 + 64 + 4 * ib;
  const int scale4 = bits(ss, 28, 4);
  const int sidx = bits(ss, 7 * l, 7);
  const bool neg = j < 7 ? (sidx >> j) & 1 : std::popcount(static_cast<unsigned>(sidx)) % 2 == 1;
  const int gidx = b[2 + 8 * ib + 2 * l + j / 4];
  const int code = (kIq3xxsKgrid[gidx] >> (3 * (j % 4))) & 7;
  const float mag = code == 7 ? 62.0f : static_cast<float>(8 * code + 4);
  const float db = f16_at(b) * (0.5f + static_cast<float>(scale4)) * 0.5f;
  return db * mag * (neg ? -1.0f : 1.0f);
}

void check_random_blocks(GgmlType t, float (*elem)(const uint8_t*, int)) {
  std::mt19937 rng(1234 + static_cast<int>(t));
  const int64_t bs = traits(t).block_size, ts = traits(t).type_size;
  for (int rep = 0; rep < 20; ++rep) {
    const auto row = testing::random_row(t, 3 * bs, rng);
    const auto y = decode(t, row, 3 * bs);
    for (int64_t i = 0; i < 3 * bs; ++i) {
      ASSERT_EQ(y[i], elem(row.data() + (i / bs) * ts, static_cast<int>(i % bs))) << type_name(t) << " element " << i;
    }
  }
}

TEST(Dequant, Q4_KRandom) { check_random_blocks(GgmlType::Q4_K, q4k_elem); }
TEST(Dequant, Q5_KRandom) { check_random_blocks(GgmlType::Q5_K, q5k_elem); }
TEST(Dequant, Q6_KRandom) { check_random_blocks(GgmlType::Q6_K, q6k_elem); }
TEST(Dequant, Iq3XxsRandom) { check_random_blocks(GgmlType::IQ3_XXS, iq3xxs_elem); }

TEST(IqTables, Iq3xxsGridMatchesGgml) {
  const uint32_t* g = iq3xxs_grid();
  // Spot values from ggml-common.h's iq3xxs_grid.
  EXPECT_EQ(g[0], 0x04040404u);
  EXPECT_EQ(g[1], 0x04040414u);
  EXPECT_EQ(g[5], 0x04040c3eu);
  EXPECT_EQ(g[8], 0x04041c0cu);
  EXPECT_EQ(g[23], 0x04140404u);
  EXPECT_EQ(g[255], 0x3e341c04u);
  for (int k = 0; k < 256; ++k) {
    for (int i = 0; i < 4; ++i) {
      const int byte = (g[k] >> (8 * i)) & 0xFF;
      EXPECT_TRUE(byte == 62 || (byte % 8 == 4 && byte <= 52)) << k;
    }
    if (k > 0) {
      EXPECT_LT(kIq3xxsKgrid[k - 1], kIq3xxsKgrid[k]);  // sorted, so distinct
    }
  }
}

TEST(IqTables, KsignsHaveEvenParity) {
  const uint8_t* s = iq_ksigns();
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1], 129);
  EXPECT_EQ(s[3], 3);
  EXPECT_EQ(s[127], 255);
  for (int k = 0; k < 128; ++k) {
    EXPECT_EQ(s[k] & 127, k);
    EXPECT_EQ(std::popcount(static_cast<unsigned>(s[k])) % 2, 0) << k;
  }
}

TEST(Dequant, RejectsUnsupportedTypeAndBadLength) {
  std::vector<uint8_t> b(256);
  std::vector<float> y(256);
  EXPECT_FALSE(has_ref_dequant(GgmlType::Q2_K));
  EXPECT_THROW(dequantize_row_ref(GgmlType::Q2_K, b.data(), y.data(), 256), Error);
  EXPECT_THROW(dequantize_row_ref(GgmlType::Q8_0, b.data(), y.data(), 33), Error);
  for (GgmlType t : testing::first_types()) EXPECT_TRUE(has_ref_dequant(t)) << type_name(t);
}

}  // namespace
}  // namespace ft::quant
