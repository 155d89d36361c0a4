// The NVFP4 MoE tensor-core GEMV (cuda/gemv_mma_moe.cu) against the slab / packed kernels it
// replaces (gemv_set_nvfp4_moe(0)), bit for bit (memcmp of every output), over the grouped
// modes decode uses: gate / up with a shared input (x_div = n_used), the one-launch pair, the
// per-slot down projection (the hybrid backend's rows) and the down projection with the fused
// combine (+ accumulate); Qwen3-30B-A3B's expert shapes, partial 16-row tiles, one to eight
// tokens, k from 256 to 2048 (packed order below 32 blocks, the slab's lane tree at 32 and
// where the packed kernel does not fit), row scales, bf16 / f16 rounding, UE4M3 NaN codes.
// Outputs start poisoned: every written row must be set, rows past the end must stay poisoned.
// The slab / packed kernels themselves are diffed against the scalar twin in gemv_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "compare_util.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/glu.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "quant/dequant.h"

namespace ft::cuda {
namespace {

using compare_test::is_poison;
using compare_test::poison;

struct MoeCase {
  int64_t k, rows, n_expert;
  int n_used;
  int64_t n_tok;
  bool combine, pair, acc, rs;
  Round round;
  bool takes = true;  // whether the MoE kernel takes the call
};

std::string describe(const MoeCase& c) {
  return "k=" + std::to_string(c.k) + " rows=" + std::to_string(c.rows) + " experts=" + std::to_string(c.n_expert) +
         " used=" + std::to_string(c.n_used) + " tokens=" + std::to_string(c.n_tok) +
         (c.combine ? " combine" : "") + (c.pair ? " pair" : "") + (c.acc ? " acc" : "") + (c.rs ? " rs" : "") +
         " round=" + std::to_string(static_cast<int>(c.round));
}

void check_case(const MoeCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t rb = row_bytes(GgmlType::NVFP4, c.k), eb = rb * c.rows, n_slot = c.n_tok * c.n_used;
  std::vector<uint8_t> w(static_cast<size_t>(2 * eb * c.n_expert));  // gate experts, then up experts
  for (int64_t r = 0; r < 2 * c.rows * c.n_expert; ++r) {
    const auto row = quant::testing::random_row(GgmlType::NVFP4, c.k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  // A few UE4M3 NaN codes (0x7F, 0xFF) among the block scales: both kernels decode them alike.
  for (int i = 0; i < 6; ++i) {
    const int64_t blk = static_cast<int64_t>(rng() % static_cast<uint32_t>(w.size() / 36));
    w[static_cast<size_t>(blk * 36 + rng() % 4)] = i % 2 ? 0xFF : 0x7F;
  }
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n_slot));
  for (auto& e : ids) e = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_expert));
  std::vector<float> bank(static_cast<size_t>(c.n_expert * 4)), slot_w(static_cast<size_t>(n_slot)),
      row_scale(static_cast<size_t>(c.rows));
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  for (auto& v : slot_w) v = 0.1f + 0.45f * (unit(rng) + 1.0f);
  for (auto& v : row_scale) v = 0.5f + 0.25f * unit(rng);
  // Inputs: one row per token (gate / up, x_div = n_used) or per slot (down).
  const bool per_slot = c.combine || (!c.pair && c.k < 2048);
  const int64_t x_div = per_slot ? 1 : c.n_used, n_x = n_slot / x_div;
  std::vector<float> x(static_cast<size_t>(c.k));
  std::vector<uint8_t> xq(act_q8_bytes(c.k, n_x));
  for (int64_t r = 0; r < n_x; ++r) {
    for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
    quantize_act_q8_row_ref(x.data(), c.k, xq.data() + r * act_q8_row_bytes(c.k));
  }
  const int64_t out_rows = c.combine ? c.n_tok : n_slot, ldy = (c.pair ? 2 * c.rows : c.rows) + 3;
  std::vector<float> y0(static_cast<size_t>(ldy * out_rows), poison());
  if (c.acc)
    for (size_t i = 0; i < y0.size(); ++i)
      if (static_cast<int64_t>(i % ldy) < c.rows) y0[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  DeviceBuffer dw = to_device(w), dxq = to_device(xq), dids = to_device(ids), dbank = to_device(bank),
               dsw = to_device(slot_w), drs = to_device(row_scale);
  auto run = [&](bool moe, int warps) {
    DeviceBuffer dy = to_device(y0);
    GemvArgs g;
    g.type = GgmlType::NVFP4;
    g.w = dw.as<uint8_t>();
    g.row_bytes = rb;
    g.k = c.k;
    g.rows = c.rows;
    g.xq = dxq.get();
    g.n_tok = n_slot;
    g.y = dy.as<float>();
    g.ldy = ldy;
    g.row_scale = c.rs ? drs.as<float>() : nullptr;
    g.scale = c.rs ? 0.75f : 1.0f;
    g.round = c.round;
    g.ids = dids.as<int32_t>();
    g.expert_bytes = eb;
    g.x_div = x_div;
    g.bank = dbank.as<float>();
    g.bank_col = c.combine ? 2 : 0;
    g.accumulate = c.acc;
    if (c.combine) {
      g.slot_w = dsw.as<float>();
      g.n_used = c.n_used;
    }
    if (c.pair) {
      g.w_pair = g.w + eb * c.n_expert;
      g.w_pair_y_off = c.rows;
    }
    gemv_set_nvfp4_moe(moe ? 1 : 0, warps);
    const int64_t n0 = gemv_nvfp4_moe_launches();
    gemv(g);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const int64_t ran = gemv_nvfp4_moe_launches() - n0;
    EXPECT_EQ(ran, moe && c.takes && bulk_copy_supported() ? 1 : 0) << "MoE kernel launches (moe=" << moe << ")";
    gemv_set_nvfp4_moe(1);
    return to_host<float>(dy, y0.size());
  };
  const auto want = run(false, 0), got = run(true, 0), got8 = run(true, 8);  // 8: one-dot launches at 8 warps
  const int64_t written = c.pair ? 2 * c.rows : c.rows;
  for (int64_t o = 0; o < out_rows; ++o)
    for (int64_t r = 0; r < ldy; ++r) {
      const float v = got[static_cast<size_t>(o * ldy + r)];
      if (r < written)
        ASSERT_FALSE(is_poison(v)) << "out row " << o << " row " << r << " not written";
      else
        ASSERT_TRUE(is_poison(v)) << "out row " << o << " row " << r << " written past the end";
    }
  ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
      << "the MoE kernel differs from the slab / packed kernel";
  ASSERT_EQ(std::memcmp(want.data(), got8.data(), want.size() * sizeof(float)), 0)
      << "the MoE kernel at 8 warps differs from the slab / packed kernel";
}

TEST(CudaGemvMoe, EqualsSlabAndPackedKernelsBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(53);
  const MoeCase cases[] = {
      // Qwen3-30B-A3B, one token: gate + up pair (slab order), down + combine (packed order),
      // down per slot (the hybrid backend's rows), gate alone.
      {2048, 768, 16, 8, 1, false, true, false, false, Round::kNone},
      {768, 2048, 16, 8, 1, true, false, true, false, Round::kNone},
      {768, 2048, 16, 8, 1, false, false, false, false, Round::kBF16},
      {2048, 768, 16, 8, 1, false, false, false, true, Round::kF16},
      // Partial last tiles, several tokens, scales and roundings.
      {1024, 45, 5, 3, 3, false, true, false, true, Round::kBF16},
      {256, 100, 4, 2, 2, true, false, false, false, Round::kF16},
      {512, 17, 9, 8, 8, true, false, true, true, Round::kNone},
      {2048, 1000, 12, 8, 5, false, false, true, true, Round::kNone},
      // 24 blocks x 8 ranks: past the packed kernel's lanes, the slab's tree with 8 empty lanes.
      {1536, 64, 10, 8, 1, true, false, false, false, Round::kNone},
      {1536, 40, 10, 4, 2, false, true, false, false, Round::kBF16},
      // Declined: 64 blocks a row (k = 4096), 17 blocks (not whole steps), 16 ranks.
      {4096, 64, 4, 2, 1, false, true, false, false, Round::kNone, false},
      {1088, 40, 4, 2, 1, true, false, false, false, Round::kNone, false},
      {512, 32, 20, 16, 1, true, false, false, false, Round::kNone, false},
  };
  for (const MoeCase& c : cases) check_case(c, rng);
}

// gemv_pair_swiglu (the pair with SwiGLU and its Q8 copy in the MoE kernel's epilogue) against
// the slab / packed kernel's pair then swiglu_q8: h and its act_q8 rows byte for byte; y untouched.
void check_glu(int64_t k, int64_t rows, int64_t n_expert, int n_used, int64_t n_tok, bool rs, Round round,
               std::mt19937& rng) {
  SCOPED_TRACE("glu k=" + std::to_string(k) + " rows=" + std::to_string(rows) + " tokens=" + std::to_string(n_tok) +
               " round=" + std::to_string(static_cast<int>(round)));
  const int64_t rb = row_bytes(GgmlType::NVFP4, k), eb = rb * rows, n_slot = n_tok * n_used;
  std::vector<uint8_t> w(static_cast<size_t>(2 * eb * n_expert));
  for (int64_t r = 0; r < 2 * rows * n_expert; ++r) {
    const auto row = quant::testing::random_row(GgmlType::NVFP4, k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n_slot));
  for (auto& e : ids) e = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_expert));
  std::vector<float> bank(static_cast<size_t>(n_expert * 4)), row_scale(static_cast<size_t>(rows));
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  for (auto& v : row_scale) v = 0.5f + 0.25f * unit(rng);
  std::vector<float> x(static_cast<size_t>(k));
  std::vector<uint8_t> xq(act_q8_bytes(k, n_tok));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = 4.0f * unit(rng) * std::exp(unit(rng));
    quantize_act_q8_row_ref(x.data(), k, xq.data() + t * act_q8_row_bytes(k));
  }
  const int64_t ldgu = 2 * rows, ldh = rows + 5;
  std::vector<float> gu0(static_cast<size_t>(ldgu * n_slot), poison()), h0(static_cast<size_t>(ldh * n_slot), poison());
  std::vector<uint8_t> hq0(act_q8_bytes(rows, n_slot), 0xA5);
  DeviceBuffer dw = to_device(w), dxq = to_device(xq), dids = to_device(ids), dbank = to_device(bank),
               drs = to_device(row_scale);
  DeviceBuffer gu1 = to_device(gu0), gu2 = to_device(gu0), h1 = to_device(h0), h2 = to_device(h0), hq1 = to_device(hq0),
               hq2 = to_device(hq0);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = k;
  g.rows = rows;
  g.xq = dxq.get();
  g.n_tok = n_slot;
  g.ldy = ldgu;
  g.row_scale = rs ? drs.as<float>() : nullptr;
  g.round = round;
  g.ids = dids.as<int32_t>();
  g.expert_bytes = eb;
  g.x_div = n_used;
  g.bank = dbank.as<float>();
  g.w_pair = g.w + eb * n_expert;
  g.w_pair_y_off = rows;
  gemv_set_nvfp4_moe(0);
  g.y = gu1.as<float>();
  gemv(g);
  swiglu_q8(gu1.as<float>(), ldgu, rows, n_slot, h1.as<float>(), ldh, round, hq1.get(), nullptr);
  EXPECT_FALSE(gemv_pair_swiglu(g, h2.as<float>(), ldh, round, hq2.get())) << "taken with the MoE kernel off";
  gemv_set_nvfp4_moe(1);
  g.y = gu2.as<float>();
  const int64_t n0 = gemv_nvfp4_moe_launches();
  const bool took = gemv_pair_swiglu(g, h2.as<float>(), ldh, round, hq2.get());
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  if (!bulk_copy_supported()) {
    EXPECT_FALSE(took);
    return;
  }
  ASSERT_TRUE(took);
  EXPECT_EQ(gemv_nvfp4_moe_launches(), n0 + 1);
  const auto gu = to_host<float>(gu2, gu0.size()), ha = to_host<float>(h1, h0.size()), hb = to_host<float>(h2, h0.size());
  const auto qa = to_host<uint8_t>(hq1, hq0.size()), qb = to_host<uint8_t>(hq2, hq0.size());
  for (float v : gu) ASSERT_TRUE(is_poison(v)) << "the fused launch wrote y";
  for (int64_t s = 0; s < n_slot; ++s)
    for (int64_t r = 0; r < ldh; ++r)
      ASSERT_EQ(is_poison(hb[static_cast<size_t>(s * ldh + r)]), r >= rows) << "slot " << s << " row " << r;
  ASSERT_EQ(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float)), 0) << "h differs from pair + swiglu_q8";
  ASSERT_EQ(std::memcmp(qa.data(), qb.data(), qa.size()), 0) << "h's Q8 rows differ from swiglu_q8's";
}

TEST(CudaGemvMoe, PairSwigluEqualsPairThenSwiglu) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(59);
  check_glu(2048, 768, 16, 8, 1, false, Round::kNone, rng);  // Qwen3-30B-A3B: slab order
  check_glu(2048, 384, 8, 4, 3, true, Round::kBF16, rng);
  check_glu(1024, 64, 5, 3, 8, false, Round::kF16, rng);  // packed order
  check_glu(256, 96, 4, 2, 2, true, Round::kNone, rng);
}

}  // namespace
}  // namespace ft::cuda
