// qwen35 / qwen35moe on the GPU (gpu/forward_qwen35.cpp) against the CPU engine, its twin,
// on tiny generated models (spec qwen35.md §5: Gated DeltaNet layers 0, 2, gated attention
// layers 1, 3, H_v = 2 H_k), BF16 and NVFP4-with-scales, every --dtype:
//   * logits after a 70-token prompt (longer than one 64-token chunk; the prefill GEMM path)
//     within gpu_session_test's per-dtype tolerance;
//   * 24 teacher-forced decode steps (GEMVs, CUDA graphs, the recurrent state carried):
//     the GPU's argmax equals the CPU's wherever the CPU's top-2 margin is not a near tie;
//   * the prompt in micro-batches of 16 tokens (the state crosses calls) gives the
//     prompt-at-once logits within the tolerance, and a second sequence (position 0 again:
//     the kernels reset the state) repeats the first one's logits bit for bit;
//   * graphs on and off give bit-identical logits.
// qwen35moe's MoE backends: offload (a quarter of the experts cached) gives fused's 256 greedy
// tokens and logits bit for bit; cpu and hybrid (max-fetch 0 and 2) fused's 256 tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gpu/moe_cpu_backend.h"
#include "gpu/session.h"
#include "model/model.h"
#include "session_test_util.h"

using ft::GgmlType;
using ft::testgen::Arch;
using ft::testgen::ModelSpec;
using ft::testgen::Role;
using namespace ft::gpu_test;

namespace {

ModelSpec base(Arch a) {
  auto s = ft::gpu_test::base(a, 13);
  s.n_ctx_train = 512;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back({"qwen35_bf16", all(base(Arch::kQwen35), GgmlType::BF16)});
  v.push_back({"qwen35_nvfp4", with(all(base(Arch::kQwen35), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput},
                                    GgmlType::NVFP4)});
  v.push_back({"qwen35moe_bf16", all(base(Arch::kQwen35Moe), GgmlType::BF16)});
  v.push_back({"qwen35moe_nvfp4", with(all(base(Arch::kQwen35Moe), GgmlType::BF16),
                                       {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput}, GgmlType::NVFP4)});
  {
    auto s = all(base(Arch::kQwen35Moe), GgmlType::BF16);
    s.q35.merged_gate_up_exps = true;
    v.push_back({"qwen35moe_merged", s});
  }
  return v;
}

class Qwen35GpuVsCpu : public ::testing::TestWithParam<Param> {};

TEST_P(Qwen35GpuVsCpu, Matches) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Param& p = GetParam();
  const fs::path dir = test_dir("ft-qwen35-gpu-");
  const TestModel tm = write_model(p.c.spec, dir, p.c.name);
  const ft::model::Model& m = *tm.m;
  const int64_t V = m.hp.n_vocab;
  const int n_prompt = 70;
  const std::vector<int32_t> prompt = make_prompt(n_prompt, tm.gen.n_vocab);

  ft::engine::Session cpu(m, cpu_options(p.dtype));
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 128;
  go.dtype = p.dtype;
  ft::gpu::GpuSession gpu(m, go);
  const VsCpu r = compare_to_cpu(cpu, gpu, prompt, 24, p.dtype);
  const std::vector<float>& lg = r.prompt_gpu;
  const std::vector<int32_t>& forced = r.forced;
  const std::vector<std::vector<float>>& gpu_steps = r.gpu_steps;
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };

  // A new sequence on the same session: position 0 resets the conv and delta-rule state, so
  // the first sequence repeats bit for bit (graphs already captured are replayed).
  gpu.reset();
  const std::vector<float> lg2 = copy(gpu.eval(prompt.data(), n_prompt));
  EXPECT_EQ(std::memcmp(lg.data(), lg2.data(), V * sizeof(float)), 0) << "second sequence's prompt logits";
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> g = copy(gpu.eval(&forced[i], 1));
    EXPECT_EQ(std::memcmp(g.data(), gpu_steps[i].data(), V * sizeof(float)), 0) << "second sequence, step " << i;
  }

  // Micro-batches of 16 tokens (GEMM calls of 16 and a 6-token GEMV tail) carry the state.
  ft::gpu::GpuSessionOptions gu = go;
  gu.n_ubatch = 16;
  ft::gpu::GpuSession gpu_u(m, gu);
  const std::vector<float> lu = copy(gpu_u.eval(prompt.data(), n_prompt));
  const float du = max_abs_diff(lg.data(), lu.data(), V);
  EXPECT_LE(du, session_tol(p.dtype)) << "micro-batched prompt";

  // Graphs off: the same kernels, bit-identical.
  ft::gpu::GpuSessionOptions gn = go;
  gn.graphs = false;
  ft::gpu::GpuSession gpu_n(m, gn);
  gpu_n.eval(prompt.data(), n_prompt);
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> g = copy(gpu_n.eval(&forced[i], 1));
    EXPECT_EQ(std::memcmp(g.data(), gpu_steps[i].data(), V * sizeof(float)), 0) << "graphs off, step " << i;
  }
  std::printf("QWEN35-GPU-VS-CPU %s %s: prompt max|dlogit| %.3g, decode max|dlogit| %.3g, argmax agree %d/%d, "
              "ubatch-16 prompt max|dlogit| %.3g\n",
              p.c.name.c_str(), p.dtype.c_str(), r.prompt_diff, r.decode_diff, r.agree, r.steps, du);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Qwen35GpuVsCpu, ::testing::ValuesIn(params(cases(), kAllDtypes)), param_name);

// ---- qwen35moe's MoE backends ----

struct BackendRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // prompt and the first 32 steps
  std::string describe;
};

BackendRun greedy(const ft::model::Model& m, const std::string& dtype, const ft::gpu::MoeBackendOptions& mo,
                  const std::vector<int32_t>& prompt, int n) {
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 512;
  go.dtype = dtype;
  go.moe = mo;
  ft::gpu::GpuSession s(m, go);
  BackendRun r;
  r.describe = s.moe().describe();
  const int64_t V = m.hp.n_vocab;
  const float* l = s.eval(prompt.data(), static_cast<int64_t>(prompt.size()));
  for (int i = 0; i < n; ++i) {
    if (i <= 32) r.logits.emplace_back(l, l + V);
    const int32_t t = ft::engine::argmax(l, static_cast<int32_t>(V));
    r.tokens.push_back(t);
    if (i + 1 < n) l = s.eval(&t, 1);
  }
  return r;
}

struct BackendCase {
  std::string name;
  GgmlType experts;
};

class Qwen35MoeBackends : public ::testing::TestWithParam<std::tuple<BackendCase, std::string>> {};

TEST_P(Qwen35MoeBackends, SameGreedyTokensAsFused) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  ft::gpu::register_moe_cpu_backends();
  const auto& [bc, dtype] = GetParam();
  auto spec = base(Arch::kQwen35Moe);
  spec.n_expert = 16;
  spec.n_expert_used = 2;
  for (auto& r : spec.role_type) r = GgmlType::BF16;
  spec.set_type(Role::kExperts, bc.experts);
  if (bc.experts == GgmlType::NVFP4) spec = with(spec, {Role::kAttn, Role::kMlp, Role::kOutput}, GgmlType::NVFP4);
  const fs::path dir = test_dir("ft-qwen35-moe-");
  const TestModel tm = write_model(spec, dir, bc.name);
  const ft::model::Model& m = *tm.m;
  const std::vector<int32_t> prompt = make_prompt(70, tm.gen.n_vocab);
  const int n = 256;

  ft::gpu::MoeBackendOptions fo;
  fo.name = "fused";
  const BackendRun ref = greedy(m, dtype, fo, prompt, n);
  EXPECT_GE(std::set<int32_t>(ref.tokens.begin(), ref.tokens.end()).size(), 4u) << "degenerate generation";

  for (const BackendVariant& v : moe_backend_variants()) {
    const BackendRun got = greedy(m, dtype, v.o, prompt, n);
    const int same = same_prefix(ref.tokens, got.tokens);
    std::printf("QWEN35-MOE-TOKENS %s %s %s: %d/%d identical to fused [%s]\n", bc.name.c_str(), dtype.c_str(),
                v.label.c_str(), same, n, got.describe.c_str());
    if (v.o.name == "offload") {
      // The fused kernels on slots: the same bits.
      EXPECT_EQ(same, n) << v.label;
      for (size_t i = 0; i < ref.logits.size() && i < got.logits.size(); ++i)
        ASSERT_EQ(std::memcmp(ref.logits[i].data(), got.logits[i].data(), ref.logits[i].size() * 4), 0)
            << v.label << ": logits differ at step " << i;
    } else {
      // As moe_cpu_test.cpp: the CPU's fp32 sums run in another order, so a near tie may part
      // NVFP4 experts in auto (measured there at token 138); a wrong scale or route parts
      // within a few tokens.
      const int floor = dtype == "auto" && bc.experts == GgmlType::NVFP4 ? 128 : n;
      EXPECT_GE(same, floor) << v.label;
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, Qwen35MoeBackends,
    ::testing::Combine(::testing::Values(BackendCase{"nvfp4", GgmlType::NVFP4}, BackendCase{"bf16", GgmlType::BF16}),
                       ::testing::Values(std::string("auto"), std::string("float32"))),
    [](const auto& info) { return std::get<0>(info.param).name + "_" + std::get<1>(info.param); });

}  // namespace
