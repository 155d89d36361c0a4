// The GEMV block decoders (src/cuda/gemv_formats.cuh) run on the host too: every piece of
// every unit of random rows must equal quant::dequantize_row_ref (exactly for the E2M1
// formats, whose bit tricks are the risky part; to fp32 rounding where the kernel factors
// the scale out). Needs no GPU.
#include "cuda/gemv_formats.cuh"

#include "cuda/gemv_q8_formats.cuh"

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


// ---- integer decoders of the q8 path (gemv_q8_formats.cuh) -------------------------------

int e2m1x2(int code) {
  static const int kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}

TEST(CudaGemvQ8Formats, E2M1ToInt8EveryNibbleInEveryPosition) {
  std::mt19937 rng(5);
  for (uint32_t lo16 = 0; lo16 < 65536; ++lo16) {
    const uint32_t w = lo16 | (static_cast<uint32_t>(rng()) << 16);
    uint32_t lo, hi;
    q8_detail::e2m1x8_i8(w, lo, hi);
    for (int n = 0; n < 8; ++n) {
      const int code = static_cast<int>((w >> (4 * n)) & 0xF);
      const uint32_t word = n < 4 ? lo : hi;
      const int got = static_cast<int8_t>(word >> (8 * (n % 4)));
      ASSERT_EQ(got, e2m1x2(code)) << "w " << w << " nibble " << n;
    }
  }
}

TEST(CudaGemvQ8Formats, ActivationPairsMeetNibbleOrder) {
  // Nibble order of a word (byte 0 lo, byte 0 hi, byte 1 lo, ...) pairs with elements
  // (0, half, 1, half + 1, 2, half + 2, 3, half + 3) of the activation bytes.
  const uint32_t a = 0x03020100u, b = 0x13121110u;  // elements 0..3 and half..half+3
  EXPECT_EQ(q8_detail::x_pair_0(a, b), 0x11011000u);
  EXPECT_EQ(q8_detail::x_pair_1(a, b), 0x13031202u);
}

TEST(CudaGemvQ8Formats, Nvfp4ScalesEqualTwiceUe4m3HalfForEveryByte) {
  // Every byte in every position, the others arbitrary (NaN codes among them too).
  const uint32_t others[] = {0x3A3A3A3Au, 0x7F7F7F7Fu, 0xFF00FF00u, 0x01800201u};
  for (uint32_t b = 0; b < 256; ++b)
    for (int i = 0; i < 4; ++i)
      for (uint32_t o : others) {
        const uint32_t s = (o & ~(0xFFu << (8 * i))) | (b << (8 * i));
        float sw[4];
        q8_detail::nvfp4_scales(s, sw);
        for (int j = 0; j < 4; ++j)
          ASSERT_EQ(static_cast<double>(sw[j]), 2.0 * ue4m3_half((s >> (8 * j)) & 0xFFu))
              << "byte " << b << " at " << i << " word " << s << " sub-block " << j;
      }
}

// The mma GEMV's two-scale decoder equals nvfp4_scales on bytes 0 and 1 of every 16-bit
// pattern, whatever the upper bytes hold (the kernel passes the word shifted, not masked).
TEST(CudaGemvQ8Formats, Nvfp4Scales2EqualTheFullDecoderForEveryPair) {
  for (uint32_t v = 0; v < 65536; ++v)
    for (uint32_t hi : {0x0000u, 0x7F7Fu, 0xFFFFu, 0x1234u}) {
      const uint32_t s = (hi << 16) | v;
      float sw[4], a = -1.0f, b = -1.0f;
      q8_detail::nvfp4_scales(s, sw);
      q8_detail::nvfp4_scales2(s, a, b);
      ASSERT_EQ(a, sw[0]) << "word " << s;
      ASSERT_EQ(b, sw[1]) << "word " << s;
    }
}

// The kernels' split of nvfp4_scales: nvfp4_scales_nan flags exactly the words holding a
// 0x7F or 0xFF byte (the one test per block over all rows), and the fix-up is only ever
// needed for them (raw decode alone equals the full one on every other word).
TEST(CudaGemvQ8Formats, Nvfp4ScalesNanFlagsExactlyTheNanBytes) {
  std::mt19937 rng(91);
  for (uint32_t b = 0; b < 256; ++b)
    for (int i = 0; i < 4; ++i)
      for (int n = 0; n < 16; ++n) {
        uint32_t o = static_cast<uint32_t>(rng());
        for (int j = 0; j < 4; ++j) {  // the other bytes: no NaN code unless n says so
          const uint32_t oj = (o >> (8 * j)) & 0xFFu;
          if ((oj & 0x7Fu) == 0x7Fu && n != 0) o ^= 0x01u << (8 * j);
        }
        const uint32_t s = (o & ~(0xFFu << (8 * i))) | (b << (8 * i));
        bool has_nan = false;
        for (int j = 0; j < 4; ++j) has_nan |= (((s >> (8 * j)) & 0x7Fu) == 0x7Fu);
        ASSERT_EQ(q8_detail::nvfp4_scales_nan(s) != 0, has_nan) << "word " << s;
        float raw[4], full[4];
        q8_detail::nvfp4_scales_raw(s, raw);
        q8_detail::nvfp4_scales(s, full);
        if (!has_nan) {
          for (int j = 0; j < 4; ++j) ASSERT_EQ(raw[j], full[j]) << "word " << s;
        }
      }
}

// The sign-replicating permute on the host (the device uses the PTX instruction itself;
// tests/cuda/gemv_test.cpp diffs the two).
TEST(CudaGemvQ8Formats, PrmtSignSelectsOrReplicatesSign) {
  const uint32_t a = 0x83027F00u, b = 0xFF80017Eu;
  EXPECT_EQ(q8_detail::prmt_sign(a, b, 0x7654u), b);
  EXPECT_EQ(q8_detail::prmt_sign(a, b, 0x3210u), a);
  EXPECT_EQ(q8_detail::prmt_sign(a, b, 0xBA98u), 0xFF000000u);  // sign of bytes 3, 2, 1, 0 of a
  EXPECT_EQ(q8_detail::prmt_sign(a, b, 0xFEDCu), 0xFFFF0000u);
  EXPECT_EQ(q8_detail::prmt_sign(a, b, 0xFFFF1234u), q8_detail::prmt_sign(a, b, 0x1234u));  // high bits unread
}

// e2m1x8_pn: p - n bytewise equals e2m1x8_i8 (and the twin's 2*E2M1) for every byte value in
// every position, each byte of p and n in [0, 12], one of them 0.
TEST(CudaGemvQ8Formats, SignSplitE2M1EveryByteInEveryPosition) {
  std::mt19937 rng(6);
  for (uint32_t byte = 0; byte < 256; ++byte)
    for (int pos = 0; pos < 4; ++pos)
      for (int rep = 0; rep < 8; ++rep) {
        const uint32_t w = (static_cast<uint32_t>(rng()) & ~(0xFFu << (8 * pos))) | (byte << (8 * pos));
        uint32_t p_lo, p_hi, n_lo, n_hi, lo, hi;
        q8_detail::e2m1x8_pn(w, p_lo, p_hi, n_lo, n_hi);
        q8_detail::e2m1x8_i8(w, lo, hi);
        for (int n = 0; n < 8; ++n) {
          const int code = static_cast<int>((w >> (4 * n)) & 0xF);
          const int sh = 8 * (n % 4);
          const int p = static_cast<int>(((n < 4 ? p_lo : p_hi) >> sh) & 0xFF);
          const int q = static_cast<int>(((n < 4 ? n_lo : n_hi) >> sh) & 0xFF);
          ASSERT_TRUE(p == 0 || q == 0) << "w " << w << " nibble " << n;
          ASSERT_LE(p, 12);
          ASSERT_LE(q, 12);
          ASSERT_EQ(p - q, e2m1x2(code)) << "w " << w << " nibble " << n;
          ASSERT_EQ(static_cast<int8_t>((n < 4 ? lo : hi) >> sh), e2m1x2(code));
        }
      }
}

TEST(CudaGemvQ8Formats, Q6KCodesAndHelpers) {
  // ql bytes 0x5A (lo 0xA, hi 0x5), qh bits per pair 0..3.
  const uint32_t ql = 0x5A5A5A5Au, qh = 0xE4E4E4E4u;  // 0b11100100: pairs 0, 1, 2, 3
  for (int qq = 0; qq < 4; ++qq) {
    const uint32_t c = q8_detail::q6k_codes(ql, 4 * (qq >> 1), qh, 2 * qq);
    const uint32_t want = static_cast<uint32_t>(((qq >> 1) ? 0x5 : 0xA) | (qq << 4));
    EXPECT_EQ(c, want * 0x01010101u) << qq;
  }
  EXPECT_EQ(q8_detail::dp4a(0xFF02FE01u, 0x01FF0203u, 10), 10 + 3 - 4 - 2 - 1);
  EXPECT_EQ(q8_detail::funnel_r(0x44332211u, 0x88776655u, 16), 0x66554433u);
  EXPECT_EQ(q8_detail::byte_perm(0x03020100u, 0x07060504u, 0xFFFF7654u), 0x07060504u);
}

}  // namespace
}  // namespace ft::cuda::gemv_detail
