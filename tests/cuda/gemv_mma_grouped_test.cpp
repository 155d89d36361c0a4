// The grouped tensor-core expert gate / up (cuda/gemv_mma_grouped.cu) against the dense tensor-core
// kernel it is built from (gemv_mma.cu at the same warps and stages) run on each slot's expert
// matrix with that expert's bank scale: every output bit (memcmp); with its routing in the launch
// (GemvArgs::route_logits) against moe_route first, and with its SwiGLU tail (GemvArgs::glu_xq)
// against swiglu_q8 on the dense outputs. The dense kernel's sums are checked against the scalar
// twin in gemv_test.cpp; a wrong expert, slot, half or bank column shows as a mismatch here.
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
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "cuda/glu.h"
#include "cuda/moe_route.h"

namespace ft::cuda {
namespace {

struct Case {
  int64_t k, rows, n_expert;
  int n_used, warps, stages;
  bool pair, route, glu, row_scale, early;
  Round round;
};

std::string describe(const Case& c) {
  return "k " + std::to_string(c.k) + " rows " + std::to_string(c.rows) + " experts " + std::to_string(c.n_expert) +
         " used " + std::to_string(c.n_used) + " warps " + std::to_string(c.warps) + " stages " +
         std::to_string(c.stages) + (c.pair ? " pair" : "") + (c.route ? " route" : "") + (c.glu ? " glu" : "") +
         (c.row_scale ? " row_scale" : "") + (c.early ? " early" : "") + (c.round == Round::kBF16 ? " bf16" : "");
}

void check(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t rb = row_bytes(GgmlType::NVFP4, c.k), eb = rb * c.rows, halves = c.pair ? 2 : 1;
  const DeviceBuffer dw = to_device(quant::testing::random_rows(GgmlType::NVFP4, halves * c.rows * c.n_expert, c.k, rng));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(c.k)), logits(static_cast<size_t>(c.n_expert)),
      bank(static_cast<size_t>(4 * c.n_expert)), rs(static_cast<size_t>(c.rows));
  for (auto& v : x) v = unit(rng);
  for (auto& v : logits) v = 4.0f * unit(rng);
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  for (auto& v : rs) v = 0.5f + 0.5f * (unit(rng) + 1.0f);
  std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(c.k, 1)));
  quantize_act_q8_row_ref(x.data(), c.k, xq.data());
  const DeviceBuffer dxq = to_device(xq), dlog = to_device(logits), dbank = to_device(bank), drs = to_device(rs);
  // The routing both sides use: moe_route's (the launch's own must equal it).
  DeviceBuffer dids_ref = to_device(std::vector<int32_t>(static_cast<size_t>(c.n_used), -1));
  DeviceBuffer dwts_ref = to_device(std::vector<float>(static_cast<size_t>(c.n_used), 0.0f));
  moe_route(dlog.as<float>(), c.n_expert, c.n_expert, 1, c.n_used, dids_ref.as<int32_t>(), dwts_ref.as<float>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> ids = to_host<int32_t>(dids_ref, static_cast<size_t>(c.n_used));
  const int64_t ldy = halves * c.rows, ny = ldy * c.n_used, qbytes = act_q8_bytes(c.rows, c.n_used);

  // Reference: the dense mma kernel on each slot's expert rows (gate, then up at +rows), then swiglu_q8.
  gemv_set_nvfp4_mma_experts(0, 0);
  gemv_set_nvfp4_override(3, 0, 0);
  gemv_set_nvfp4_mma(c.warps, c.stages);
  DeviceBuffer dy0 = to_device(std::vector<float>(static_cast<size_t>(ny), 0.0f));
  DeviceBuffer dh0 = to_device(std::vector<float>(static_cast<size_t>(c.rows * c.n_used), 0.0f));
  DeviceBuffer dq0 = to_device(std::vector<uint8_t>(static_cast<size_t>(qbytes), 0));
  const int64_t mma0 = gemv_nvfp4_mma_launches();
  for (int j = 0; j < c.n_used; ++j)
    for (int64_t hf = 0; hf < halves; ++hf) {
      const int64_t id = ids[static_cast<size_t>(j)];
      GemvArgs d;
      d.type = GgmlType::NVFP4;
      d.w = dw.as<uint8_t>() + hf * eb * c.n_expert + id * eb;
      d.row_bytes = rb;
      d.k = c.k;
      d.rows = c.rows;
      d.xq = dxq.get();
      d.n_tok = 1;
      d.y = dy0.as<float>() + j * ldy + hf * c.rows;
      d.ldy = c.rows;
      d.row_scale = c.row_scale ? drs.as<float>() : nullptr;
      d.scale = bank[static_cast<size_t>(id * 4 + hf)];
      d.round = c.round;
      gemv(d);
    }
  ASSERT_EQ(gemv_nvfp4_mma_launches() - mma0, c.n_used * halves) << "the reference left the dense mma kernel";
  if (c.glu) swiglu_q8(dy0.as<float>(), ldy, c.rows, c.n_used, dh0.as<float>(), c.rows, c.round, dq0.get(), nullptr);
  gemv_set_nvfp4_override(-1, 0, 0);
  gemv_set_nvfp4_mma(0, 0);

  // The grouped launch (twice with the SwiGLU tail: its counters re-arm).
  gemv_set_nvfp4_mma_experts(c.warps, c.stages);
  DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(c.n_used * c.rows / 32), 0u));
  for (int rep = 0; rep < (c.glu ? 2 : 1); ++rep) {
    DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(ny), compare_test::poison()));
    DeviceBuffer dh = to_device(std::vector<float>(static_cast<size_t>(c.rows * c.n_used), compare_test::poison()));
    DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qbytes), 0xA5));
    DeviceBuffer dids = c.route ? to_device(std::vector<int32_t>(static_cast<size_t>(c.n_used), -1)) : to_device(ids);
    DeviceBuffer dwts = to_device(std::vector<float>(static_cast<size_t>(c.n_used), 0.0f));
    GemvArgs g;
    g.type = GgmlType::NVFP4;
    g.w = dw.as<uint8_t>();
    g.row_bytes = rb;
    g.k = c.k;
    g.rows = c.rows;
    g.xq = dxq.get();
    g.n_tok = c.n_used;
    g.y = dy.as<float>();
    g.ldy = ldy;
    g.row_scale = c.row_scale ? drs.as<float>() : nullptr;
    g.round = c.round;
    g.ids = dids.as<int32_t>();
    g.ids_early = c.early;
    g.expert_bytes = eb;
    g.x_div = c.n_used;
    g.bank = dbank.as<float>();
    g.bank_col = 0;
    if (c.pair) g.w_pair = g.w + eb * c.n_expert, g.w_pair_y_off = c.rows;
    if (c.route) {
      g.route_logits = dlog.as<float>();
      g.route_n_expert = c.n_expert;
      g.route_ids = dids.as<int32_t>();
      g.route_w = dwts.as<float>();
    }
    if (c.glu) g.glu_xq = dq.get(), g.glu_h = dh.as<float>(), g.glu_count = dcount.as<unsigned>();
    const int64_t n0 = gemv_nvfp4_mma_grouped_launches();
    gemv(g);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(gemv_nvfp4_mma_grouped_launches() - n0, 1) << "the grouped kernel did not take the call";
    const std::vector<float> y0 = to_host<float>(dy0, static_cast<size_t>(ny)), y = to_host<float>(dy, static_cast<size_t>(ny));
    ASSERT_EQ(std::memcmp(y.data(), y0.data(), y0.size() * sizeof(float)), 0) << "outputs differ (rep " << rep << ")";
    if (c.route) {
      ASSERT_EQ(to_host<int32_t>(dids, static_cast<size_t>(c.n_used)), ids) << "routed ids differ";
      const std::vector<float> w0 = to_host<float>(dwts_ref, static_cast<size_t>(c.n_used)),
                               w1 = to_host<float>(dwts, static_cast<size_t>(c.n_used));
      ASSERT_EQ(std::memcmp(w1.data(), w0.data(), w0.size() * sizeof(float)), 0) << "routing weights differ";
    }
    if (c.glu) {
      const size_t nh = static_cast<size_t>(c.rows * c.n_used);
      const std::vector<float> h0 = to_host<float>(dh0, nh), h = to_host<float>(dh, nh);
      ASSERT_EQ(std::memcmp(h.data(), h0.data(), nh * sizeof(float)), 0) << "SwiGLU rows differ";
      ASSERT_EQ(to_host<uint8_t>(dq, static_cast<size_t>(qbytes)), to_host<uint8_t>(dq0, static_cast<size_t>(qbytes)))
          << "SwiGLU Q8 bytes differ";
      const std::vector<unsigned> cnt = to_host<unsigned>(dcount, static_cast<size_t>(c.n_used * c.rows / 32));
      for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "counter " << i << " left armed";
    }
  }
  gemv_set_nvfp4_mma_experts(0, 0);
}

TEST(CudaGemvMmaGrouped, EqualsTheDenseMmaKernelPerSlot) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(2407);
  const Round none = Round::kNone, bf16 = Round::kBF16;
  for (const Case& c : std::vector<Case>{
           // Qwen3-30B-A3B's gate|up pair, routed, with the SwiGLU tail, at each instance.
           {2048, 768, 128, 8, 4, 3, true, true, true, false, false, none},
           {2048, 768, 128, 8, 4, 2, true, true, true, false, false, bf16},
           {2048, 768, 128, 8, 8, 2, true, true, false, true, false, none},
           {2048, 768, 128, 8, 8, 3, true, true, true, false, false, none},
           // Given ids (the offload / hybrid backends' slots), read before the wait or after it.
           {2048, 768, 128, 8, 4, 3, true, false, false, true, true, none},
           {2048, 768, 128, 8, 4, 3, false, false, false, false, false, bf16},
           // A small expert: one step a warp and fewer.
           {512, 96, 16, 4, 4, 3, true, true, true, false, false, none},
       }) {
    check(c, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ft::cuda
