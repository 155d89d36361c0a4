// The lean NVFP4 kernels (cuda/gemv_nvfp4_lean.cu) against the slab / packed kernels they
// replace (gemv_set_nvfp4_experts(false), gemv_set_nvfp4_lean_dense(false)): every output bit
// (memcmp). Experts: the gate / up (one tensor and the gate|up pair) and the down projection's
// combine, over Qwen3-30B-A3B's shapes, a partial last slab (nb 36), two slabs, a partial last
// row group, several tokens, the epilogue's row scale, rounding, accumulation and the early ids /
// residual reads. Dense: the wo shapes of Qwen3-30B-A3B and Llama-8B (activations in shared
// memory), R = 1 / 2 / 4, activations from global memory (k > 8192), partial row groups, the
// early residual read. The slab and packed kernels' sums are checked against the scalar twin in
// gemv_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
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
#include "cuda/moe_route.h"

namespace ft::cuda {
namespace {

using compare_test::is_poison;
using compare_test::poison;

struct Case {
  int64_t k, rows, n_expert;
  int n_used;
  int64_t n_tok;
  bool combine, pair, row_scale, accumulate, early;
  Round round;
};

std::string describe(const Case& c) {
  return "k " + std::to_string(c.k) + " rows " + std::to_string(c.rows) + " experts " + std::to_string(c.n_expert) +
         " used " + std::to_string(c.n_used) + " tokens " + std::to_string(c.n_tok) + (c.combine ? " combine" : "") +
         (c.pair ? " pair" : "") + (c.row_scale ? " row_scale" : "") + (c.accumulate ? " acc" : "") +
         (c.early ? " early" : "") + (c.round == Round::kBF16 ? " bf16" : "");
}

// One call of the case with the lean kernels on or off; y (poisoned past the rows) back.
struct Data {
  int64_t rb, eb, n_slot, x_rows, ldy, out_rows;
  DeviceBuffer dw, dxq, dids, dbank, dslot_w, drs;
  std::vector<float> y0;
};

Data make_data(const Case& c, std::mt19937& rng) {
  Data d;
  d.rb = row_bytes(GgmlType::NVFP4, c.k);
  d.eb = d.rb * c.rows;
  d.n_slot = c.n_tok * c.n_used;
  const int64_t tensors = c.pair ? 2 : 1;
  d.dw = to_device(quant::testing::random_rows(GgmlType::NVFP4, c.rows * c.n_expert * tensors, c.k, rng));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  d.x_rows = c.combine ? d.n_slot : c.n_tok;  // down: a row per slot; gate / up: a row per token
  std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(c.k, d.x_rows)));
  std::vector<float> x(static_cast<size_t>(c.k));
  for (int64_t r = 0; r < d.x_rows; ++r) {
    for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
    quantize_act_q8_row_ref(x.data(), c.k, xq.data() + r * act_q8_row_bytes(c.k));
  }
  d.dxq = to_device(xq);
  std::vector<int32_t> ids(static_cast<size_t>(d.n_slot));
  for (auto& e : ids) e = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_expert));
  d.dids = to_device(ids);
  std::vector<float> bank(static_cast<size_t>(c.n_expert * 4)), slot_w(static_cast<size_t>(d.n_slot)),
      rs(static_cast<size_t>(c.rows));
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  for (auto& v : slot_w) v = 0.05f + 0.5f * (unit(rng) + 1.0f);
  for (auto& v : rs) v = 0.5f + 0.25f * unit(rng);
  d.dbank = to_device(bank), d.dslot_w = to_device(slot_w), d.drs = to_device(rs);
  d.out_rows = c.combine ? c.n_tok : d.n_slot;
  d.ldy = (c.pair ? 2 * c.rows : c.rows) + 3;
  d.y0.assign(static_cast<size_t>(d.ldy * d.out_rows), poison());
  if (c.accumulate)
    for (int64_t t = 0; t < d.out_rows; ++t)
      for (int64_t r = 0; r < (c.pair ? 2 : 1) * c.rows; ++r) d.y0[static_cast<size_t>(t * d.ldy + r)] = unit(rng);
  return d;
}

std::vector<float> run(const Case& c, const Data& d, bool lean) {
  gemv_set_nvfp4_experts(lean);
  DeviceBuffer dy = to_device(d.y0);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = d.dw.as<uint8_t>();
  g.row_bytes = d.rb;
  g.k = c.k;
  g.rows = c.rows;
  g.xq = d.dxq.get();
  g.n_tok = d.n_slot;
  g.y = dy.as<float>();
  g.ldy = d.ldy;
  g.round = c.round;
  g.ids = d.dids.as<int32_t>();
  g.expert_bytes = d.eb;
  g.x_div = c.combine ? 1 : c.n_used;
  g.bank = d.dbank.as<float>();
  g.bank_col = 1;
  g.row_scale = c.row_scale ? d.drs.as<float>() : nullptr;
  g.scale = c.row_scale ? 0.75f : 1.0f;
  g.accumulate = c.accumulate;
  g.ids_early = c.early;
  g.y_early = c.early && c.accumulate;
  if (c.combine) {
    g.slot_w = d.dslot_w.as<float>();
    g.n_used = c.n_used;
  }
  if (c.pair) {
    g.w_pair = g.w + d.eb * c.n_expert;
    g.w_pair_y_off = c.rows;
  }
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  gemv_set_nvfp4_experts(true);
  return to_host<float>(dy, d.y0.size());
}

// The lean kernel ran (launch count) and wrote what the slab / packed kernel wrote, bit for bit.
void check(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const Data d = make_data(c, rng);
  const auto want = run(c, d, false);
  const int64_t n0 = gemv_nvfp4_experts_launches();
  const auto got = run(c, d, true);
  ASSERT_EQ(gemv_nvfp4_experts_launches(), n0 + 1) << "the lean expert kernel did not take the launch";
  const int64_t width = (c.pair ? 2 : 1) * c.rows;
  for (int64_t t = 0; t < d.out_rows; ++t) {
    for (int64_t r = 0; r < width; ++r)
      ASSERT_FALSE(is_poison(got[static_cast<size_t>(t * d.ldy + r)])) << "out " << t << " row " << r << " not written";
    for (int64_t r = width; r < d.ldy; ++r)
      ASSERT_TRUE(is_poison(got[static_cast<size_t>(t * d.ldy + r)])) << "out " << t << " wrote row " << r;
  }
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "differs from the slab / packed kernel at out " << i / static_cast<size_t>(d.ldy) << " row "
        << i % static_cast<size_t>(d.ldy) << ": " << got[i] << " vs " << want[i];
}

TEST(CudaGemvLean, ExpertGateUpEqualsSlabKernelBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2101);
  const Round n = Round::kNone, b = Round::kBF16;
  // Qwen3-30B-A3B's gate|up pair and one tensor; a partial last slab (nb 36) and row group (770
  // rows); two slabs; several tokens (more items than one wave at 40 tokens); the epilogue's
  // variants.
  for (const Case& c : {Case{2048, 768, 128, 8, 1, false, true, false, false, false, n},
                        Case{2048, 768, 128, 8, 1, false, false, false, false, false, n},
                        Case{2304, 770, 16, 8, 1, false, true, true, false, false, b},
                        Case{4096, 96, 9, 3, 5, false, true, false, true, true, n},
                        Case{2048, 1000, 64, 8, 40, false, true, false, false, false, n},
                        Case{3072, 33, 7, 2, 3, false, false, true, true, false, b}}) {
    check(c, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaGemvLean, ExpertDownCombineEqualsPackedKernelBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2102);
  const Round n = Round::kNone, b = Round::kBF16;
  // Qwen3-30B-A3B's down + combine into the residual (accumulate, early ids and residual), nb 8
  // and 16, several tokens, no accumulation, rounding, a row scale.
  for (const Case& c : {Case{768, 2048, 128, 8, 1, true, false, false, true, true, n},
                        Case{768, 2048, 128, 8, 1, true, false, false, true, false, n},
                        Case{512, 300, 32, 8, 3, true, false, true, false, false, b},
                        Case{1024, 129, 16, 8, 7, true, false, false, true, true, b},
                        Case{768, 4096, 128, 8, 2, true, false, false, false, true, n}}) {
    check(c, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// GemvArgs::route_logits: the expert gate|up pair routing one token's logits in its own launch
// writes the ids, weights and outputs that moe_route followed by the plain pair writes, bit for
// bit; with n_expert past the warp route (300) and off the lean kernel, the call routes by
// moe_route itself. Ties in the top k (the warp route's sort fallback) included. k 2048 (one slab)
// takes the instances holding the activations in registers, k 4096 the ones reading them per step.
void check_route(int64_t n_expert, int n_used, bool ties, bool lean, std::mt19937& rng, int64_t k = 2048) {
  SCOPED_TRACE("experts " + std::to_string(n_expert) + " used " + std::to_string(n_used) + (ties ? " ties" : "") +
               (lean ? "" : " lean off") + " k " + std::to_string(k));
  const int64_t rows = 768, rb = row_bytes(GgmlType::NVFP4, k), eb = rb * rows;
  const DeviceBuffer dw = to_device(quant::testing::random_rows(GgmlType::NVFP4, 2 * rows * n_expert, k, rng));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k)), logits(static_cast<size_t>(n_expert)),
      bank(static_cast<size_t>(4 * n_expert));
  for (auto& v : x) v = unit(rng);
  for (auto& v : logits) v = 4.0f * unit(rng);
  if (ties)  // the largest logit three times: a tie inside the top k
    for (int64_t e : {int64_t{3}, int64_t{17}, n_expert - 1}) logits[static_cast<size_t>(e)] = 9.5f;
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(k, 1)));
  quantize_act_q8_row_ref(x.data(), k, xq.data());
  const DeviceBuffer dxq = to_device(xq), dlog = to_device(logits), dbank = to_device(bank);
  const int64_t ldy = 2 * rows;
  auto run_pair = [&](bool in_launch, std::vector<float>& y, std::vector<int32_t>& ids, std::vector<float>& wts) {
    DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(ldy * n_used), poison()));
    DeviceBuffer dids = to_device(std::vector<int32_t>(static_cast<size_t>(n_used), -1));
    DeviceBuffer dwts = to_device(std::vector<float>(static_cast<size_t>(n_used), poison()));
    if (!in_launch)
      moe_route(dlog.as<float>(), n_expert, n_expert, 1, n_used, dids.as<int32_t>(), dwts.as<float>(), nullptr);
    gemv_set_nvfp4_experts(lean);
    GemvArgs g;
    g.type = GgmlType::NVFP4;
    g.w = dw.as<uint8_t>();
    g.row_bytes = rb;
    g.k = k;
    g.rows = rows;
    g.xq = dxq.get();
    g.n_tok = n_used;
    g.y = dy.as<float>();
    g.ldy = ldy;
    g.ids = dids.as<int32_t>();
    g.expert_bytes = eb;
    g.x_div = n_used;
    g.bank = dbank.as<float>();
    g.bank_col = 0;
    g.w_pair = g.w + eb * n_expert;
    g.w_pair_y_off = rows;
    if (in_launch) {
      g.route_logits = dlog.as<float>();
      g.route_n_expert = n_expert;
      g.route_ids = dids.as<int32_t>();
      g.route_w = dwts.as<float>();
    }
    gemv(g);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    gemv_set_nvfp4_experts(true);
    y = to_host<float>(dy, static_cast<size_t>(ldy * n_used));
    ids = to_host<int32_t>(dids, static_cast<size_t>(n_used));
    wts = to_host<float>(dwts, static_cast<size_t>(n_used));
  };
  std::vector<float> y0, y1, w0, w1;
  std::vector<int32_t> i0, i1;
  run_pair(false, y0, i0, w0);
  const int64_t n0 = gemv_nvfp4_experts_launches(), r0 = gemv_nvfp4_route_launches();
  run_pair(true, y1, i1, w1);
  const bool in_kernel = lean && n_expert <= 256;
  EXPECT_EQ(gemv_nvfp4_experts_launches() - n0, lean ? 1 : 0) << "the pair took the wrong kernel";
  EXPECT_EQ(gemv_nvfp4_route_launches() - r0, in_kernel ? 1 : 0) << "the routing took the wrong path";
  for (int j = 0; j < n_used; ++j) ASSERT_GE(i0[static_cast<size_t>(j)], 0) << "moe_route left rank " << j;
  ASSERT_EQ(i1, i0) << "routed ids differ";
  ASSERT_EQ(std::memcmp(w1.data(), w0.data(), w0.size() * sizeof(float)), 0) << "routing weights differ";
  for (size_t i = 0; i < y0.size(); ++i) ASSERT_FALSE(is_poison(y1[i])) << "output " << i << " not written";
  ASSERT_EQ(std::memcmp(y1.data(), y0.data(), y0.size() * sizeof(float)), 0) << "outputs differ";
}

TEST(CudaGemvLean, RoutingInTheLaunchEqualsMoeRouteFirst) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2104);
  check_route(128, 8, false, true, rng);  // Qwen3-30B-A3B
  if (::testing::Test::HasFatalFailure()) return;
  check_route(128, 8, true, true, rng);
  if (::testing::Test::HasFatalFailure()) return;
  check_route(256, 8, false, true, rng);
  if (::testing::Test::HasFatalFailure()) return;
  check_route(300, 8, false, true, rng);  // past the warp route: moe_route inside the call
  if (::testing::Test::HasFatalFailure()) return;
  check_route(128, 8, false, false, rng);  // the slab kernel: moe_route inside the call
  if (::testing::Test::HasFatalFailure()) return;
  check_route(128, 8, false, true, rng, 4096);  // two slabs: activations read per step
}

// Dense: one token, row-major, the slab plan (forced where the plan has the mma kernel).
struct DenseCase {
  int64_t k, rows;
  bool force_slab, row_scale, accumulate, early;
  Round round;
};

std::vector<float> run_dense(const DenseCase& c, const DeviceBuffer& dw, const DeviceBuffer& dxq,
                             const DeviceBuffer& drs, const std::vector<float>& y0, bool lean, int x_smem = 0,
                             const L2Ahead& ahead = L2Ahead{}) {
  gemv_set_nvfp4_lean_dense(lean);
  if (c.force_slab || x_smem != 0) gemv_set_nvfp4_override(c.force_slab ? 1 : -1, 0, x_smem);
  DeviceBuffer dy = to_device(y0);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = dw.as<uint8_t>();
  g.row_bytes = row_bytes(GgmlType::NVFP4, c.k);
  g.k = c.k;
  g.rows = c.rows;
  g.xq = dxq.get();
  g.n_tok = 1;
  g.y = dy.as<float>();
  g.ldy = c.rows;
  g.round = c.round;
  g.row_scale = c.row_scale ? drs.as<float>() : nullptr;
  g.scale = c.row_scale ? 0.75f : 1.0f;
  g.accumulate = c.accumulate;
  g.y_early = c.early && c.accumulate;
  g.l2_ahead = ahead;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  gemv_set_nvfp4_lean_dense(true);
  gemv_set_nvfp4_override(-1, 0, 0);
  return to_host<float>(dy, y0.size());
}

TEST(CudaGemvLean, DenseEqualsSlabKernelBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2103);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const Round n = Round::kNone, b = Round::kBF16;
  // Qwen3-30B-A3B's wo (R 1) and Llama-8B's (R 2), both into the residual with its early read; R 4
  // (14336 rows, forced off the mma kernel); k 14336; a partial last slab and row group; rounding
  // and a row scale. The lean launches read their activations from global memory (the default)
  // and, where they fit (k <= 8192), from shared memory (gemv_set_nvfp4_override's x_smem 2).
  for (const DenseCase& c : {DenseCase{4096, 2048, false, false, true, true, n},
                             DenseCase{4096, 4096, false, false, true, true, n},
                             DenseCase{4096, 14336, true, true, false, false, b},
                             DenseCase{14336, 4096, true, false, true, true, n},
                             DenseCase{2304, 45, false, true, true, false, b},
                             DenseCase{1024, 3001, false, false, false, false, n}}) {
    SCOPED_TRACE("k " + std::to_string(c.k) + " rows " + std::to_string(c.rows) + (c.force_slab ? " slab" : "") +
                 (c.accumulate ? " acc" : "") + (c.early ? " early" : ""));
    const DeviceBuffer dw = to_device(quant::testing::random_rows(GgmlType::NVFP4, c.rows, c.k, rng));
    std::vector<float> x(static_cast<size_t>(c.k)), rs(static_cast<size_t>(c.rows)), y0(static_cast<size_t>(c.rows + 5), poison());
    for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
    for (auto& v : rs) v = 0.5f + 0.25f * unit(rng);
    if (c.accumulate)
      for (int64_t r = 0; r < c.rows; ++r) y0[static_cast<size_t>(r)] = unit(rng);
    std::vector<uint8_t> xq(static_cast<size_t>(act_q8_bytes(c.k, 1)));
    quantize_act_q8_row_ref(x.data(), c.k, xq.data());
    const DeviceBuffer dxq = to_device(xq), drs = to_device(rs);
    const auto want = run_dense(c, dw, dxq, drs, y0, false);
    const int64_t n0 = gemv_nvfp4_lean_dense_launches();
    const auto got = run_dense(c, dw, dxq, drs, y0, true);
    ASSERT_EQ(gemv_nvfp4_lean_dense_launches(), n0 + 1) << "the lean slab kernel did not take the launch";
    for (int64_t r = 0; r < c.rows; ++r) ASSERT_FALSE(is_poison(got[static_cast<size_t>(r)])) << "row " << r << " not written";
    for (int64_t r = c.rows; r < c.rows + 5; ++r) ASSERT_TRUE(is_poison(got[static_cast<size_t>(r)])) << "wrote row " << r;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << "differs from the slab kernel at row " << i << ": " << got[i] << " vs " << want[i];
    // The L2-ahead instances (GemvArgs::l2_ahead, the launch's CTAs prefetching shares of two ranges --
    // here the weights themselves, one range odd-sized): hints only, the same bits.
    if (!c.force_slab) {
      L2Ahead ahead;
      ahead.p[0] = dw.get();
      ahead.bytes[0] = row_bytes(GgmlType::NVFP4, c.k) * c.rows / 2 + 40;
      ahead.p[1] = static_cast<const uint8_t*>(dw.get()) + row_bytes(GgmlType::NVFP4, c.k) * (c.rows / 2);
      ahead.bytes[1] = row_bytes(GgmlType::NVFP4, c.k) * (c.rows - c.rows / 2);
      const int64_t n1 = gemv_nvfp4_l2_ahead_launches();
      const auto got_pf = run_dense(c, dw, dxq, drs, y0, true, 0, ahead);
      ASSERT_EQ(gemv_nvfp4_l2_ahead_launches(), n1 + 1) << "the L2-ahead instance did not take the launch";
      for (size_t i = 0; i < got_pf.size(); ++i)
        ASSERT_EQ(std::memcmp(&got_pf[i], &want[i], sizeof(float)), 0) << "L2 ahead: differs at row " << i;
    }
    if (c.k > 8192) continue;
    const int64_t n2 = gemv_nvfp4_lean_dense_launches();
    const auto got_xs = run_dense(c, dw, dxq, drs, y0, true, 2);
    ASSERT_EQ(gemv_nvfp4_lean_dense_launches(), n2 + 1) << "the lean slab kernel did not take the launch (x_smem 2)";
    for (size_t i = 0; i < got_xs.size(); ++i)
      ASSERT_EQ(std::memcmp(&got_xs[i], &want[i], sizeof(float)), 0)
          << "activations in shared memory: differs from the slab kernel at row " << i;
  }
}

// The lean kernels' launch bounds (gemv_tuning.h) on the plans of the shapes they were measured on:
// the wo of Llama-8B (R 2) and Qwen3-30B-A3B (R 1) at 8 blocks an SM, the routed expert pair of
// Qwen3-30B-A3B (768x2048 x 8, R 2) at 4; other plans keep their bound. Host only.
TEST(CudaGemvLean, LaunchBoundsOfThePlans) {
  const GemvNvfp4Plan llama_wo = gemv_nvfp4_plan(4096, 4096, 1, 1, 1, false);
  const GemvNvfp4Plan qwen_wo = gemv_nvfp4_plan(2048, 4096, 1, 1, 1, false);
  EXPECT_EQ(llama_wo.rows, 2);
  EXPECT_EQ(qwen_wo.rows, 1);
  EXPECT_EQ(gemv_nvfp4_lean_dense_minb(llama_wo), 8);
  EXPECT_EQ(gemv_nvfp4_lean_dense_minb(qwen_wo), 8);
  GemvNvfp4Plan r4 = llama_wo;
  r4.rows = 4;
  EXPECT_EQ(gemv_nvfp4_lean_dense_minb(r4), 4);
  const GemvNvfp4Plan pair = gemv_nvfp4_plan(768, 2048, 1, 8, 1, true);
  EXPECT_EQ(pair.rows, 2);
  EXPECT_EQ(pair.minb, 6);
  EXPECT_EQ(gemv_nvfp4_lean_routed_minb(true, pair), 4);
  EXPECT_EQ(gemv_nvfp4_lean_routed_minb(false, pair), 6);  // rows of several slabs keep the plan's
}

}  // namespace
}  // namespace ft::cuda
