// The GPU forward pass (gpu::GpuSession) against the CPU engine (engine::Session), its twin,
// on tiny generated llama / qwen3 / qwen3moe models in every weight format and every --dtype:
//   * logits after a 20-token prompt (the prefill GEMM path) within a per-dtype tolerance;
//   * 24 teacher-forced decode steps (the GEMV path, CUDA graphs): the GPU's argmax equals
//     the CPU's wherever the CPU's top-2 margin is not a near tie;
//   * eval_argmax (argmax on the device) equals the argmax of eval's logits;
//   * the same prompt fed one token at a time gives the prompt-at-once logits;
//   * graphs on and off give bit-identical logits.
// The transitive chain GPU == CPU engine == llama.cpp is closed by the parity suite run with
// FT_PARITY_DEVICE=cuda (tests/oracle/parity_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cuda/attention.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_tiled.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "gpu/forward.h"
#include "gpu/session.h"
#include "model/model.h"
#include "session_test_util.h"

using ft::GgmlType;
using ft::testgen::Arch;
using ft::testgen::Role;
using namespace ft::gpu_test;

namespace {

// The logits of a 20-token prompt, a 5-token chunk and 24 one-token decode steps of prompt (49 tokens), end to end.
std::vector<float> prompt_chunk_decode_logits(ft::gpu::GpuSession& g, const std::vector<int32_t>& prompt, int64_t V) {
  std::vector<float> all;
  auto take = [&](const float* l) { all.insert(all.end(), l, l + V); };
  take(g.eval(prompt.data(), 20));
  take(g.eval(prompt.data() + 20, 5));
  for (int i = 25; i < 49; ++i) take(g.eval(&prompt[i], 1));
  return all;
}

std::vector<Case> cases() {
  auto base = [](Arch a) { return ft::gpu_test::base(a, 11); };
  std::vector<Case> v;
  v.push_back({"llama_f32", base(Arch::kLlama)});
  v.push_back({"llama_nvfp4", with(all(base(Arch::kLlama), GgmlType::BF16), {Role::kAttn, Role::kMlp}, GgmlType::NVFP4)});
  {
    auto s = base(Arch::kLlama);
    s.n_expert = 4;
    s.n_expert_used = 2;
    v.push_back({"llama_moe_nvfp4", with(all(s, GgmlType::BF16), {Role::kExperts}, GgmlType::NVFP4)});
  }
  v.push_back({"qwen3_bf16", all(base(Arch::kQwen3), GgmlType::BF16)});
  v.push_back({"qwen3_f16", all(base(Arch::kQwen3), GgmlType::F16)});
  v.push_back({"qwen3_q8_0", all(base(Arch::kQwen3), GgmlType::Q8_0)});
  {
    auto s = base(Arch::kQwen3);
    s.n_embd = 256;
    s.n_ff = 512;
    s = with(s, {Role::kEmbd, Role::kAttn}, GgmlType::Q4_K);
    v.push_back({"qwen3_q4k_q6k", with(s, {Role::kMlp, Role::kOutput}, GgmlType::Q6_K)});
  }
  {
    auto s = with(all(base(Arch::kQwen3), GgmlType::BF16), {Role::kEmbd, Role::kAttn}, GgmlType::NVFP4);
    s.tied_output = true;
    v.push_back({"qwen3_nvfp4_embd_tied", s});
  }
  v.push_back({"qwen3moe_bf16", all(base(Arch::kQwen3Moe), GgmlType::BF16)});
  v.push_back({"qwen3moe_nvfp4", with(all(base(Arch::kQwen3Moe), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4)});
  v.push_back({"qwen3moe_mxfp4", with(all(base(Arch::kQwen3Moe), GgmlType::BF16), {Role::kExperts}, GgmlType::MXFP4)});
  {
    auto s = all(base(Arch::kQwen3Moe), GgmlType::BF16);
    s.router_tie = true;
    v.push_back({"qwen3moe_router_tie", s});
  }
  return v;
}

class GpuVsCpu : public ::testing::TestWithParam<Param> {};

TEST_P(GpuVsCpu, Matches) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Param& p = GetParam();
  const fs::path dir = test_dir("ft-gpu-session-");
  const TestModel tm = write_model(p.c.spec, dir, p.c.name);
  const ft::model::Model& m = *tm.m;
  const int64_t V = m.hp.n_vocab;
  const std::vector<int32_t> prompt = make_prompt(20, tm.gen.n_vocab);

  ft::engine::Session cpu(m, cpu_options(p.dtype));
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 128;
  go.dtype = p.dtype;
  ft::gpu::GpuSession gpu(m, go);
  const VsCpu r = compare_to_cpu(cpu, gpu, prompt, 24, p.dtype);
  const std::vector<float>& lg = r.prompt_gpu;
  std::printf("GPU-VS-CPU %s %s: prompt max|dlogit| %.3g, decode max|dlogit| %.3g, argmax agree %d/%d\n",
              p.c.name.c_str(), p.dtype.c_str(), r.prompt_diff, r.decode_diff, r.agree, r.steps);

  // Prompt one token at a time (GEMV path) == prompt at once (GEMM path), within tolerance;
  // eval_argmax == argmax(eval); graphs off == graphs on, bit for bit.
  auto copy = [V](const float* x) { return std::vector<float>(x, x + V); };
  go.graphs = false;
  ft::gpu::GpuSession g1(m, go);
  for (int i = 0; i < 19; ++i) g1.eval(&prompt[i], 1);
  const std::vector<float> l1 = copy(g1.eval(&prompt[19], 1));
  EXPECT_LE(max_abs_diff(l1.data(), lg.data(), V), session_tol(p.dtype)) << "token-by-token prompt";
  go.graphs = true;
  ft::gpu::GpuSession g2(m, go);
  for (int i = 0; i < 19; ++i) g2.eval(&prompt[i], 1);
  const std::vector<float> l2 = copy(g2.eval(&prompt[19], 1));
  EXPECT_EQ(max_abs_diff(l1.data(), l2.data(), V), 0.0f) << "graphs change the result";
  ft::gpu::GpuSession g3(m, go);
  const int32_t am = g3.eval_argmax(prompt.data(), 20);
  EXPECT_EQ(am, ft::engine::argmax(lg.data(), static_cast<int32_t>(V)));
  std::error_code ec;
  fs::remove(tm.path, ec);
}

// The tensor-core decode attention inside a session (attn_mma_min_keys 1: every one-token step,
// after its own rope + KV store launch) against the fused dedicated kernel (attn_mma_min_keys 0): qwen3 and qwen3moe at head dim 128 (the kernel's) and GQA 4 / 2, in
// bf16 and f16 (16-bit caches), 40 token-by-token steps with graphs on: logits within the
// session tolerance at every step, the same greedy argmax where the margin is not a near tie,
// and the kernel counted as launched.
TEST(GpuAttentionMma, SessionMatchesFusedKernel) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = test_dir("ft-gpu-attn-mma-");
  for (Arch arch : {Arch::kQwen3, Arch::kQwen3Moe})
    for (const char* dtype : {"bfloat16", "float16"}) {
      auto spec = ft::gpu_test::base(arch, 17);
      spec.head_dim = 128;
      spec.n_head = arch == Arch::kQwen3 ? 8 : 4;
      spec.n_head_kv = 2;
      const std::string name = std::string(ft::testgen::arch_name(arch)) + "_" + dtype;
      SCOPED_TRACE(name);
      const TestModel tm = write_model(all(spec, GgmlType::BF16), dir, name);
      const ft::model::Model& m = *tm.m;
      const int64_t V = m.hp.n_vocab;
      const std::vector<int32_t> prompt = make_prompt(40, tm.gen.n_vocab);
      ft::gpu::GpuSessionOptions go;
      go.n_ctx = 128;
      go.dtype = dtype;
      auto run = [&](int64_t min_keys) {
        go.attn_mma_min_keys = min_keys;
        ft::gpu::GpuSession g(m, go);
        std::vector<std::vector<float>> out;
        for (int32_t t : prompt) {
          const float* l = g.eval(&t, 1);
          out.emplace_back(l, l + V);
        }
        return out;
      };
      const int64_t before = ft::cuda::attention_mma_decode_launches();
      const auto mma = run(1);
      EXPECT_GT(ft::cuda::attention_mma_decode_launches(), before) << "the tensor-core kernel did not run";
      const int64_t after = ft::cuda::attention_mma_decode_launches();
      const auto fused = run(0);
      EXPECT_EQ(ft::cuda::attention_mma_decode_launches(), after) << "attn_mma_min_keys 0 still ran it";
      // The tensor-core kernel as it was before its K/V ring and its rope inside (a rope + KV store
      // launch first, one tile at a time): the same logits, bit for bit.
      ft::cuda::attention_set_mma_decode(0, 0);
      const auto plain = run(1);
      ft::cuda::attention_set_mma_decode(-1, -1);
      for (size_t i = 0; i < prompt.size(); ++i)
        ASSERT_EQ(std::memcmp(plain[i].data(), mma[i].data(), static_cast<size_t>(V) * sizeof(float)), 0)
            << "step " << i << ": the ring / rope inside changed the logits";
      int agree = 0, ties = 0;
      for (size_t i = 0; i < prompt.size(); ++i) {
        EXPECT_LE(max_abs_diff(mma[i].data(), fused[i].data(), V), session_tol(dtype)) << "step " << i;
        std::vector<float> sorted = fused[i];
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        if (sorted[0] - sorted[1] < 0.05f) {
          ++ties;
          continue;
        }
        const int32_t a = ft::engine::argmax(mma[i].data(), static_cast<int32_t>(V));
        const int32_t b = ft::engine::argmax(fused[i].data(), static_cast<int32_t>(V));
        EXPECT_EQ(a, b) << "step " << i;
        agree += a == b;
      }
      std::printf("ATTN-MMA %s: argmax agree %d, near ties %d, of %zu steps\n", name.c_str(), agree, ties,
                  prompt.size());
      std::error_code ec;
      fs::remove(tm.path, ec);
    }
}

// The tiled NVFP4 layout in a session (cuda/nvfp4_tiled.h; FT_NVFP4_TILE=all tiles every
// projection that can be: at n_embd 256 and n_ff 512 a llama's qkv, wo, gate|up and down, a
// qwen3moe's qkv and wo) at auto (the integer path, which tiles). Against the same session
// row-major with gemv_mma.cu forced on every one-token NVFP4 shape at 4 warps x 2 stages (what
// the tiled calls take at these shapes, gemv_nvfp4_tiled_mma; the slab at 2..8 tokens and the
// cuBLAS GEMM are the same kernels either way): the same logits bit for bit after a 20-token
// prompt, a 5-token chunk and 24 decode steps. And the llama against the CPU engine under compare_to_cpu's rules.
// FT_NVFP4_TILE=0 tiles nothing.
TEST(GpuNvfp4Tiled, SessionEqualsRowMajorAndMatchesCpu) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = test_dir("ft-gpu-tiled-");
  for (Arch arch : {Arch::kLlama, Arch::kQwen3Moe}) {
    auto spec = ft::gpu_test::base(arch, 19);
    spec.n_embd = 256, spec.n_head = 8, spec.n_head_kv = 2, spec.head_dim = 32, spec.n_ff = 512;
    const bool moe = arch == Arch::kQwen3Moe;
    spec = with(all(spec, GgmlType::BF16), {Role::kAttn, moe ? Role::kExperts : Role::kMlp}, GgmlType::NVFP4);
    const std::string name = std::string(ft::testgen::arch_name(arch)) + "_tiled";
    SCOPED_TRACE(name);
    const TestModel tm = write_model(spec, dir, name);
    const ft::model::Model& m = *tm.m;
    const int64_t V = m.hp.n_vocab;
    const std::vector<int32_t> prompt = make_prompt(49, tm.gen.n_vocab);
    ft::gpu::GpuSessionOptions go;
    go.n_ctx = 128;
    go.dtype = "auto";
    auto logits = [&](ft::gpu::GpuSession& g) { return prompt_chunk_decode_logits(g, prompt, V); };
    const int64_t t0 = ft::cuda::nvfp4_tile_launches();
    const int fold = ft::gpu::norm_fold_mode();
    ft::gpu::set_norm_fold(0);  // the fold (tiled layers only) is not the row-major session's bits
    setenv("FT_NVFP4_TILE", "0", 1);
    int warps = 0, stages = 0;
    ft::cuda::gemv_nvfp4_tiled_mma(256, 512, warps, stages);
    ASSERT_EQ(warps * 10 + stages, 42) << "the shapes' tiled kernel";
    ft::cuda::gemv_set_nvfp4_override(3, 0, 0);
    ft::cuda::gemv_set_nvfp4_mma(4, 2);
    std::vector<float> want;
    {
      ft::gpu::GpuSession plain(m, go);
      want = logits(plain);
    }
    ft::cuda::gemv_set_nvfp4_override(-1, 0, 0);
    ft::cuda::gemv_set_nvfp4_mma(0, 0);
    EXPECT_EQ(ft::cuda::nvfp4_tile_launches(), t0) << "FT_NVFP4_TILE=0 tiled";
    setenv("FT_NVFP4_TILE", "all", 1);
    ft::gpu::GpuSession gpu(m, go);
    EXPECT_EQ(ft::cuda::nvfp4_tile_launches() - t0, moe ? 2 * spec.n_layer : 4 * spec.n_layer) << "tiled projections";
    ft::cuda::gemv_set_nvfp4_mma_batch(false);  // the chunk's slab kernel on both layouts (the batch kernel: below)
    const std::vector<float> got = logits(gpu);
    ft::cuda::gemv_set_nvfp4_mma_batch(true);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "tiled != row-major";
    ft::gpu::set_norm_fold(3);
    if (!moe) {
      // The norm fold (cuda/norm_fold.h; the llama's decode norms, both): the same computation to
      // fp32 / fp16 rounding of the activations' scales -- close logits, and the launches it saves.
      ft::gpu::GpuSession gf(m, go);
      const int64_t f0 = ft::cuda::gemv_norm_fold_tails();
      const std::vector<float> folded = logits(gf);
      // (counted where launches are made: once per captured graph)
      EXPECT_GE(ft::cuda::gemv_norm_fold_tails() - f0, 2 * spec.n_layer - 1) << "producer tails";
      double md = 0, mx = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        md = std::max(md, static_cast<double>(std::fabs(folded[i] - got[i])));
        mx = std::max(mx, static_cast<double>(std::fabs(got[i])));
      }
      // (the fold's bytes equal rmsnorm_q8's but at rare fp32 rounding ties: here often all of them)
      std::printf("FOLD %s: max|dlogit| %.3g of max|logit| %.3g\n", name.c_str(), md, mx);
      EXPECT_LT(md, 0.02 * mx) << "folded logits far from the norm's";
      ft::engine::Session cpu(m, cpu_options("auto"));
      ft::gpu::GpuSession g2(m, go);
      const VsCpu r = compare_to_cpu(cpu, g2, std::vector<int32_t>(prompt.begin(), prompt.begin() + 20), 24, "auto");
      std::printf("TILED %s: prompt max|dlogit| %.3g, decode max|dlogit| %.3g, argmax agree %d/%d\n", name.c_str(),
                  r.prompt_diff, r.decode_diff, r.agree, r.steps);
    }
    unsetenv("FT_NVFP4_TILE");
    ft::gpu::set_norm_fold(fold);
    std::error_code ec;
    fs::remove(tm.path, ec);
  }
}

// The NVFP4 layout tests' model: a small llama, NVFP4 attention and MLP (BF16 elsewhere), every projection tiled
// (FT_NVFP4_TILE=all while it lives), and its logits after a prompt, a chunk and 24 decode steps in a fresh GPU
// session -- under whatever FT_NVFP4_* the caller set.
struct TiledNvfp4Llama {
  int n_layer = 0;
  TestModel tm;
  std::vector<int32_t> prompt;
  TiledNvfp4Llama(const char* dir_prefix, uint64_t seed, const char* name) {
    auto spec = ft::gpu_test::base(Arch::kLlama, seed);
    spec.n_embd = 256, spec.n_head = 8, spec.n_head_kv = 2, spec.head_dim = 32, spec.n_ff = 512;
    spec = with(all(spec, GgmlType::BF16), {Role::kAttn, Role::kMlp}, GgmlType::NVFP4);
    n_layer = spec.n_layer;
    tm = write_model(spec, test_dir(dir_prefix), name);
    prompt = make_prompt(49, tm.gen.n_vocab);
    setenv("FT_NVFP4_TILE", "all", 1);
  }
  ~TiledNvfp4Llama() {
    unsetenv("FT_NVFP4_TILE");
    std::error_code ec;
    fs::remove(tm.path, ec);
  }
  std::vector<float> logits() const {
    ft::gpu::GpuSessionOptions go;
    go.n_ctx = 128;
    go.dtype = "auto";
    ft::gpu::GpuSession g(*tm.m, go);
    return prompt_chunk_decode_logits(g, prompt, tm.m->hp.n_vocab);
  }
};

// The NVFP4 scale scan at load (on by default, FT_NVFP4_SCAN=0 off; cuda/nvfp4_scan.h): a generated file's tiled
// projections have no NaN scale codes, so the session marks them clean and their GEMVs take the unchecked
// instances -- the same logits bit for bit as the unscanned session after a prompt, a chunk and 24 decode steps.
TEST(GpuNvfp4Scan, CleanSessionEqualsCheckedOne) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const TiledNvfp4Llama model("ft-gpu-scan-", 23, "llama_scan");
  setenv("FT_NVFP4_SCAN", "0", 1);
  const int64_t c0 = ft::cuda::gemv_nvfp4_clean_launches();
  const std::vector<float> want = model.logits();
  EXPECT_EQ(ft::cuda::gemv_nvfp4_clean_launches(), c0) << "clean launches without the scan";
  unsetenv("FT_NVFP4_SCAN");  // the default: scanned
  const std::vector<float> got = model.logits();
  // qkv, wo, gate|up and down a layer, at least once (graphs: once per capture)
  EXPECT_GE(ft::cuda::gemv_nvfp4_clean_launches() - c0, 4 * model.n_layer) << "clean launches with the scan";
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "scanned != checked";
}

// FT_NVFP4_LANES=1 (tiled pieces lane-major, cuda/nvfp4_tiled.h "Lanes"): the same logits as the plain tiled
// session (=0; the default depends on the GPU: gemv_tuning.h nvfp4_lanes_default), prompt chunks (the GEMM's
// dequantiser) and decode (the tensor-core kernel's lanes instances: qkv, wo, gate|up with the SwiGLU tail, down into
// the residual) alike.
TEST(GpuNvfp4Lanes, SessionEqualsTiledOne) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const TiledNvfp4Llama model("ft-gpu-lanes-", 29, "llama_lanes");
  setenv("FT_NVFP4_LANES", "0", 1);
  const int64_t t0 = ft::cuda::gemv_nvfp4_lanes_launches();
  const std::vector<float> want = model.logits();
  EXPECT_EQ(ft::cuda::gemv_nvfp4_lanes_launches(), t0) << "lanes launches with FT_NVFP4_LANES=0";
  setenv("FT_NVFP4_LANES", "1", 1);
  const int64_t l0 = ft::cuda::gemv_nvfp4_lanes_launches();
  const std::vector<float> got = model.logits();
  unsetenv("FT_NVFP4_LANES");
  EXPECT_GE(ft::cuda::gemv_nvfp4_lanes_launches() - l0, 4 * model.n_layer) << "lanes launches";
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "lanes != tiled";
}

// The batch tensor-core GEMV (gemv_mma_batch.cu, on by default) in a session: the 5-token chunk's projections take
// it (qkv, wo, gate|up, down a layer); their rows are the one-token launches' (gemv_batch_test.cpp), so against
// the slab kernel's session (FT_GEMV_NVFP4_MMA_BATCH=0) the logits differ only by fp32 reassociation.
TEST(GpuNvfp4Batch, SessionNearTheSlabOne) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const TiledNvfp4Llama model("ft-gpu-batch-", 31, "llama_batch");
  ft::cuda::gemv_set_nvfp4_mma_batch(false);
  const int64_t b0 = ft::cuda::gemv_nvfp4_mma_batch_launches();
  const std::vector<float> want = model.logits();
  ft::cuda::gemv_set_nvfp4_mma_batch(true);
  EXPECT_EQ(ft::cuda::gemv_nvfp4_mma_batch_launches(), b0) << "batch launches with it off";
  const std::vector<float> got = model.logits();
  EXPECT_GE(ft::cuda::gemv_nvfp4_mma_batch_launches() - b0, 4 * model.n_layer) << "batch launches";
  ASSERT_EQ(got.size(), want.size());
  double md = 0, mx = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "logit " << i;
    md = std::max(md, static_cast<double>(std::fabs(got[i] - want[i])));
    mx = std::max(mx, static_cast<double>(std::fabs(want[i])));
  }
  std::printf("BATCH: max|dlogit| %.3g of max|logit| %.3g\n", md, mx);
  EXPECT_LT(md, 0.02 * mx) << "batch kernel's logits far from the slab kernel's";
}

// Sampling on the device (GpuSession::eval_sample) picks the CPU sampler's tokens: same
// seed, same chain (penalty, top-k, top-p, min-p, temperature), fp32 logits within 1e-5.
TEST(GpuSampling, MatchesCpuSampler) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = test_dir("ft-gpu-sample-");
  for (const Case& c : cases()) {
    if (c.name != "qwen3moe_nvfp4" && c.name != "llama_f32" && c.name != "qwen3_q4k_q6k") continue;
    const TestModel tm = write_model(c.spec, dir, c.name);
    const ft::model::Model& m = *tm.m;
    for (const float penalty : {1.0f, 1.3f}) {
      ft::engine::SamplerParams sp;
      sp.temperature = 0.9f;
      sp.repeat_penalty = penalty;
      sp.top_k = penalty == 1.0f ? 0 : 20;
      sp.seed = 1234;
      ft::engine::Session cpu(m, cpu_options("float32"));
      ft::gpu::GpuSessionOptions go;
      go.n_ctx = 128;
      go.dtype = "float32";
      ft::gpu::GpuSession gpu(m, go);
      ft::engine::Sampler sc(sp), sg(sp);
      std::vector<int32_t> prompt;
      for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int32_t>((31 * i + 3) % tm.gen.n_vocab));
      for (int32_t t : prompt) sc.accept(t), sg.accept(t);
      // The CPU side through Runner's generic eval_sample (eval + Sampler::sample).
      ft::engine::Runner& rc = cpu;
      int32_t a = rc.eval_sample(prompt.data(), 12, sc), b = gpu.eval_sample(prompt.data(), 12, sg);
      std::vector<int32_t> ta, tb;
      for (int i = 0; i < 32; ++i) {
        ta.push_back(a);
        tb.push_back(b);
        sc.accept(a);
        sg.accept(b);
        a = rc.eval_sample(&a, 1, sc);
        b = gpu.eval_sample(&b, 1, sg);
      }
      EXPECT_EQ(ta, tb) << c.name << " penalty " << penalty;
      EXPECT_GE(std::set<int32_t>(ta.begin(), ta.end()).size(), 4u) << "sampling barely varies";
    }
    std::error_code ec;
    fs::remove(tm.path, ec);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuVsCpu, ::testing::ValuesIn(params(cases(), kAllDtypes)), param_name);

}  // namespace
