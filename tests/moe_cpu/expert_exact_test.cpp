// Exact mode (ExpertNumerics::gpu_plan): the executor -- grouped by expert, threaded, row
// chunks -- against expert_exec_gpu_ref, the route-by-route scalar mirror of the GPU decode
// order, bit for bit; the mirror's pieces (lane tree, Q8 activations) against independent
// definitions; and the mirror's sums against exact (double) dot products. The GPU itself is
// compared in tests/cuda/moe_cpu_test.cpp (MoeCpuExact).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../engine/test_util.h"
#include "core/fp16.h"
#include "moe_cpu/expert_exec.h"
#include "moe_cpu/gpu_dot.h"
#include "quant/act_quant.h"
#include "quant/dequant.h"

namespace ft::moe_cpu {
namespace {

using engine::ActType;

// A plan with the GPU's shape dependence (gemv_tuning.h): NVFP4 packed below 32 blocks when
// the pieces fit, slab otherwise; the generic kernel's lanes fall with more out rows.
int g_lanes = 0;  // 0: by n_out
GpuDotPlan test_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_out, int n_sub, bool q8) {
  (void)rows;
  if (!q8) return {GpuDot::kFloat, 32};
  if (type == GgmlType::NVFP4) {
    const int64_t nb = k / 64;
    return {nb < 32 && nb * n_sub <= 128 ? GpuDot::kNvfp4Packed : GpuDot::kNvfp4Slab, 32};
  }
  return {GpuDot::kQ8Generic, g_lanes ? g_lanes : (n_out > 4 ? 8 : 32)};
}

struct Layer {
  std::vector<uint8_t> store[3];
  std::vector<float> scales[3];
  engine::ExpertWeights w;
  std::vector<float> bank;
  HostExperts h;
};

void make_layer(Layer& L, GgmlType t, int64_t E, int64_t n_embd, int64_t n_ff, bool scales) {
  auto& w = L.w;
  w.n_expert = E;
  w.n_embd = n_embd;
  w.n_ff = n_ff;
  w.gate.w = test::make_weight(t, n_embd, n_ff, E, 31, L.store[0]);
  w.up.w = test::make_weight(t, n_embd, n_ff, E, 32, L.store[1]);
  w.down.w = test::make_weight(t, n_ff, n_embd, E, 33, L.store[2]);
  if (scales) {
    for (int i = 0; i < 3; ++i) {
      L.scales[i].resize(E);
      for (int64_t e = 0; e < E; ++e) L.scales[i][e] = std::pow(10.0f, -1.0f - (e + i) % 3);
    }
    w.gate.scale = L.scales[0].data();
    w.up.scale = L.scales[1].data();
    w.down.scale = L.scales[2].data();
  }
  L.h = host_experts_of(w, L.bank);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  GgmlType type;
  int64_t n_embd, n_ff;
};

class ExpertExact : public ::testing::TestWithParam<Case> {};

// The executor in exact mode equals the scalar mirror bit for bit: Q8 activations (the
// GPU's --dtype auto) and fp32 (float32), fp32 and bf16 rounding, 1 and 5 tokens, combined
// and per-route outputs, a skipped route; and it is not the engine's order (the rows
// differ somewhere from the non-exact run, so the test would notice exact mode switched off).
TEST_P(ExpertExact, ExecutorMatchesMirrorBits) {
  const Case c = GetParam();
  const int64_t E = 6;
  const int n_used = 3;
  Layer L;
  make_layer(L, c.type, E, c.n_embd, c.n_ff, c.type == GgmlType::NVFP4);
  ThreadPool pool(3);
  ExpertExecutor exec(pool);
  int differs_from_engine = 0;
  for (int64_t n_tok : {1, 3}) {
    const auto x = test::randn(n_tok * c.n_embd, 70 + n_tok);
    std::vector<int32_t> ids;
    std::vector<float> wts;
    for (int64_t t = 0; t < n_tok; ++t)
      for (int r = 0; r < n_used; ++r) {
        ids.push_back(t == 1 && r == 1 ? -1 : static_cast<int32_t>((t * 5 + r * 3) % E));
        wts.push_back(1.0f / (r + 2));
      }
    for (auto aq : {quant::ActQuant::kQ8, quant::ActQuant::kNone})
      for (auto act : {ActType::kF32, ActType::kBF16})
        for (bool slot_out : {false, true}) {
          ExpertNumerics num{act, aq};
          num.q8_quantised_only = true;
          num.gpu_plan = test_plan;
          num.slot_out = slot_out;
          ASSERT_TRUE(exact_supported(L.h, num));
          const int64_t n_rows = slot_out ? n_tok * n_used : n_tok;
          std::vector<float> out(n_rows * c.n_embd, 7.0f), ref(n_rows * c.n_embd, -7.0f);
          exec.run(L.h, num, x.data(), c.n_embd, n_tok, ids.data(), wts.data(), n_used, out.data(), c.n_embd);
          expert_exec_gpu_ref(L.h, num, x.data(), c.n_embd, n_tok, ids.data(), wts.data(), n_used, ref.data(),
                              c.n_embd);
          ASSERT_GT(test::max_abs(ref), 0.0f);
          {  // the flow schedule (one loop, per-expert readiness) on a fresh executor
            ExpertExecutor flow(pool);
            flow.set_schedule(RowSchedule::kFlow);
            std::vector<float> fo(out.size(), 5.0f);
            flow.run(L.h, num, x.data(), c.n_embd, n_tok, ids.data(), wts.data(), n_used, fo.data(), c.n_embd);
            EXPECT_TRUE(same_bits(fo, ref)) << "flow " << type_name(c.type) << " n_tok " << n_tok << " slot_out "
                                            << slot_out << " max diff " << test::max_abs_diff(fo, ref);
          }
          EXPECT_TRUE(same_bits(out, ref)) << type_name(c.type) << " n_tok " << n_tok << " q8 "
                                           << (aq == quant::ActQuant::kQ8) << " bf16 " << (act == ActType::kBF16)
                                           << " slot_out " << slot_out << " max diff "
                                           << test::max_abs_diff(out, ref);
          if (slot_out) {  // the skipped route's row is zero
            if (n_tok > 1) {
              for (int64_t i = 0; i < c.n_embd; ++i) ASSERT_EQ(out[(1 * n_used + 1) * c.n_embd + i], 0.0f);
            }
            continue;
          }
          num.gpu_plan = nullptr;
          std::vector<float> eng(out.size());
          exec.run(L.h, num, x.data(), c.n_embd, n_tok, ids.data(), wts.data(), n_used, eng.data(), c.n_embd);
          // Same math up to order: close, though not equal everywhere (bf16: a rounding moved
          // by one ulp is 2^-8 relative, and it reaches the output through h).
          const float tol = act == ActType::kBF16 ? 5e-2f : aq == quant::ActQuant::kQ8 ? 2e-2f : 1e-3f;
          EXPECT_LT(test::max_abs_diff(out, eng), tol * test::max_abs(eng))
              << type_name(c.type) << " n_tok " << n_tok << " q8 " << (aq == quant::ActQuant::kQ8) << " bf16 "
              << (act == ActType::kBF16);
          differs_from_engine += same_bits(out, eng) ? 0 : 1;
        }
  }
  // Float weights with fp32 activations may agree with the engine's order by chance; the
  // quantised ones (Q8 activations, other block sums) must not agree everywhere.
  if (c.type != GgmlType::BF16 && c.type != GgmlType::F16 && c.type != GgmlType::F32) {
    EXPECT_GT(differs_from_engine, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ExpertExact,
                         ::testing::Values(Case{GgmlType::NVFP4, 128, 64}, Case{GgmlType::NVFP4, 2048, 64},
                                           Case{GgmlType::Q8_0, 256, 128}, Case{GgmlType::MXFP4, 64, 2048},
                                           Case{GgmlType::BF16, 128, 64}, Case{GgmlType::F16, 1024 + 64, 32},
                                           Case{GgmlType::F32, 64, 96}),
                         [](const auto& info) {
                           return std::string(type_name(info.param.type)) + "_" + std::to_string(info.param.n_embd) +
                                  "x" + std::to_string(info.param.n_ff);
                         });

// The A/B knobs change who computes which rows and what is prefetched, never a bit: every
// (row schedule, prefetch mode) pair (flow: phases merged, per-expert readiness), on a fresh
// executor each (a row left out would stay zero), equals the scalar mirror; the layer has enough experts and rows that guided takes
// cross experts (12 groups of 16 rows per expert tensor, 2 to 5 threads).
TEST(ExpertExactKnobs, ScheduleAndPrefetchKeepTheBits) {
  const int64_t E = 12, n_embd = 192, n_ff = 192, n_tok = 2;
  const int n_used = 6;
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::BF16}) {
    Layer L;
    make_layer(L, t, E, n_embd, n_ff, true);
    const auto x = test::randn(n_tok * n_embd, 41);
    std::vector<int32_t> ids;
    std::vector<float> wts;
    for (int64_t tk = 0; tk < n_tok; ++tk)
      for (int r = 0; r < n_used; ++r) {
        ids.push_back(static_cast<int32_t>((tk * 7 + r * 5) % E));
        wts.push_back(1.0f / (r + 2));
      }
    ExpertNumerics num{ActType::kF32, quant::ActQuant::kQ8};
    num.q8_quantised_only = true;
    num.gpu_plan = test_plan;
    std::vector<float> ref(n_tok * n_embd);
    expert_exec_gpu_ref(L.h, num, x.data(), n_embd, n_tok, ids.data(), wts.data(), n_used, ref.data(), n_embd);
    ASSERT_GT(test::max_abs(ref), 0.0f);
    for (RowSchedule sched : {RowSchedule::kItems, RowSchedule::kGuided, RowSchedule::kFlow})
      for (detail::Prefetch pf : {detail::Prefetch::kNext, detail::Prefetch::kNext2, detail::Prefetch::kNext128,
                                  detail::Prefetch::kRow, detail::Prefetch::kNone}) {
        detail::gpu_dot_set_prefetch(pf);
        for (int threads : {2, 5}) {
          ThreadPool pool(threads);
          ExpertExecutor exec(pool);
          exec.set_schedule(sched);
          std::vector<float> out(n_tok * n_embd, 3.0f);
          exec.run(L.h, num, x.data(), n_embd, n_tok, ids.data(), wts.data(), n_used, out.data(), n_embd);
          EXPECT_TRUE(same_bits(out, ref)) << type_name(t) << " schedule " << static_cast<int>(sched) << " prefetch "
                                           << static_cast<int>(pf) << " threads " << threads << " max diff "
                                           << test::max_abs_diff(out, ref);
        }
      }
    detail::gpu_dot_set_prefetch(detail::Prefetch::kNext);
  }
}

// The cpu backend's warm-up (prefetch_next, then run): whatever the guess -- right, half
// right, wrong, with repeats and -1, cut short by the stop flag, meant for another layer --
// every gate|up item runs exactly once, so the bits are the mirror's; right guesses are
// counted, and their items are taken by their owners.
TEST(ExpertExactWarmUp, GuessesKeepTheBits) {
  const int64_t E = 12, n_embd = 192, n_ff = 192;
  const int n_used = 6;
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::BF16}) {
    Layer L, other;
    make_layer(L, t, E, n_embd, n_ff, true);
    make_layer(other, t, E, n_embd, n_ff, true);
    const auto x = test::randn(n_embd, 43);
    const std::vector<int32_t> ids = {3, 7, 0, 11, 5, 8};
    const std::vector<float> wts = {0.3f, 0.2f, 0.15f, 0.15f, 0.1f, 0.1f};
    ExpertNumerics num{ActType::kF32, quant::ActQuant::kQ8};
    num.q8_quantised_only = true;
    num.gpu_plan = test_plan;
    std::vector<float> ref(n_embd);
    expert_exec_gpu_ref(L.h, num, x.data(), n_embd, 1, ids.data(), wts.data(), n_used, ref.data(), n_embd);
    ASSERT_GT(test::max_abs(ref), 0.0f);
    struct Guess {
      const char* what;
      std::vector<int32_t> g;
      int right;
    };
    const std::vector<Guess> guesses = {{"right", ids, 6},
                                        {"half right", {7, 1, 3, 2, 4, 5}, 3},
                                        {"wrong", {1, 2, 4, 6, 9, 10}, 0},
                                        {"repeats and -1", {7, -1, 7, 3, -1, 3}, 2}};
    for (int threads : {2, 5})
      for (const Guess& gs : guesses)
        for (int mode = 0; mode < 3; ++mode) {  // 0: as is, 1: stop already raised, 2: for another layer
          ThreadPool pool(threads);
          ExpertExecutor exec(pool);
          exec.set_schedule(RowSchedule::kFlow);
          const uint32_t stop = mode == 1 ? 1u : 0u;
          exec.prefetch_next(mode == 2 ? other.h : L.h, num, gs.g.data(), static_cast<int>(gs.g.size()), 1 << 20, &stop);
          std::vector<float> out(n_embd, 3.0f);
          exec.run(L.h, num, x.data(), n_embd, 1, ids.data(), wts.data(), n_used, out.data(), n_embd);
          const std::string at = std::string(type_name(t)) + " " + gs.what + " mode " + std::to_string(mode) +
                                 " threads " + std::to_string(threads);
          EXPECT_TRUE(same_bits(out, ref)) << at << " max diff " << test::max_abs_diff(out, ref);
          const auto w = exec.warm_stats();
          EXPECT_EQ(w.used, mode == 2 ? 0 : gs.right) << at;
          if (mode != 2 && gs.right > 0) {
            EXPECT_GT(w.items, 0) << at;
            EXPECT_LE(w.items_owner, w.items) << at;
          }
          // The hint serves one run: a second run on L computes the same without one.
          std::vector<float> again(n_embd, 5.0f);
          exec.run(L.h, num, x.data(), n_embd, 1, ids.data(), wts.data(), n_used, again.data(), n_embd);
          EXPECT_TRUE(same_bits(again, ref)) << at;
          EXPECT_EQ(exec.warm_stats().used, w.used) << at;
        }
  }
}

// The lane tree is the xor shuffle's: for 4 lanes (v0 + v2) + (v1 + v3).
TEST(GpuDot, LaneTreeIsTheShuffleTree) {
  float v[4] = {1e8f, 1.0f, -1e8f, 1.0f};
  EXPECT_EQ(gpu_lane_tree(v, 4), (1e8f + -1e8f) + (1.0f + 1.0f));
  float w[8] = {1.0f, 1e8f, 1.0f, 0.0f, 1.0f, -1e8f, 1.0f, 0.0f};
  // Offsets 4, 2, 1: ((w0+w4) + (w2+w6)) + ((w1+w5) + (w3+w7)) = 4, where a left-to-right
  // sum gives 1e8 + ... - 1e8 + ... = 2.
  EXPECT_EQ(gpu_lane_tree(w, 8), 4.0f);
}

// The GPU's Q8 activations are the CPU q8 route's Q8_0 blocks (same d, same codes).
TEST(GpuDot, ActQ8IsTheCpuQ8_0) {
  const int64_t k = 256;
  auto x = test::randn(k, 5);
  x[3] = 0.5f * x[0];  // ties in x * id are rounded half to even by both
  std::vector<int8_t> qs(k);
  std::vector<float> d(k / 32);
  gpu_quantize_act_q8(x.data(), k, qs.data(), d.data());
  std::vector<quant::BlockQ8_0> b(k / 32);
  quant::quantize_q8_0_ref(x.data(), b.data(), k);
  for (int64_t j = 0; j < k / 32; ++j) {
    EXPECT_EQ(d[j], f16_to_f32(b[j].d));
    for (int i = 0; i < 32; ++i) EXPECT_EQ(qs[32 * j + i], b[j].qs[i]);
  }
}

// Each mirrored sum is the dot product of the dequantised row with the (Q8-rounded)
// activations up to fp32 rounding, whatever the lanes or kernel; and the orders really
// differ (some rows change bits between lane counts), so the plan matters.
TEST(GpuDot, SumsAreTheDotProductInTheirOrders) {
  const int64_t rows = 32;
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::BF16}) {
    const int64_t k = t == GgmlType::NVFP4 ? 4096 : 2048;
    std::vector<uint8_t> store;
    const auto w = test::make_weight(t, k, rows, 1, 9, store);
    const auto x = test::randn(k, 10);
    std::vector<int8_t> qs(k);
    std::vector<float> d(k / 32), xr(k), wr(k);
    gpu_quantize_act_q8(x.data(), k, qs.data(), d.data());
    const bool q8 = gpu_dot_q8_supported(t);
    for (int64_t i = 0; i < k; ++i) xr[i] = q8 ? d[i / 32] * qs[i] : x[i];
    int changed = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = w.data + r * w.row_bytes();
      quant::dequantize_row_ref(t, row, wr.data(), k);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) exact += double(wr[i]) * xr[i], mag += std::fabs(double(wr[i]) * xr[i]);
      std::vector<float> got;
      if (q8) {
        for (GpuDotPlan p : {GpuDotPlan{GpuDot::kQ8Generic, 4}, GpuDotPlan{GpuDot::kQ8Generic, 32},
                             GpuDotPlan{GpuDot::kNvfp4Slab, 32}, GpuDotPlan{GpuDot::kNvfp4Packed, 32}})
          got.push_back(gpu_dot_q8(p, t, row, GpuActQ8{qs.data(), d.data()}, k));
      }
      got.push_back(gpu_dot_float(t, row, x.data(), k));
      for (size_t j = 0; j < got.size(); ++j) {
        const double ref = (!q8 || j + 1 < got.size()) ? exact : [&] {
          double e = 0;
          for (int64_t i = 0; i < k; ++i) e += double(wr[i]) * x[i];
          return e;
        }();
        EXPECT_NEAR(got[j], ref, 1e-5 * mag + 1e-30) << type_name(t) << " row " << r << " variant " << j;
      }
      if (q8) changed += got[0] != got[1] || got[0] != got[2] || got[2] != got[3];
    }
    if (q8) {
      EXPECT_GT(changed, 0) << type_name(t);
    }
  }
}

// The AVX2 rows equal the scalar mirror bit for bit: every plan, row lengths with a partial
// last unit / slab, row counts off the group of 8, odd scale bytes (NVFP4 0x7F -> 0, 0xFF
// -> 480, negative zero; Q8_0 code -128) and all-zero activation blocks.
TEST(GpuDot, RowsMatchScalarMirror) {
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::MXFP4})
    for (int64_t k : {64, 192, 2048 + 64}) {
      if (k % traits(t).block_size != 0) continue;
      const int64_t rows = 13;
      std::vector<uint8_t> store;
      const auto w = test::make_weight(t, k, rows, 1, 17 + k, store);
      std::vector<uint8_t> wb(w.data, w.data + rows * w.row_bytes());
      if (t == GgmlType::NVFP4) wb[0] = 0x7F, wb[1] = 0xFF, wb[36 * (k / 64) + 2] = 0x80;
      if (t == GgmlType::Q8_0) wb[2] = 0x80;
      auto x = test::randn(k, 18);
      for (int i = 32; i < 64 && k > 64; ++i) x[i] = 0.0f;
      std::vector<int8_t> qs(k);
      std::vector<float> d(k / 32);
      gpu_quantize_act_q8(x.data(), k, qs.data(), d.data());
      const GpuActQ8 xq{qs.data(), d.data()};
      for (GpuDotPlan p : {GpuDotPlan{GpuDot::kNvfp4Packed, 32}, GpuDotPlan{GpuDot::kNvfp4Slab, 32},
                           GpuDotPlan{GpuDot::kQ8Generic, 4}, GpuDotPlan{GpuDot::kQ8Generic, 8},
                           GpuDotPlan{GpuDot::kQ8Generic, 32}}) {
        std::vector<float> got(rows);
        gpu_dot_q8_rows(p, t, wb.data(), w.row_bytes(), rows, xq, k, got.data());
        for (int64_t r = 0; r < rows; ++r) {
          const float ref = gpu_dot_q8(p, t, wb.data() + r * w.row_bytes(), xq, k);
          EXPECT_EQ(std::memcmp(&got[r], &ref, 4), 0) << type_name(t) << " k " << k << " kind "
                                                      << static_cast<int>(p.kind) << " lanes " << p.lanes << " row "
                                                      << r << ": " << got[r] << " vs " << ref;
        }
      }
    }
}

// The float path's AVX2 rows equal the scalar mirror bit for bit (every float-path type,
// partial last chunk, rows off the group of 8, tiny activations near the 2^64 scaling).
TEST(GpuDot, FloatRowsMatchScalarMirror) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::NVFP4})
    for (int64_t k : {64, 1024 + 128}) {
      const int64_t rows = 11;
      std::vector<uint8_t> store;
      const auto w = test::make_weight(t, k, rows, 1, 23 + k, store);
      auto x = test::randn(k, 24);
      x[5] = 1e-30f;
      x[6] = -3e-38f;
      std::vector<float> got(rows);
      gpu_dot_float_rows(t, w.data, w.row_bytes(), rows, x.data(), k, got.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float ref = gpu_dot_float(t, w.data + r * w.row_bytes(), x.data(), k);
        EXPECT_EQ(std::memcmp(&got[r], &ref, 4), 0) << type_name(t) << " k " << k << " row " << r << ": " << got[r]
                                                    << " vs " << ref;
      }
    }
}

}  // namespace
}  // namespace ft::moe_cpu
