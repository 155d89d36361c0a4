// Activation quantiser of the integer GEMV path (src/cuda/act_q8.h) and the integer path's
// host twin (src/cuda/gemv_q8_ref.h):
//   - the host quantiser equals the CPU q8 route's Q8_0 quantiser (quant/act_quant.h) code
//     for code, with the fp16 d widened, and its half sums add up (no GPU);
//   - the twin's block math equals matmul_ref on the round-tripped activations up to fp32
//     summation order, for every integer type (no GPU);
//   - the GPU quantiser writes exactly the host twin's bytes (GPU).
#include "cuda/act_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "core/fp16.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_q8_ref.h"
#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul.h"

namespace ft::cuda {
namespace {

std::vector<float> random_acts(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = unit(rng) * std::exp(unit(rng) * 3.0f);
  // An all-zero block, a block with one huge value, exact halves (rounding ties).
  for (int i = 0; i < 32 && n >= 96; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;
  if (n >= 96) x[70] = 1e4f;
  if (n >= 128) {
    x[96] = 127.0f;
    for (int i = 1; i < 32; ++i) x[static_cast<size_t>(96 + i)] = static_cast<float>(i) - 15.5f;
  }
  return x;
}

TEST(ActQ8, HostQuantiserEqualsCpuQ8_0RouteAndSumsAddUp) {
  std::mt19937 rng(3);
  for (int64_t k : {32, 128, 4096}) {
    const auto x = random_acts(k, rng);
    std::vector<uint8_t> row(static_cast<size_t>(act_q8_row_bytes(k)));
    quantize_act_q8_row_ref(x.data(), k, row.data());
    std::vector<quant::BlockQ8_0> want(static_cast<size_t>(k / 32));
    quant::quantize_q8_0_ref(x.data(), want.data(), k);
    for (int64_t b = 0; b < k / 32; ++b) {
      ActQ8Scale sc;
      std::memcpy(&sc, row.data() + k + 8 * b, 8);
      ASSERT_EQ(sc.d, f16_to_f32(want[static_cast<size_t>(b)].d)) << "block " << b;
      int s[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const int8_t q = static_cast<int8_t>(row[static_cast<size_t>(32 * b + i)]);
        ASSERT_EQ(q, want[static_cast<size_t>(b)].qs[i]) << "block " << b << " i " << i;
        s[i / 16] += q;
      }
      ASSERT_EQ(sc.s_lo, s[0]);
      ASSERT_EQ(sc.s_hi, s[1]);
    }
  }
  EXPECT_EQ(act_q8_row_bytes(32), 48);
  EXPECT_EQ(act_q8_row_bytes(4096), 5120);
}

const GgmlType kQ8Types[] = {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

TEST(ActQ8, TwinEqualsMatmulRefOnRoundTrippedActivations) {
  std::mt19937 rng(11);
  for (GgmlType t : kQ8Types) {
    SCOPED_TRACE(std::string(type_name(t)));
    const int64_t k = (t == GgmlType::Q4_K || t == GgmlType::Q6_K) ? 1280 : 1216;
    for (int rep = 0; rep < 20; ++rep) {
      const auto w = quant::testing::random_row(t, k, rng);
      const auto x = random_acts(k, rng);
      std::vector<uint8_t> xq(static_cast<size_t>(act_q8_row_bytes(k)));
      quantize_act_q8_row_ref(x.data(), k, xq.data());
      std::vector<float> xrt(static_cast<size_t>(k)), wd(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) xrt[static_cast<size_t>(i)] = act_q8_value(xq.data(), k, i);
      quant::dequantize_row_ref(t, w.data(), wd.data(), k);
      quant::MatmulArgs a;
      a.type = t;
      a.w = w.data();
      a.row_bytes = static_cast<int64_t>(w.size());
      a.k = k;
      a.x = xrt.data();
      a.ldx = k;
      a.n_tok = 1;
      float ref = 0.0f;
      a.y = &ref;
      a.ldy = 1;
      quant::matmul_ref(a, 0, 1);
      double mag = 0;
      for (int64_t i = 0; i < k; ++i) mag += std::fabs(static_cast<double>(wd[static_cast<size_t>(i)]) * xrt[static_cast<size_t>(i)]);
      const float got = gemv_q8_dot_ref(t, w.data(), k, xq.data());
      ASSERT_LE(std::fabs(static_cast<double>(got) - ref), 1e-5 * mag + 1e-30) << "rep " << rep << " got " << got << " want " << ref;
    }
  }
}

TEST(ActQ8, GpuQuantiserWritesTheTwinsBytes) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(21);
  for (int64_t k : {32, 96, 2048, 14336}) {
    for (int64_t n_tok : {1, 3, 8}) {
      const int64_t ldx = k + 12;
      const auto x = random_acts(ldx * n_tok, rng);
      const int64_t rb = act_q8_row_bytes(k);
      std::vector<uint8_t> want(act_q8_bytes(k, n_tok));
      for (int64_t t = 0; t < n_tok; ++t) quantize_act_q8_row_ref(x.data() + t * ldx, k, want.data() + t * rb);
      DeviceBuffer dx = to_device(x), dq(act_q8_bytes(k, n_tok));
      FT_CUDA_CHECK(cudaMemset(dq.get(), 0, dq.bytes()));
      quantize_act_q8(dx.as<float>(), ldx, k, n_tok, dq.get(), nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = to_host<uint8_t>(dq, want.size());
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < k + 8 * (k / 32); ++i)
          ASSERT_EQ(got[static_cast<size_t>(t * rb + i)], want[static_cast<size_t>(t * rb + i)])
              << "k " << k << " token " << t << " byte " << i;
    }
  }
  EXPECT_THROW(quantize_act_q8(nullptr, 32, 48, 1, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace ft::cuda
