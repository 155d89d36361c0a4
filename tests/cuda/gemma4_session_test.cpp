// gemma4 on the GPU (gpu/forward_gemma4.cpp) against the CPU engine, its twin, on the tiny
// models of the parity suite (spec gemma4.md §6) in every --dtype:
//   dense BF16 with per-layer inputs, KV sharing and double-wide MLPs; dense NVFP4 with
//   scales and no softcap key (default 30); MoE BF16, MoE MXFP4 experts, MoE NVFP4 split
//   experts with per-expert scales; a window of 3 under a 24-token prompt; the 26B-A4B head
//   dims (256 / 512) with a window of 16 under 40 tokens.
//   * prompt logits (GEMM path) within the per-dtype tolerance of gpu_session_test;
//   * 24 teacher-forced decode steps (GEMV path, graphs): the same argmax unless a near tie
//     (MoE models outside float32: see kMoeNearTie16 and moe_flips below);
//   * micro-batches of 12 (sliding layers then keep a 12 + window - 1 row ring that wraps):
//     the same prompt logits within tolerance and the same greedy tokens as one batch;
//   * graphs on and off bit-identical; eval_argmax == argmax(eval).
// And the MoE backends: offload (a quarter of the experts cached), cpu, hybrid (max-fetch 0
// and 2) give fused's 256 greedy tokens on the MoE models. --kv-type on gemma4's auto
// (Gemma4KvType*); gemma4's auto in gpu_numerics (Gemma4Numerics, host only) and
// FT_GEMMA4_Q8_PREFILL=x2 against x3 and the CPU engine (Gemma4Q8Prefill).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "cuda/attention.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "core/error.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gpu/moe_cpu_backend.h"
#include "gpu/session.h"
#include "model/model.h"
#include "session_test_util.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;
using ft::GgmlType;
using ft::testgen::Arch;
using ft::testgen::ModelSpec;
using ft::testgen::Role;

namespace {

using ft::gpu_test::all;
using ft::gpu_test::cpu_options;
using ft::gpu_test::greedy_tokens;
using ft::gpu_test::max_abs_diff;
using ft::gpu_test::same_prefix;
using ft::gpu_test::test_dir;
using ft::gpu_test::TestModel;
using ft::gpu_test::top2_margin;
using ft::gpu_test::with;
using ft::gpu_test::write_model;

struct Case {
  std::string name;
  ModelSpec spec;
  int prompt_len = 20;
};

ModelSpec base() {
  auto s = ft::testgen::preset("tiny", Arch::kGemma4);
  s.seed = 11;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  {
    auto s = all(base(), GgmlType::BF16);
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_embd_per_layer = 16;
    s.g4.n_shared_kv = 2;
    s.g4.n_head_kv = {2, 1, 2, 1};
    s.g4.n_ff = {128, 128, 256, 256};
    v.push_back({"dense_bf16_ple_shared", s});
  }
  {
    auto s = with(all(base(), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput}, GgmlType::NVFP4);
    s.n_expert = s.n_expert_used = 0;
    s.g4.write_softcap = false;
    v.push_back({"dense_nvfp4", s});
  }
  v.push_back({"moe_bf16", all(base(), GgmlType::BF16)});
  v.push_back({"moe_mxfp4", with(all(base(), GgmlType::BF16), {Role::kExperts}, GgmlType::MXFP4)});
  v.push_back({"moe_nvfp4", with(all(base(), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4)});
  {
    auto s = all(base(), GgmlType::BF16);
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_swa = 3;
    s.g4.swa_pattern = {true, true, false, true};
    v.push_back({"swa3_prompt24", s, 24});
  }
  {
    // Gemma-4-26B-A4B's head dims (sliding 256, global 512: the rope and attention kernels'
    // widest heads) and a window of 16 under a 40-token prompt, NVFP4 attention and experts.
    // Added after the H200 run of 02:21 (not run there).
    auto s = with(all(base(), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4);
    s.n_embd = 256;
    s.n_ff = 256;
    s.head_dim = 512;
    s.g4.head_dim_swa = 256;
    s.g4.n_swa = 16;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 128;
    v.push_back({"wide_heads_moe_nvfp4", s, 40});
  }
  return v;
}

struct Param {
  Case c;
  std::string dtype;
};

std::vector<Param> params() {
  std::vector<Param> p;
  for (const Case& c : cases())
    for (const char* d : {"float32", "bfloat16", "float16", "auto"}) p.push_back({c, d});
  return p;
}

// As gpu_session_test.cpp: fp32 differs by summation order only (H200: up to 2.5e-3 after
// gemma4's ~10 RMS norms a layer), the 16-bit dtypes by a rounding flip propagated. auto rounds
// where the CPU engine's auto does (gpu/forward_gemma4.cpp: bf16 inputs to BF16 matmuls, Q8_0
// values into prefill GEMMs, fp32 KV) but for the BF16 experts' down input (fp32 on the GPU) and
// the summation order: the CPU engine made to do the same moved by <= 0.06 on the prompt and
// <= 0.29 in decode, argmax misses only at margins <= 0.013 (moe_bf16).
float tol(const std::string& dtype) { return dtype == "float32" ? 5e-3f : 0.5f; }
float near_tie(const std::string& dtype) { return dtype == "float32" ? 1e-3f : 0.25f; }
// MoE models in bf16 / f16: one ulp anywhere can send a token to another expert at a router
// near tie, and from there the two runs part by more than any logit tolerance. Measured on the
// CPU engine alone, the scores of its attention moved by one ulp (the GPU's summation order
// moves many values by more): decode max|dlogit| up to 7.9 (f16) and 3.7 (bf16) on
// wide_heads_moe_nvfp4, argmax misses at top-2 margins up to 1.02 (f16, wide_heads) and 0.86
// (bf16, moe_mxfp4); the dense models <= 0.12 and no miss. There decode logits are not bounded
// and a top-2 margin below this is a near tie; a wrong op still shows in the prompt logits
// (<= 0.11 under those perturbations) and in argmaxes at margins above it. The route-flip jumps
// are moe_flips' count (H200 2026-11-30, before this rule: wide_heads bf16 4.5, 19/24).
constexpr float kMoeNearTie16 = 1.5f;
// MoE in auto: also route flips (the BF16 experts' down input, above: decode 3.4 on moe_bf16),
// so decode logits are not bounded there either; the argmaxes keep near_tie("auto").
bool moe_flips(const Param& p) { return p.c.spec.n_expert > 0 && p.dtype != "float32"; }
float decode_near_tie(const Param& p) {
  return moe_flips(p) && p.dtype != "auto" ? kMoeNearTie16 : near_tie(p.dtype);
}

class Gemma4GpuVsCpu : public ::testing::TestWithParam<Param> {};

TEST_P(Gemma4GpuVsCpu, Matches) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Param& p = GetParam();
  const TestModel tm = write_model(p.c.spec, test_dir("ft-gemma4-gpu-"), p.c.name);
  const auto& m = tm.m;
  const auto& gen = tm.gen;
  ASSERT_TRUE(ft::gpu::gpu_supports(*m));
  const int64_t V = m->hp.n_vocab;
  const int P = p.c.prompt_len;

  std::vector<int32_t> prompt;
  for (int i = 0; i < P; ++i) prompt.push_back(static_cast<int32_t>((53 * i + 7) % gen.n_vocab));

  ft::engine::Session cpu(*m, cpu_options(p.dtype));
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 128;
  go.dtype = p.dtype;
  ft::gpu::GpuSession gpu(*m, go);
  go.n_ubatch = 12;  // sliding layers: rings of 12 + window - 1 rows
  ft::gpu::GpuSession ring(*m, go);

  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  const std::vector<float> lc = copy(cpu.eval(prompt.data(), P));
  const std::vector<float> lg = copy(gpu.eval(prompt.data(), P));
  const std::vector<float> lr = copy(ring.eval(prompt.data(), P));
  const float d0 = max_abs_diff(lc.data(), lg.data(), V);
  // The prompt in auto was 1.75 apart on moe_nvfp4 (H200) while the GPU's prefill GEMMs took
  // bf16 operands where the CPU takes Q8 (the CPU engine made to do that: 1.75 too); now tol.
  EXPECT_LE(d0, tol(p.dtype)) << "prompt logits";
  EXPECT_LE(max_abs_diff(lr.data(), lg.data(), V), tol(p.dtype)) << "micro-batches of 12 (ring KV)";
  const float near = decode_near_tie(p);

  int32_t next = ft::engine::argmax(lc.data(), static_cast<int32_t>(V));
  float dmax = d0;
  int agree = 0, ring_agree = 0;
  const int steps = 24;
  for (int i = 0; i < steps; ++i) {
    const std::vector<float> c = copy(cpu.eval(&next, 1));
    const std::vector<float> g = copy(gpu.eval(&next, 1));
    const std::vector<float> r = copy(ring.eval(&next, 1));
    dmax = std::max(dmax, max_abs_diff(c.data(), g.data(), V));
    const int32_t ac = ft::engine::argmax(c.data(), static_cast<int32_t>(V));
    const int32_t ag = ft::engine::argmax(g.data(), static_cast<int32_t>(V));
    const int32_t ar = ft::engine::argmax(r.data(), static_cast<int32_t>(V));
    agree += ac == ag;
    ring_agree += ar == ag;
    EXPECT_TRUE(ac == ag || top2_margin(c.data(), V) < near)
        << "step " << i << ": cpu " << ac << ", gpu " << ag << " (cpu margin " << top2_margin(c.data(), V) << ")";
    EXPECT_TRUE(ar == ag || top2_margin(g.data(), V) < near) << "step " << i << ": ring " << ar;
    next = ac;
  }
  if (!moe_flips(p)) {
    EXPECT_LE(dmax, tol(p.dtype)) << "decode logits";
  }
  std::printf("GPU-VS-CPU gemma4 %s %s: prompt max|dlogit| %.3g, decode max|dlogit| %.3g, argmax agree %d/%d, "
              "ring %d/%d\n",
              p.c.name.c_str(), p.dtype.c_str(), d0, dmax, agree, steps, ring_agree, steps);

  go.n_ubatch = 512;
  go.graphs = false;
  ft::gpu::GpuSession g1(*m, go);
  for (int i = 0; i + 1 < P; ++i) g1.eval(&prompt[i], 1);
  const std::vector<float> l1 = copy(g1.eval(&prompt[P - 1], 1));
  // Token by token: the decode path P times, so MoE route flips (above) can part it from the
  // batched prompt; there the argmax is held to the near tie.
  if (moe_flips(p)) {
    const int32_t a1 = ft::engine::argmax(l1.data(), static_cast<int32_t>(V));
    EXPECT_TRUE(a1 == ft::engine::argmax(lg.data(), static_cast<int32_t>(V)) || top2_margin(lg.data(), V) < near)
        << "token-by-token prompt: argmax " << a1 << " (max|dlogit| " << max_abs_diff(l1.data(), lg.data(), V) << ")";
  } else {
    EXPECT_LE(max_abs_diff(l1.data(), lg.data(), V), tol(p.dtype)) << "token-by-token prompt";
  }
  go.graphs = true;
  ft::gpu::GpuSession g2(*m, go);
  for (int i = 0; i + 1 < P; ++i) g2.eval(&prompt[i], 1);
  const std::vector<float> l2 = copy(g2.eval(&prompt[P - 1], 1));
  EXPECT_EQ(max_abs_diff(l1.data(), l2.data(), V), 0.0f) << "graphs change the result";
  ft::gpu::GpuSession g3(*m, go);
  EXPECT_EQ(g3.eval_argmax(prompt.data(), P), ft::engine::argmax(lg.data(), static_cast<int32_t>(V)));
  std::error_code ec;
  fs::remove(tm.path, ec);
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma4GpuVsCpu, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           std::string s = i.param.c.name + "_" + i.param.dtype;
                           for (auto& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// ---- MoE backends: the same greedy tokens as fused ----

class Gemma4MoeBackends : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Gemma4MoeBackends, SameGreedyTokensAsFused) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  ft::gpu::register_moe_cpu_backends();
  const auto& [experts, dtype] = GetParam();
  auto spec = all(base(), GgmlType::BF16);
  spec.seed = 23;
  spec.n_expert = 8;
  spec.n_expert_used = 2;
  spec.n_ctx_train = 512;
  if (experts == "mxfp4") spec.set_type(Role::kExperts, GgmlType::MXFP4);
  if (experts == "nvfp4") spec = with(spec, {Role::kAttn, Role::kExperts}, GgmlType::NVFP4);
  const fs::path dir = test_dir("ft-gemma4-moe-");
  const TestModel tm = write_model(spec, dir, experts);
  const auto& m = tm.m;
  const auto& gen = tm.gen;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<int32_t>((37 * i + 5) % gen.n_vocab));
  const int n = 256;
  ft::gpu::MoeBackendOptions fo;
  fo.name = "fused";
  const auto ref = greedy_tokens(*m, dtype, fo, prompt, n);
  EXPECT_GE(std::set<int32_t>(ref.begin(), ref.end()).size(), 4u) << "the greedy run barely varies";

  for (const auto& [label, vo] : ft::gpu_test::moe_backend_variants()) {
    std::string desc;
    const auto got = greedy_tokens(*m, dtype, vo, prompt, n, &desc);
    const int same = same_prefix(ref, got);
    std::printf("MOE-TOKENS gemma4 %s %s %s: %d/%d identical to fused [%s]\n", experts.c_str(), dtype.c_str(),
                label.c_str(), same, n, desc.c_str());
    // offload runs fused's kernels on slots; cpu / hybrid run the CPU experts in the GPU's
    // exact summation order (moe_cpu exact mode): every backend gives fused's tokens
    // (H200, 2026-11-30: 256/256 on every case here).
    EXPECT_EQ(same, n) << label;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Gemma4MoeBackends,
                         ::testing::Combine(::testing::Values(std::string("bf16"), std::string("mxfp4"),
                                                              std::string("nvfp4")),
                                            ::testing::Values(std::string("float32"), std::string("auto"))),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// ---- --kv-type: auto keeps gemma4's KV in fp32 (llama.cpp's CPU rounding); f16 halves it ----

// A case's model written under dir (test_dir) and loaded.
std::unique_ptr<ft::model::Model> load_case(const Case& c, const fs::path& dir) {
  return write_model(c.spec, dir, c.name).m;
}

// --dtype auto with a --kv-type.
ft::gpu::GpuSessionOptions auto_with_kv(const std::string& kv_type) {
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 128;
  go.dtype = "auto";
  go.kv_type = kv_type;
  return go;
}

// The prompt, then the auto run's greedy tokens teacher-forced through auto (fp32 KV) and
// --kv-type f16: the cache takes half the bytes, and the argmaxes agree but for near ties
// (dense: near_tie("auto"); MoE: kMoeNearTie16, since one f16 rounding of a cached K or V can
// send a token to another expert at a router near tie, as the 16-bit dtypes do above). A
// broken f16 path (a wrong stride, values stored unconverted) changes argmaxes at wide margins.
class Gemma4KvType : public ::testing::TestWithParam<Case> {};

TEST_P(Gemma4KvType, F16AgreesWithAutoOnTeacherForcedTokens) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Case& c = GetParam();
  const fs::path dir = test_dir("ft-gemma4-kv-");
  auto m = load_case(c, dir);
  const int64_t V = m->hp.n_vocab;
  ft::gpu::GpuSession a(*m, auto_with_kv("auto")), h(*m, auto_with_kv("f16"));
  EXPECT_EQ(a.numerics().kv, ft::cuda::KvType::kF32) << "gemma4 auto keeps an fp32 KV cache";
  EXPECT_EQ(h.numerics().kv, ft::cuda::KvType::kF16);
  EXPECT_EQ(2 * h.memory().kv, a.memory().kv) << "f16 halves the cache";

  const std::vector<int32_t> prompt = ft::gpu_test::make_prompt(c.prompt_len, V);
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  const std::vector<float> la = copy(a.eval(prompt.data(), c.prompt_len));
  const std::vector<float> lh = copy(h.eval(prompt.data(), c.prompt_len));
  const bool moe = c.spec.n_expert > 0;
  const float d0 = max_abs_diff(la.data(), lh.data(), V);
  if (!moe) {
    EXPECT_LE(d0, tol("auto")) << "prompt logits";
  }
  const float near = moe ? kMoeNearTie16 : near_tie("auto");
  int32_t next = ft::engine::argmax(la.data(), static_cast<int32_t>(V));
  int agree = 0;
  float worst_miss = 0;  // the largest auto top-2 margin where the argmaxes part
  const int steps = 24;
  for (int i = 0; i < steps; ++i) {
    const std::vector<float> ca = copy(a.eval(&next, 1));
    const std::vector<float> ch = copy(h.eval(&next, 1));
    const int32_t aa = ft::engine::argmax(ca.data(), static_cast<int32_t>(V));
    const int32_t ah = ft::engine::argmax(ch.data(), static_cast<int32_t>(V));
    const float margin = top2_margin(ca.data(), V);
    if (aa == ah) {
      ++agree;
    } else {
      worst_miss = std::max(worst_miss, margin);
    }
    EXPECT_TRUE(aa == ah || margin < near) << "step " << i << ": auto " << aa << ", f16 KV " << ah << " (auto margin "
                                           << margin << ")";
    next = aa;
  }
  std::printf("KV-TYPE gemma4 %s auto vs f16 KV: prompt max|dlogit| %.3g, argmax agree %d/%d (worst miss at margin "
              "%.3g), KV %.1f vs %.1f KiB\n",
              c.name.c_str(), d0, agree, steps, worst_miss, static_cast<double>(a.memory().kv) / 1024.0,
              static_cast<double>(h.memory().kv) / 1024.0);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma4KvType, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// f32 is what auto picks on gemma4: the very same logits, bit for bit; bf16 halves the cache and
// runs; a name outside auto|f32|f16|bf16 is refused naming the option.
TEST(Gemma4KvTypeOptions, F32IsAutoBf16RunsBadNamesAreRefused) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Case c = cases().front();
  const fs::path dir = test_dir("ft-gemma4-kv32-");
  auto m = load_case(c, dir);
  const int64_t V = m->hp.n_vocab;
  const std::vector<int32_t> prompt = ft::gpu_test::make_prompt(c.prompt_len, V);
  ft::gpu::GpuSession a(*m, auto_with_kv("auto")), f(*m, auto_with_kv("f32")), b(*m, auto_with_kv("bf16"));
  EXPECT_EQ(f.numerics().kv, ft::cuda::KvType::kF32);
  EXPECT_EQ(b.numerics().kv, ft::cuda::KvType::kBF16);
  EXPECT_EQ(f.memory().kv, a.memory().kv);
  EXPECT_EQ(2 * b.memory().kv, a.memory().kv);
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  std::vector<float> la = copy(a.eval(prompt.data(), c.prompt_len));
  std::vector<float> lf = copy(f.eval(prompt.data(), c.prompt_len));
  const std::vector<float> lb = copy(b.eval(prompt.data(), c.prompt_len));
  EXPECT_EQ(max_abs_diff(la.data(), lf.data(), V), 0.0f) << "prompt: f32 is gemma4 auto's own choice";
  EXPECT_LT(max_abs_diff(la.data(), lb.data(), V), INFINITY) << "bf16 KV: non-finite logits";
  for (int i = 0; i < 4; ++i) {
    const int32_t next = ft::engine::argmax(la.data(), static_cast<int32_t>(V));
    la = copy(a.eval(&next, 1));
    lf = copy(f.eval(&next, 1));
    EXPECT_EQ(max_abs_diff(la.data(), lf.data(), V), 0.0f) << "decode step " << i;
  }
  try {
    ft::gpu::GpuSession bad(*m, auto_with_kv("f8"));
    ADD_FAILURE() << "--kv-type f8 was accepted";
  } catch (const ft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-type"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// ---- gemma4's auto numerics (gpu_numerics) and FT_GEMMA4_Q8_PREFILL=x2 ----

// Sets an environment variable for a scope (nullptr: unsets it) and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

bool same_numerics(const ft::gpu::GpuNumerics& a, const ft::gpu::GpuNumerics& b) {
  return a.round == b.round && a.kv == b.kv && a.prec == b.prec && a.q8 == b.q8 && a.q8_prefill == b.q8_prefill &&
         a.half_inputs == b.half_inputs && a.exact_prec == b.exact_prec;
}

// Host only (runs without a device): gemma4's auto is decided in gpu_numerics with the other
// dtype decisions: llama.cpp's CPU numerics (fp32 KV, Q8 prefill inputs at x3, bf16/f16 inputs
// to half matmuls); FT_GEMMA4_AUTO=cuda gives every other architecture's auto;
// FT_GEMMA4_Q8_PREFILL picks the exact GEMMs' precision and a bad value is refused naming it;
// the explicit dtypes and the other architectures are not touched.
TEST(Gemma4Numerics, AutoIsDecidedInGpuNumerics) {
  using ft::cuda::GemmPrec;
  const ScopedEnv no_auto("FT_GEMMA4_AUTO", nullptr);
  const ScopedEnv no_prec("FT_GEMMA4_Q8_PREFILL", nullptr);
  const auto g = ft::gpu::gpu_numerics("auto", "gemma4");
  const auto l = ft::gpu::gpu_numerics("auto", "llama");
  EXPECT_EQ(g.kv, ft::cuda::KvType::kF32);
  EXPECT_TRUE(g.q8_prefill);
  EXPECT_TRUE(g.half_inputs);
  EXPECT_EQ(g.exact_prec, GemmPrec::kBF16x3);
  EXPECT_EQ(g.prec, l.prec);
  EXPECT_EQ(l.kv, ft::cuda::KvType::kF16);
  EXPECT_FALSE(l.q8_prefill);
  EXPECT_FALSE(l.half_inputs);
  EXPECT_EQ(l.exact_prec, GemmPrec::kF32);
  EXPECT_TRUE(same_numerics(l, ft::gpu::gpu_numerics("auto")));
  for (const char* arch : {"qwen3", "qwen3moe", "qwen35", "qwen35moe"})
    EXPECT_TRUE(same_numerics(l, ft::gpu::gpu_numerics("auto", arch))) << arch;
  for (const char* d : {"float32", "bfloat16", "float16"})
    EXPECT_TRUE(same_numerics(ft::gpu::gpu_numerics(d, "gemma4"), ft::gpu::gpu_numerics(d, "llama"))) << d;
  {
    const ScopedEnv e("FT_GEMMA4_AUTO", "cuda");
    EXPECT_TRUE(same_numerics(ft::gpu::gpu_numerics("auto", "gemma4"), l)) << "FT_GEMMA4_AUTO=cuda";
  }
  for (const auto& [v, want] : {std::pair{"x3", GemmPrec::kBF16x3}, std::pair{"x2", GemmPrec::kBF16x2},
                                std::pair{"f32", GemmPrec::kF32}}) {
    const ScopedEnv e("FT_GEMMA4_Q8_PREFILL", v);
    EXPECT_EQ(ft::gpu::gpu_numerics("auto", "gemma4").exact_prec, want) << v;
    EXPECT_EQ(ft::gpu::gpu_numerics("auto", "llama").exact_prec, GemmPrec::kF32) << v;
  }
  const ScopedEnv bad("FT_GEMMA4_Q8_PREFILL", "x4");
  try {
    ft::gpu::gpu_numerics("auto", "gemma4");
    ADD_FAILURE() << "FT_GEMMA4_Q8_PREFILL=x4 was accepted";
  } catch (const ft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("FT_GEMMA4_Q8_PREFILL"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(ft::gpu::gpu_numerics("float32", "gemma4")) << "read for gemma4's auto only";
}

// FT_GEMMA4_Q8_PREFILL=x2 (the 2-part bf16 split of the Q8-input prefill GEMMs: 6,604 against x3's
// 6,135 tok/s on the 26B-A4B shapes, gpu/session.cpp) against the default x3 and the CPU engine in
// auto, on the cases whose weights take Q8_0 inputs (NVFP4 / MXFP4) under prompts longer than a
// GEMV batch: prompt logits within tol("auto") of both; 24 decode steps teacher-forced with x3's
// greedy tokens give x3's argmax but for near ties (dense: near_tie("auto"), as Gemma4GpuVsCpu
// holds auto; MoE: kMoeNearTie16, as Gemma4KvType); decode logits within tol("auto") on the dense
// models (MoE: route flips, moe_flips). x2 must also differ from x3 somewhere: its 2 bf16 parts
// keep 16 of the up to 18 significant bits of a Q8 input (an fp16 scale times an int8:
// cuda/act_q8.h), so bit-identical logits would mean the variable never reached the GEMMs.
class Gemma4Q8Prefill : public ::testing::TestWithParam<Case> {};

TEST_P(Gemma4Q8Prefill, X2AgreesWithX3AndTheCpu) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Case& c = GetParam();
  const ScopedEnv no_auto("FT_GEMMA4_AUTO", nullptr);
  const fs::path dir = test_dir("ft-gemma4-q8p-");
  auto m = load_case(c, dir);
  const int64_t V = m->hp.n_vocab;
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 128;
  go.dtype = "auto";
  auto session_at = [&](const char* prec) {
    const ScopedEnv e("FT_GEMMA4_Q8_PREFILL", prec);
    return std::make_unique<ft::gpu::GpuSession>(*m, go);
  };
  const auto x3 = session_at("x3");
  const auto x2 = session_at("x2");
  ASSERT_EQ(x3->numerics().exact_prec, ft::cuda::GemmPrec::kBF16x3);
  ASSERT_EQ(x2->numerics().exact_prec, ft::cuda::GemmPrec::kBF16x2);
  ft::engine::Session cpu(*m, cpu_options("auto"));

  const std::vector<int32_t> prompt = ft::gpu_test::make_prompt(c.prompt_len, V);
  ASSERT_GT(c.prompt_len, ft::cuda::kGemvMaxTokens) << "the prompt must take the prefill GEMMs";
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  const std::vector<float> l3 = copy(x3->eval(prompt.data(), c.prompt_len));
  const std::vector<float> l2 = copy(x2->eval(prompt.data(), c.prompt_len));
  const std::vector<float> lc = copy(cpu.eval(prompt.data(), c.prompt_len));
  const float d23 = max_abs_diff(l2.data(), l3.data(), V), d2c = max_abs_diff(l2.data(), lc.data(), V);
  EXPECT_LE(d23, tol("auto")) << "prompt logits, x2 vs x3";
  EXPECT_LE(d2c, tol("auto")) << "prompt logits, x2 vs the CPU engine";
  EXPECT_GT(d23, 0.0f) << "x2 gave x3's prompt logits bit for bit: the 2-part split did not run";

  const bool moe = c.spec.n_expert > 0;
  // MoE: x2's prompt leaves other rounding in the KV cache, which moves tokens across router
  // near ties as an f16 cache does (Gemma4KvType): H200 2026-11-30, near_tie("auto") failed
  // at x3 margins 0.26-0.99 on moe_nvfp4 / wide_heads_moe_nvfp4 (decode max|dlogit| 3.6 / 5.0)
  // with the prompt logits within tol("auto").
  const float near = moe ? kMoeNearTie16 : near_tie("auto");
  int32_t next = ft::engine::argmax(l3.data(), static_cast<int32_t>(V));
  float dmax = 0;
  int agree = 0;
  const int steps = 24;
  for (int i = 0; i < steps; ++i) {
    const std::vector<float> a = copy(x3->eval(&next, 1));
    const std::vector<float> b = copy(x2->eval(&next, 1));
    dmax = std::max(dmax, max_abs_diff(a.data(), b.data(), V));
    const int32_t a3 = ft::engine::argmax(a.data(), static_cast<int32_t>(V));
    const int32_t a2 = ft::engine::argmax(b.data(), static_cast<int32_t>(V));
    agree += a3 == a2;
    EXPECT_TRUE(a3 == a2 || top2_margin(a.data(), V) < near)
        << "step " << i << ": x3 " << a3 << ", x2 " << a2 << " (x3 margin " << top2_margin(a.data(), V) << ")";
    next = a3;
  }
  if (!moe) {
    EXPECT_LE(dmax, tol("auto")) << "decode logits, x2 vs x3";
  }
  std::printf("Q8-PREFILL gemma4 %s x2 vs x3: prompt max|dlogit| %.3g (x2 vs cpu %.3g), decode max|dlogit| %.3g, "
              "argmax agree %d/%d\n",
              c.name.c_str(), d23, d2c, dmax, agree, steps);
  fs::remove_all(dir);
}

// The cases with Q8_0-input weights (NVFP4 / MXFP4); the BF16 ones never take the split.
std::vector<Case> q8_prefill_cases() {
  std::vector<Case> v;
  for (const Case& c : cases())
    if (c.name == "dense_nvfp4" || c.name == "moe_mxfp4" || c.name == "moe_nvfp4" || c.name == "wide_heads_moe_nvfp4")
      v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma4Q8Prefill, ::testing::ValuesIn(q8_prefill_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });
}  // namespace
