// GPU embedding lookup (src/cuda/embed.h) against model::embed's decoder,
// quant::dequantize_row_ref: every supported type, bit for bit, with and without the NVFP4
// scale, token ids read on the device, out-of-range ids (zero row + the bad flag), padded
// output rows (padding stays poisoned).
#include "cuda/embed.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "ops_test_util.h"
#include "quant/dequant.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

void check(GgmlType t, int64_t n_embd, float scale) {
  SCOPED_TRACE(std::string(type_name(t)) + " n_embd " + std::to_string(n_embd) + " scale " + std::to_string(scale));
  std::mt19937 rng(static_cast<unsigned>(t) * 7 + static_cast<unsigned>(n_embd));
  const int64_t n_vocab = 37, rb = row_bytes(t, n_embd);
  std::vector<uint8_t> table;
  for (int64_t v = 0; v < n_vocab; ++v) {
    const auto row = quant::testing::random_row(t, n_embd, rng);
    table.insert(table.end(), row.begin(), row.end());
  }
  const std::vector<int32_t> tokens = {0, 36, 5, 5, 17, -1, 37, 1 << 30, 2};
  const int64_t n_tok = static_cast<int64_t>(tokens.size()), ldx = n_embd + 4;
  std::vector<float> want(static_cast<size_t>(n_tok * ldx), poison()), row(static_cast<size_t>(n_embd));
  for (int64_t i = 0; i < n_tok; ++i) {
    const int32_t id = tokens[static_cast<size_t>(i)];
    float* y = want.data() + i * ldx;
    if (id < 0 || id >= n_vocab) {
      for (int64_t j = 0; j < n_embd; ++j) y[j] = 0.0f;
      continue;
    }
    quant::dequantize_row_ref(t, table.data() + id * rb, row.data(), n_embd);
    for (int64_t j = 0; j < n_embd; ++j) y[j] = row[static_cast<size_t>(j)] * scale;
  }
  DeviceBuffer d_table = to_device(table), d_tok = to_device(tokens), d_x = to_device(std::vector<float>(want.size(), poison())),
               d_bad = to_device(std::vector<int>{0});
  embed(t, d_table.as<uint8_t>(), rb, n_embd, n_vocab, scale, d_tok.as<int32_t>(), n_tok, d_x.as<float>(), ldx,
        d_bad.as<int>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = to_host<float>(d_x, want.size());
  const Diff d = compare(got, want, 0);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
  EXPECT_EQ(to_host<int>(d_bad, 1)[0], 1);

  // In-range ids only: the flag stays clear.
  const std::vector<int32_t> ok = {3, 0, 36};
  DeviceBuffer d_ok = to_device(ok), d_bad2 = to_device(std::vector<int>{0});
  embed(t, d_table.as<uint8_t>(), rb, n_embd, n_vocab, scale, d_ok.as<int32_t>(), 3, d_x.as<float>(), ldx,
        d_bad2.as<int>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(to_host<int>(d_bad2, 1)[0], 0);
}

TEST(CudaOpsEmbed, EveryTypeMatchesDequantizeRowRef) {
  FT_OPS_REQUIRE_GPU();
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                     GgmlType::MXFP4, GgmlType::NVFP4}) {
    ASSERT_TRUE(embed_supported(t));
    for (int64_t n : {256, 768, 4096}) check(t, n, 1.0f);
    check(t, 512, 0.0371f);
  }
}

TEST(CudaOpsEmbed, RejectsBadShapes) {
  FT_OPS_REQUIRE_GPU();
  DeviceBuffer tab(4096), tok(16), x(4096);
  EXPECT_THROW(embed(GgmlType::Q4_K, tab.as<uint8_t>(), 144, 128, 1, 1.0f, tok.as<int32_t>(), 1, x.as<float>(), 128,
                     nullptr, nullptr),
               Error);  // n_embd not a multiple of 256
  EXPECT_THROW(embed(GgmlType::F32, tab.as<uint8_t>(), 16, 8, 1, 1.0f, tok.as<int32_t>(), 1, x.as<float>(), 8,
                     nullptr, nullptr),
               Error);  // row_bytes below 8 floats
  EXPECT_THROW(embed(GgmlType::Q4_0, tab.as<uint8_t>(), 18, 32, 1, 1.0f, tok.as<int32_t>(), 1, x.as<float>(), 32,
                     nullptr, nullptr),
               Error);  // unsupported type
}

}  // namespace
}  // namespace ft::cuda
