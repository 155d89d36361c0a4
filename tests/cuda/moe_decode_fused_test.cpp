// moe_fused_decode (cuda/moe_decode_fused.h) against the three launches it replaces -- the gate /
// up pair GEMV, swiglu_q8, the down + combine GEMV, called as gpu/moe_fused.cpp's experts_decode
// calls them: the residual row must come out with the same bits (memcmp), for every rounding,
// on Qwen3-30B-A3B's expert shape and the other n_ff / n_used it takes, twice in a row (its
// counters go back to zero), and it must refuse the shapes it does not take.
#include "cuda/moe_decode_fused.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
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
#include "core/error.h"
#include "format/ggml_type.h"

namespace ft::cuda {
namespace {

struct Case {
  int64_t n_embd, n_ff, n_expert;
  int n_used;
};

struct Experts {
  int64_t gu_rb = 0, gu_eb = 0, d_rb = 0, d_eb = 0;
  DeviceBuffer gate, up, down, bank;
};

Experts random_experts(const Case& c, std::mt19937& rng) {
  Experts e;
  e.gu_rb = row_bytes(GgmlType::NVFP4, c.n_embd);
  e.gu_eb = e.gu_rb * c.n_ff;
  e.d_rb = row_bytes(GgmlType::NVFP4, c.n_ff);
  e.d_eb = e.d_rb * c.n_embd;
  auto bank_of = [&](int64_t rows, int64_t k, int64_t rb) {
    std::vector<uint8_t> w(static_cast<size_t>(rb * rows * c.n_expert));
    for (int64_t r = 0; r < rows * c.n_expert; ++r) {
      const auto row = quant::testing::random_row(GgmlType::NVFP4, k, rng);
      std::copy(row.begin(), row.end(), w.begin() + r * rb);
    }
    return to_device(w);
  };
  e.gate = bank_of(c.n_ff, c.n_embd, e.gu_rb);
  e.up = bank_of(c.n_ff, c.n_embd, e.gu_rb);
  e.down = bank_of(c.n_embd, c.n_ff, e.d_rb);
  std::uniform_real_distribution<float> unit(0.25f, 1.25f);
  std::vector<float> bank(static_cast<size_t>(c.n_expert * 4));
  for (auto& v : bank) v = unit(rng);
  e.bank = to_device(bank);
  return e;
}

void check_case(const Case& c, Round round, std::mt19937& rng) {
  SCOPED_TRACE("n_embd " + std::to_string(c.n_embd) + " n_ff " + std::to_string(c.n_ff) + " experts " +
               std::to_string(c.n_expert) + " used " + std::to_string(c.n_used) + " round " +
               std::to_string(static_cast<int>(round)));
  const Experts e = random_experts(c, rng);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(c.n_embd)), y0(static_cast<size_t>(c.n_embd));
  for (auto& v : h) v = unit(rng);
  for (auto& v : y0) v = 4.0f * unit(rng);
  std::vector<int32_t> all(static_cast<size_t>(c.n_expert));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int32_t> ids(all.begin(), all.begin() + c.n_used);
  std::vector<float> wts(static_cast<size_t>(c.n_used));
  for (auto& v : wts) v = 0.5f * (unit(rng) + 1.0f);
  std::vector<uint8_t> xq(act_q8_bytes(c.n_embd, 1));
  quantize_act_q8_row_ref(h.data(), c.n_embd, xq.data());
  DeviceBuffer dh = to_device(h), dxq = to_device(xq), dids = to_device(ids), dwts = to_device(wts);
  DeviceBuffer gu(static_cast<size_t>(c.n_used * 2 * c.n_ff) * sizeof(float));
  DeviceBuffer hh(static_cast<size_t>(c.n_used * c.n_ff) * sizeof(float));
  DeviceBuffer xq_mid(act_q8_bytes(c.n_ff, c.n_used));

  // The three launches (experts_decode's calls).
  DeviceBuffer y_ref = to_device(y0);
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  a.w = e.gate.as<uint8_t>();
  a.row_bytes = e.gu_rb;
  a.k = c.n_embd;
  a.rows = c.n_ff;
  a.x = dh.as<float>();
  a.ldx = c.n_embd;
  a.n_tok = c.n_used;
  a.y = gu.as<float>();
  a.ldy = 2 * c.n_ff;
  a.round = round;
  a.ids = dids.as<int32_t>();
  a.expert_bytes = e.gu_eb;
  a.x_div = c.n_used;
  a.bank = e.bank.as<float>();
  a.bank_col = 0;
  a.xq = dxq.get();
  a.w_pair = e.up.as<uint8_t>();
  a.w_pair_y_off = c.n_ff;
  gemv(a);
  swiglu_q8(gu.as<float>(), 2 * c.n_ff, c.n_ff, c.n_used, hh.as<float>(), c.n_ff, round, xq_mid.get(), nullptr);
  GemvArgs d;
  d.type = GgmlType::NVFP4;
  d.w = e.down.as<uint8_t>();
  d.row_bytes = e.d_rb;
  d.k = c.n_ff;
  d.rows = c.n_embd;
  d.x = hh.as<float>();
  d.ldx = c.n_ff;
  d.n_tok = c.n_used;
  d.y = y_ref.as<float>();
  d.ldy = c.n_embd;
  d.round = round;
  d.ids = dids.as<int32_t>();
  d.expert_bytes = e.d_eb;
  d.x_div = 1;
  d.bank = e.bank.as<float>();
  d.bank_col = 2;
  d.xq = xq_mid.get();
  d.slot_w = dwts.as<float>();
  d.n_used = c.n_used;
  d.accumulate = true;
  d.ids_early = true;
  d.y_early = true;
  gemv(d);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> want = to_host<float>(y_ref, y0.size());
  ASSERT_NE(std::memcmp(want.data(), y0.data(), y0.size() * sizeof(float)), 0) << "the reference added nothing";

  // The one launch, twice (the counters must be back at zero for the second).
  DeviceBuffer sync = to_device(std::vector<unsigned>{0u, 0u});
  DeviceBuffer mid2(act_q8_bytes(c.n_ff, c.n_used));
  for (int rep = 0; rep < 2; ++rep) {
    SCOPED_TRACE("call " + std::to_string(rep));
    DeviceBuffer y = to_device(y0);
    MoeFusedDecodeArgs f;
    f.w_gate = e.gate.as<uint8_t>();
    f.w_up = e.up.as<uint8_t>();
    f.w_down = e.down.as<uint8_t>();
    f.gu_row_bytes = e.gu_rb;
    f.gu_expert_bytes = e.gu_eb;
    f.down_row_bytes = e.d_rb;
    f.down_expert_bytes = e.d_eb;
    f.n_embd = c.n_embd;
    f.n_ff = c.n_ff;
    f.n_used = c.n_used;
    f.ids = dids.as<int32_t>();
    f.slot_w = dwts.as<float>();
    f.bank = e.bank.as<float>();
    f.xq = dxq.get();
    f.xq_mid = mid2.get();
    f.y = y.as<float>();
    f.round = round;
    f.sync = sync.as<unsigned>();
    ASSERT_TRUE(moe_fused_decode_supported(f));
    const int64_t n0 = moe_fused_decode_launches();
    moe_fused_decode(f, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(moe_fused_decode_launches(), n0 + 1);
    // Phase 1 first (gate / up, SwiGLU, Q8: the mid rows), then phase 2 (down + combine), so a
    // failure names the phase.
    const size_t row = static_cast<size_t>(act_q8_row_bytes(c.n_ff));
    const auto m1 = to_host<uint8_t>(xq_mid, act_q8_bytes(c.n_ff, c.n_used));
    const auto m2 = to_host<uint8_t>(mid2, act_q8_bytes(c.n_ff, c.n_used));
    for (size_t i = 0; i < m1.size(); ++i)
      ASSERT_EQ(m2[i], m1[i]) << "phase 1: mid activation byte " << i % row << " of rank " << i / row
                              << " differs from swiglu_q8's (codes below n_ff " << c.n_ff << ", then 8-byte scales)";
    const std::vector<float> got = to_host<float>(y, y0.size());
    size_t bad = 0, first = got.size();
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
        if (first == got.size()) first = i;
        ++bad;
      }
    ASSERT_EQ(bad, 0u) << "phase 2: " << bad << " of " << got.size()
                       << " rows differ from the three launches; first row " << first << ": got " << got[first]
                       << ", want " << want[first];
    const auto s = to_host<unsigned>(sync, 2);
    ASSERT_EQ(s[0], 0u) << "unit counter left at " << s[0];
    ASSERT_EQ(s[1], 0u) << "exit counter left at " << s[1];
  }
}

TEST(CudaMoeFusedDecode, EqualsTheThreeLaunches) {
  FT_REQUIRE_GPU();
  if (!bulk_copy_supported()) GTEST_SKIP() << "needs sm_90+";
  std::mt19937 rng(2026);
  // Qwen3-30B-A3B's experts (128 x 768, 8 used), the largest n_ff (8 x 16 blocks = one packed
  // item of 128), a small one with few ranks, one rank.
  for (const Case c : {Case{2048, 768, 128, 8}, Case{2048, 1024, 32, 8}, Case{2048, 256, 16, 4}, Case{2048, 512, 9, 1}})
    for (Round r : {Round::kNone, Round::kBF16, Round::kF16}) check_case(c, r, rng);
}

TEST(CudaMoeFusedDecode, RefusesWhatItDoesNotTake) {
  FT_REQUIRE_GPU();
  if (!bulk_copy_supported()) GTEST_SKIP() << "needs sm_90+";
  DeviceBuffer any(1 << 20);
  MoeFusedDecodeArgs f;
  f.w_gate = f.w_up = f.w_down = any.as<uint8_t>();
  f.n_embd = 2048;
  f.n_ff = 768;
  f.n_used = 8;
  f.gu_row_bytes = row_bytes(GgmlType::NVFP4, 2048);
  f.gu_expert_bytes = f.gu_row_bytes * 768;
  f.down_row_bytes = row_bytes(GgmlType::NVFP4, 768);
  f.down_expert_bytes = f.down_row_bytes * 2048;
  f.ids = any.as<int32_t>();
  f.slot_w = any.as<float>();
  f.xq = f.xq_mid = any.get();
  f.y = any.as<float>();
  f.sync = any.as<unsigned>();
  EXPECT_TRUE(moe_fused_decode_supported(f));
  auto refused = [&](auto change) {
    MoeFusedDecodeArgs g = f;
    change(g);
    return !moe_fused_decode_supported(g);
  };
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.n_embd = 4096; }));        // two slabs a row
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.n_embd = 1024; }));        // the pair is packed there
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.n_ff = 1280; }));          // 8 x 20 blocks > 128
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.n_used = 9; }));
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.gu_row_bytes += 16; }));   // padded rows
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.sync = nullptr; }));
  EXPECT_TRUE(refused([](MoeFusedDecodeArgs& g) { g.xq_mid = static_cast<uint8_t*>(g.xq_mid) + 4; }));
  MoeFusedDecodeArgs bad = f;
  bad.n_embd = 4096;
  EXPECT_THROW(moe_fused_decode(bad, nullptr), Error);
}

}  // namespace
}  // namespace ft::cuda
