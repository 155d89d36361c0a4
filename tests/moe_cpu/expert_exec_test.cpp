// The CPU expert executor against the engine's MoE (bit for bit: make_cpu_experts is this
// executor over a view of the ExpertWeights, so this checks that wiring -- views, scale bank,
// numerics), its scalar twins (moe_experts_ref, expert_exec_ref), skipped routes, and the
// pinned pool.
#include "moe_cpu/expert_exec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../engine/test_util.h"
#include "core/error.h"
#include "moe_cpu/cpu_pool.h"
#include "moe_cpu/cpu_topology.h"

namespace ft::moe_cpu {
namespace {

using engine::ActType;
using engine::ExpertWeights;

struct Layer {
  std::vector<uint8_t> store[3];
  std::vector<float> scales[3];
  ExpertWeights w;
  std::vector<float> bank;
  HostExperts h;
};

// Experts of type t; NVFP4 gets per-expert .scale values of 1e-1..1e-3 (as real files do).
void make_layer(Layer& L, GgmlType t, int64_t E, int64_t n_embd, int64_t n_ff, bool scales) {
  ExpertWeights& w = L.w;
  w.n_expert = E;
  w.n_embd = n_embd;
  w.n_ff = n_ff;
  w.gate.w = test::make_weight(t, n_embd, n_ff, E, 21, L.store[0]);
  w.up.w = test::make_weight(t, n_embd, n_ff, E, 22, L.store[1]);
  w.down.w = test::make_weight(t, n_ff, n_embd, E, 23, L.store[2]);
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
  check_host_experts(L.h, "test layer");
}

struct Routes {
  std::vector<int32_t> ids;
  std::vector<float> wts;
};

// Token t rank r -> expert (t*5 + r*3) % E (several tokens share experts), weights 1/(r+2).
Routes make_routes(int64_t n_tok, int n_used, int64_t E) {
  Routes r;
  for (int64_t t = 0; t < n_tok; ++t)
    for (int k = 0; k < n_used; ++k) {
      r.ids.push_back(static_cast<int32_t>((t * 5 + k * 3) % E));
      r.wts.push_back(1.0f / (k + 2));
    }
  return r;
}

struct TypeCase {
  GgmlType type;
  bool scales;
};

class ExpertExecTypes : public ::testing::TestWithParam<TypeCase> {};

// Every route valid: the executor is the engine's MoeExperts bit for bit (same kernels, same
// order), and the scalar twins agree up to fp32 summation order, fp32 and q8 activations.
TEST_P(ExpertExecTypes, MatchesEngineAndReference) {
  const auto [type, scales] = GetParam();
  const int64_t E = 8, n_embd = 256, n_ff = 256;  // Q4_K needs rows of 256
  const int n_used = 3;
  Layer L;
  make_layer(L, type, E, n_embd, n_ff, scales);
  ThreadPool pool(3);
  ExpertExecutor exec(pool);
  auto engine_moe = engine::make_cpu_experts(L.w);
  for (int64_t n_tok : {1, 5}) {
    const auto x = test::randn(n_tok * n_embd, 40 + n_tok);
    const Routes r = make_routes(n_tok, n_used, E);
    for (auto aq : {quant::ActQuant::kNone, quant::ActQuant::kQ8}) {
      const ExpertNumerics num{ActType::kF32, aq};
      std::vector<float> out(n_tok * n_embd), eng(n_tok * n_embd), ref(n_tok * n_embd);
      exec.run(L.h, num, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, out.data(), n_embd);
      engine_moe->forward(engine::Exec{&pool, ActType::kF32, aq}, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(),
                          n_used, eng.data(), n_embd);
      EXPECT_EQ(0, std::memcmp(out.data(), eng.data(), out.size() * sizeof(float)))
          << type_name(type) << " n_tok " << n_tok << " q8 " << (aq == quant::ActQuant::kQ8);
      expert_exec_ref(L.h, num, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, ref.data(), n_embd);
      ASSERT_GT(test::max_abs(ref), 0.0f);
      // q8: a summation-order difference in g/u can move one Q8 rounding of h (or a block's
      // amax), which moves the output by up to a quantisation step of h (seen: 1.3e-3).
      const float tol = aq == quant::ActQuant::kQ8 ? 5e-3f : 1e-4f;
      EXPECT_LT(test::max_abs_diff(out, ref), tol * test::max_abs(ref)) << type_name(type) << " n_tok " << n_tok << " q8 " << (aq == quant::ActQuant::kQ8);
      if (aq == quant::ActQuant::kNone) {
        engine::moe_experts_ref(ActType::kF32, L.w, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used,
                                ref.data(), n_embd);
        EXPECT_LT(test::max_abs_diff(out, ref), 1e-4f * test::max_abs(ref)) << type_name(type);
      }
    }
    EXPECT_EQ(exec.last_routes(), n_tok * n_used);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ExpertExecTypes,
                         ::testing::Values(TypeCase{GgmlType::NVFP4, true}, TypeCase{GgmlType::Q8_0, false},
                                           TypeCase{GgmlType::Q4_K, false}, TypeCase{GgmlType::MXFP4, false},
                                           TypeCase{GgmlType::BF16, false}),
                         [](const auto& info) { return std::string(type_name(info.param.type)); });

// Skipped routes (-1, the hybrid backend's GPU-owned ones) contribute nothing: the result
// equals the reference with those routes given weight 0, and a token with no route is 0.
TEST(ExpertExec, SkippedRoutes) {
  const int64_t E = 8, n_embd = 128, n_ff = 64, n_tok = 4;
  const int n_used = 4;
  Layer L;
  make_layer(L, GgmlType::NVFP4, E, n_embd, n_ff, true);
  ThreadPool pool(2);
  ExpertExecutor exec(pool);
  const auto x = test::randn(n_tok * n_embd, 7);
  Routes r = make_routes(n_tok, n_used, E);
  Routes zeroed = r;
  for (int64_t s = 0; s < n_tok * n_used; ++s)
    if (s % 3 == 1 || s / n_used == 2) {  // token 2 loses every route
      r.ids[s] = -1;
      zeroed.wts[s] = 0.0f;
    }
  const ExpertNumerics num{ActType::kF32, quant::ActQuant::kQ8};
  std::vector<float> out(n_tok * n_embd, 123.0f), ref(n_tok * n_embd), full(n_tok * n_embd);
  exec.run(L.h, num, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, out.data(), n_embd);
  expert_exec_ref(L.h, num, x.data(), n_embd, n_tok, zeroed.ids.data(), zeroed.wts.data(), n_used, ref.data(), n_embd);
  EXPECT_LT(test::max_abs_diff(out, ref), 1e-4f * test::max_abs(ref));
  for (int64_t i = 0; i < n_embd; ++i) ASSERT_EQ(out[2 * n_embd + i], 0.0f);
  // And the skipped routes were really dropped: with them the result differs.
  exec.run(L.h, num, x.data(), n_embd, n_tok, zeroed.ids.data(), r.wts.data(), n_used, full.data(), n_embd);
  EXPECT_GT(test::max_abs_diff(out, full), 1e-2f * test::max_abs(full));
  EXPECT_THROW(
      {
        std::vector<int32_t> bad = r.ids;
        bad[0] = static_cast<int32_t>(E);
        exec.run(L.h, num, x.data(), n_embd, n_tok, bad.data(), r.wts.data(), n_used, out.data(), n_embd);
      },
      Error);
}

// The bank's columns are what the executor scales by: gate, up and down each matter.
TEST(ExpertExec, BankColumnsApplied) {
  const int64_t E = 4, n_embd = 64, n_ff = 64;
  Layer L;
  make_layer(L, GgmlType::NVFP4, E, n_embd, n_ff, true);
  ThreadPool pool(1);
  ExpertExecutor exec(pool);
  const auto x = test::randn(n_embd, 3);
  const std::vector<int32_t> ids = {1, 3};
  const std::vector<float> wts = {0.6f, 0.4f};
  const ExpertNumerics num;
  std::vector<float> base(n_embd), changed(n_embd);
  exec.run(L.h, num, x.data(), n_embd, 1, ids.data(), wts.data(), 2, base.data(), n_embd);
  for (int col = 0; col < 3; ++col) {
    std::vector<float> bank = L.bank;
    bank[1 * 4 + col] *= 2.0f;
    HostExperts h = L.h;
    h.bank = bank.data();
    exec.run(h, num, x.data(), n_embd, 1, ids.data(), wts.data(), 2, changed.data(), n_embd);
    EXPECT_GT(test::max_abs_diff(base, changed), 1e-3f * test::max_abs(base)) << "bank column " << col;
  }
}

// The result does not depend on the number of threads (each row is one kernel call).
TEST(ExpertExec, ThreadCountInvariant) {
  const int64_t E = 16, n_embd = 128, n_ff = 96, n_tok = 3;
  const int n_used = 4;
  Layer L;
  make_layer(L, GgmlType::Q8_0, E, n_embd, n_ff, false);
  const auto x = test::randn(n_tok * n_embd, 9);
  const Routes r = make_routes(n_tok, n_used, E);
  std::vector<float> a(n_tok * n_embd), b(n_tok * n_embd);
  ThreadPool p1(1), p4(4);
  ExpertExecutor e1(p1), e4(p4);
  const ExpertNumerics num{ActType::kF32, quant::ActQuant::kQ8};
  e1.run(L.h, num, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, a.data(), n_embd);
  e4.run(L.h, num, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, b.data(), n_embd);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// The phase clocks (FT_MOE_CPU_PROFILE, ft-bench-moe-cpu's per-mode phases): off, nothing is
// counted; on, every call is, with the weight bytes of its active experts, and the GEMV
// phases take time; reset zeroes them.
TEST(ExpertExec, ProfileCountsCallsAndBytes) {
  const int64_t E = 8, n_embd = 128, n_ff = 64;
  const int n_used = 3;
  Layer L;
  make_layer(L, GgmlType::Q8_0, E, n_embd, n_ff, false);
  const auto x = test::randn(n_embd, 12);
  const Routes r = make_routes(1, n_used, E);
  std::vector<float> out(n_embd);
  ThreadPool pool(2);
  ExpertExecutor ex(pool);
  const ExpertNumerics num{ActType::kF32, quant::ActQuant::kQ8};
  ex.set_profile(false);
  ex.reset_profile();
  ex.run(L.h, num, x.data(), n_embd, 1, r.ids.data(), r.wts.data(), n_used, out.data(), n_embd);
  EXPECT_EQ(ex.profile().calls, 0);
  ex.set_profile(true);
  for (int i = 0; i < 3; ++i)
    ex.run(L.h, num, x.data(), n_embd, 1, r.ids.data(), r.wts.data(), n_used, out.data(), n_embd);
  const ExecProfile p = ex.profile();
  EXPECT_EQ(p.calls, 3);
  EXPECT_EQ(p.bytes, 3 * ex.last_bytes());
  EXPECT_GT(ex.last_bytes(), 0);
  EXPECT_GT(p.us[1] + p.us[3], 0.0);
  EXPECT_GT(p.gemv_gbs(), 0.0);
  ex.reset_profile();
  EXPECT_EQ(ex.profile().calls, 0);
  EXPECT_EQ(ex.profile().us[1], 0.0);
}

TEST(ExpertExec, RefusesBadShapes) {
  Layer L;
  make_layer(L, GgmlType::Q8_0, 4, 64, 64, false);
  HostExperts h = L.h;
  h.n_ff = 32;
  EXPECT_THROW(check_host_experts(h, "blk.0"), Error);
  h = L.h;
  h.down = {};
  EXPECT_THROW(check_host_experts(h, "blk.0"), Error);
}

TEST(CpuPool, OneThreadPerPhysicalCorePinned) {
  const std::vector<int> cores = physical_core_cpus();
  ASSERT_FALSE(cores.empty());
  for (size_t i = 1; i < cores.size(); ++i) EXPECT_NE(cores[i], cores[i - 1]);
  CpuPool def;
  EXPECT_EQ(def.size(), std::max<int>(1, static_cast<int>(cores.size()) - 1));
  CpuPool p(CpuPoolOptions{3, true, 1});
  EXPECT_EQ(p.size(), 3);
  EXPECT_TRUE(p.pinned()) << p.describe();
  for (int c : p.cpus()) EXPECT_NE(std::find(cores.begin(), cores.end(), c), cores.end());
  // The pool still runs loops after pinning.
  std::atomic<int64_t> sum{0};
  p.pool().parallel_for(1000, 7, [&](int64_t a, int64_t b, int) {
    for (int64_t i = a; i < b; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

}  // namespace
}  // namespace ft::moe_cpu

namespace ft::moe_cpu {
namespace {

// round_inputs (the GPU prefill's tensor-core rounding): the twin agrees, pre-rounded inputs
// give the same bits, and the rounding changes the result.
TEST(ExpertExec, RoundInputsBf16) {
  const int64_t E = 6, n_embd = 128, n_ff = 64, n_tok = 4;
  const int n_used = 2;
  Layer L;
  make_layer(L, GgmlType::NVFP4, E, n_embd, n_ff, true);
  ThreadPool pool(2);
  ExpertExecutor exec(pool);
  const auto x = test::randn(n_tok * n_embd, 17);
  std::vector<float> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = engine::round_act(ActType::kBF16, x[i]);
  const Routes r = make_routes(n_tok, n_used, E);
  ExpertNumerics nb;
  nb.round_inputs = ActType::kBF16;
  std::vector<float> a(x.size()), b(x.size()), ref(x.size()), plain(x.size());
  exec.run(L.h, nb, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, a.data(), n_embd);
  exec.run(L.h, nb, xb.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, b.data(), n_embd);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  expert_exec_ref(L.h, nb, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, ref.data(), n_embd);
  EXPECT_LT(test::max_abs_diff(a, ref), 1e-4f * test::max_abs(ref));
  exec.run(L.h, ExpertNumerics{}, x.data(), n_embd, n_tok, r.ids.data(), r.wts.data(), n_used, plain.data(), n_embd);
  EXPECT_GT(test::max_abs_diff(a, plain), 1e-5f * test::max_abs(plain));
}

}  // namespace
}  // namespace ft::moe_cpu
