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

// Dense: one token, row-major, the slab plan (forced where the plan has the mma kernel).
struct DenseCase {
  int64_t k, rows;
  bool force_slab, row_scale, accumulate, early;
  Round round;
};

std::vector<float> run_dense(const DenseCase& c, const DeviceBuffer& dw, const DeviceBuffer& dxq,
                             const DeviceBuffer& drs, const std::vector<float>& y0, bool lean) {
  gemv_set_nvfp4_lean_dense(lean);
  if (c.force_slab) gemv_set_nvfp4_override(1, 0, 0);
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
  // Qwen3-30B-A3B's wo (R 1, shared activations) and Llama-8B's (R 2), both into the residual with
  // its early read; R 4 (14336 rows, forced off the mma kernel); activations from global memory
  // (k 14336); a partial last slab and row group; rounding and a row scale.
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
  }
}

}  // namespace
}  // namespace ft::cuda
