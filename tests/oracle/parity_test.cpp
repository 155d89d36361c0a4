// Whole-model parity against llama.cpp (Foundation issue rules), one test per config:
//
// (a) exact math: llama.cpp on the F32 twin (weights dequantised, .scale folded in) vs
//     `ft generate --dtype float32` on the quantised file:
//       prompt logits within 0.05 absolute;
//       teacher-forced argmax identical except where llama.cpp's top-2 margin < 0.05;
//       32 free-running greedy tokens identical up to such a near tie.
// (b) llama.cpp's own numerics: llama.cpp on the quantised file itself (it rounds
//     activations to Q8_0/Q8_K, or fp16/bf16, before each weight matmul) vs
//     `ft generate --dtype auto` (which rounds them the same way) on the same file:
//       prompt logits within kQuantFileTol;
//       teacher-forced argmax identical except where llama.cpp's top-2 margin < 0.05;
//       32 free-running greedy tokens identical up to such a near tie.
//     The line also reports how far --dtype float32 (exact math) follows that run.
// Scaled NVFP4 configs also check that the copy without .scale tensors FAILS rule (a)
// (the scales matter) and that --dtype bfloat16 / float16 give finite logits close to fp32.
//
// Prints one "PARITY arch=... cfg=..." line per config (scripts/parity-report.sh collects them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "oracle_util.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;
using ft::GgmlType;
using ft::oracle_test::Oracle;
using ft::oracle_test::Ours;
using ft::testgen::Arch;
using ft::testgen::ModelSpec;
using ft::testgen::Role;

namespace {

constexpr int kTokens = 32;
constexpr float kExactLogitTol = 0.05f;
constexpr float kNearTie = 0.05f;
// --dtype auto vs llama.cpp on the quantised file: the same activation rounding and, for
// NVFP4/Q8_0/Q4_K/Q6_K/MXFP4, the same per-row summation order, and ggml-cpu's rounding
// of silu, softmax, RoPE, the delta rule, the attention sums (engine/vec_math.h) and the
// one-row dot products of float weights (quant/matmul_vec_dot.cpp); measured max|dlogit| 0
// on every CPU config but llama f32 (2.1e-6) and q4_0 (7.2e-7), the 100-token default preset
// and qwen35 ones included (exact math vs the quantised file: 0.05..0.4; a wrong or missing
// scale: 5..1e30).
// Before those roundings matched, one ulp now and then flipped a Q8 rounding of an
// activation: 0.036 on the default preset, 0.05..0.3 on qwen35 NVFP4 where the recurrent
// state carried the flip on (tests/oracle/drift_probe_test.cpp finds the first such tensor).
constexpr float kQuantFileTol = 0.1f;
// Reduced-precision activations vs fp32 (same file): measured ~0.02..0.2.
constexpr float kDtypeTol = 1.0f;
// Our side on the GPU (FT_PARITY_DEVICE=cuda), rule (b): --dtype auto there rounds as
// llama.cpp's CUDA build does (Q8 activation blocks, f16 KV cache), not as its CPU build,
// and bf16/f16 activations round every block; measured max|dlogit| vs llama.cpp's CPU run on
// the quantised file 0.03..0.23 on these models, so a top-2 margin below 0.25 is a near tie.
// gemma4 excepted: its auto rounds as the CPU build (gpu/session.cpp: bf16 inputs to BF16
// matmuls, Q8_0 values into prefill GEMMs, fp32 KV), since llama.cpp CUDA's numerics left the
// CPU run at margins up to 1.34 on these tiny models. Its auto is held to tighter bounds
// (Config::gpu_auto_as_cpu). H200 2026-11-30 (g4): prompt max|dlogit| 9.5e-7..0.054 on the 7
// configs (summation order), teacher-forced 32/32 everywhere, free-running partings only at
// margins 0.0086 (dense-nvfp4) and 0.0025 (moe-bf16). Logits 0.054 apart can swap a top-2
// within 0.11, so that is the near tie, and 0.12 the prompt tolerance (2.2x the measured).
// Its bf16/f16 runs keep kNearTieGpu.
constexpr float kNearTieGpu = 0.25f;
constexpr float kQuantFileTolGpu = 0.5f;
constexpr float kNearTieGpuCpuNumerics = 0.11f;
constexpr float kQuantFileTolGpuCpuNumerics = 0.12f;

struct Config {
  std::string cfg;
  ModelSpec spec;
  bool check_noscale = false;  // scaled NVFP4: no-scale copy must fail rule (a)
  bool check_dtypes = false;   // bf16 / f16 activations on the scaled file
  int prompt_len = 12;
  float quant_file_tol = kQuantFileTol;  // rule (b) prompt-logit tolerance on the CPU
  float near_tie_b = kNearTie;           // rule (b) near-tie margin on the CPU
  bool gpu_auto_as_cpu = false;          // GPU --dtype auto: the *GpuCpuNumerics bounds (gemma4)
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

int common_prefix(const std::vector<int>& a, const std::vector<int>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return static_cast<int>(n);
}

// FT_PARITY_DEVICE=cuda runs our side on the GPU (same rules; default cpu).
std::string device() {
  const char* d = std::getenv("FT_PARITY_DEVICE");
  return d && *d ? d : "cpu";
}

Oracle run_oracle(const std::string& model, const std::vector<int>& prompt) {
  return ft::oracle_test::run_oracle(model, prompt, kTokens);
}

Ours run_ours(const std::string& model, const std::vector<int>& prompt, const std::string& dtype,
              const std::vector<int>* force, const std::string& logits_path) {
  return ft::oracle_test::run_ours(model, prompt, kTokens, device(), dtype, force, logits_path);
}

std::vector<Config> configs() {
  std::vector<Config> out;
  auto base = [](Arch a) { return ft::testgen::preset_seeded("tiny", a, 7); };
  const auto all = &ft::testgen::with_all_types;
  const auto with = &ft::testgen::with_types;
  // ---- llama ----
  out.push_back({"f32", base(Arch::kLlama)});
  out.push_back({"bf16", all(base(Arch::kLlama), GgmlType::BF16)});
  {
    auto s = with(all(base(Arch::kLlama), GgmlType::BF16), {Role::kAttn, Role::kMlp}, GgmlType::NVFP4);
    out.push_back({"nvfp4-attn-mlp", s, true, true});
    s.tied_output = true;
    s.rope_freqs = false;
    s.seed = 8;
    out.push_back({"nvfp4-attn-mlp-tied-norope", s, true, false});
  }
  out.push_back({"q4_0", all(base(Arch::kLlama), GgmlType::Q4_0)});
  {
    // Mixtral-style MoE (llama with experts), NVFP4 experts with per-expert scales.
    auto s = base(Arch::kLlama);
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 64;
    out.push_back({"moe-nvfp4-experts", with(all(s, GgmlType::BF16), {Role::kExperts}, GgmlType::NVFP4), true, false});
  }
  // ---- qwen3 ----
  out.push_back({"bf16", all(base(Arch::kQwen3), GgmlType::BF16)});
  out.push_back({"nvfp4-attn-mlp-output",
                 with(all(base(Arch::kQwen3), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput}, GgmlType::NVFP4),
                 true, true});
  out.push_back({"q8_0", all(base(Arch::kQwen3), GgmlType::Q8_0)});
  out.push_back({"f16", all(base(Arch::kQwen3), GgmlType::F16)});
  {
    auto s = base(Arch::kQwen3);
    s.n_embd = 256;
    s.n_ff = 512;
    s = with(s, {Role::kEmbd, Role::kAttn}, GgmlType::Q4_K);
    s = with(s, {Role::kMlp, Role::kOutput}, GgmlType::Q6_K);
    out.push_back({"q4_k-q6_k", s});
  }
  {
    auto s = with(all(base(Arch::kQwen3), GgmlType::BF16), {Role::kEmbd, Role::kAttn}, GgmlType::NVFP4);
    s.tied_output = true;
    out.push_back({"nvfp4-embd-tied-attn", s, true, false});
  }
  // ---- qwen3moe ----
  out.push_back({"bf16", all(base(Arch::kQwen3Moe), GgmlType::BF16)});
  out.push_back({"nvfp4-experts-attn",
                 with(all(base(Arch::kQwen3Moe), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4),
                 true, true});
  out.push_back({"mxfp4-experts", with(all(base(Arch::kQwen3Moe), GgmlType::BF16), {Role::kExperts}, GgmlType::MXFP4)});
  out.push_back({"q8_0", all(base(Arch::kQwen3Moe), GgmlType::Q8_0)});
  {
    // Experts 0 and 1 have identical router rows: exact ties in top-k (argsort order).
    auto s = all(base(Arch::kQwen3Moe), GgmlType::BF16);
    s.router_tie = true;
    out.push_back({"router-tie", s});
  }
  // ---- gemma4 (spec gemma4.md §6): sliding window 8 < prompt, V = K on layer 1, output
  // scales on layers 0 and 2; MoE layers carry ffn_gate_inp.scale and per_expert_scale ----
  {
    // Dense E2B-like: per-layer inputs, the last two layers reuse layers 0/1's KV, double-wide MLPs.
    auto s = all(base(Arch::kGemma4), GgmlType::BF16);
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_embd_per_layer = 16;
    s.g4.n_shared_kv = 2;
    s.g4.n_head_kv = {2, 1, 2, 1};
    s.g4.n_ff = {128, 128, 256, 256};
    out.push_back({"dense-bf16", s});
  }
  {
    // Dense NVFP4 attention, MLP and output with scales; the softcap key absent (default 30).
    auto s = with(all(base(Arch::kGemma4), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput}, GgmlType::NVFP4);
    s.n_expert = s.n_expert_used = 0;
    s.g4.write_softcap = false;
    out.push_back({"dense-nvfp4", s, true, true});
  }
  out.push_back({"moe-bf16", all(base(Arch::kGemma4), GgmlType::BF16)});
  {
    // Tied output (as the released Gemma-4 files), logits of the embedding rows.
    auto s = all(base(Arch::kGemma4), GgmlType::BF16);
    s.tied_output = true;
    out.push_back({"moe-bf16-tied", s});
  }
  out.push_back({"moe-mxfp4-experts", with(all(base(Arch::kGemma4), GgmlType::BF16), {Role::kExperts}, GgmlType::MXFP4)});
  {
    // NVFP4 split experts: ffn_down_exps.scale = per_expert_scale x scale_2 (the converter's fold).
    auto s = with(all(base(Arch::kGemma4), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4);
    out.push_back({"moe-nvfp4-experts", s, true, true});
  }
  {
    // A window of 3 against a 24-token prompt: most keys are masked on the sliding layers.
    auto s = all(base(Arch::kGemma4), GgmlType::BF16);
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_swa = 3;
    s.g4.swa_pattern = {true, true, false, true};
    Config c{"swa3-prompt24", s};
    c.prompt_len = 24;
    out.push_back(c);
  }
  for (Config& c : out)
    if (c.spec.arch == Arch::kGemma4) c.gpu_auto_as_cpu = true;  // its GPU auto rounds as the CPU (above)
  {
    // The README's default model (byte-BPE vocab, NVFP4 attention + experts), 100-token prompt.
    auto s = ft::testgen::preset("default", Arch::kQwen3Moe);
    Config c{"default-preset", s, true, false};
    c.prompt_len = 100;
    out.push_back(c);
  }
  // ---- qwen35 / qwen35moe (spec qwen35.md §5): Gated DeltaNet layers 0, 2 and gated full
  // attention layers 1, 3; 100-token prompts run the conv window and the delta-rule state
  // over many steps (and past one 64-token chunk) before the 32 decoded tokens ----
  // Rule (b) with the default bounds: the conv, delta rule, gated norm, RoPE and attention
  // round as ggml-cpu's do, so no Q8 rounding flips (measured max|dlogit| 0 on NVFP4; it was
  // 0.05..0.3 at 51..100-token prompts while they differed by ulps: drift_probe_test.cpp).
  auto q35 = [&](const std::string& cfg, const ModelSpec& s, bool scaled) {
    Config c{cfg, s, scaled, scaled};
    c.prompt_len = 100;
    out.push_back(c);
  };
  q35("bf16", all(base(Arch::kQwen35), GgmlType::BF16), false);
  // NVFP4 with scales on the attention and the GDN projections (attn_qkv, attn_gate,
  // ssm_alpha, ssm_beta, ssm_out), the FFN and the output.
  q35("nvfp4-attn-ssm-mlp-output",
      with(all(base(Arch::kQwen35), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput}, GgmlType::NVFP4), true);
  q35("bf16", all(base(Arch::kQwen35Moe), GgmlType::BF16), false);
  // NVFP4 experts (per-expert scales), shared expert (role mlp), attention/GDN and output.
  q35("nvfp4-experts-shexp-attn-ssm-output",
      with(all(base(Arch::kQwen35Moe), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput},
           GgmlType::NVFP4),
      true);
  {
    auto s = all(base(Arch::kQwen35Moe), GgmlType::BF16);
    s.q35.merged_gate_up_exps = true;
    q35("bf16-merged-gate-up", s, false);
  }
  return out;
}

std::string test_name(const Config& c) {
  std::string s = std::string(ft::testgen::arch_name(c.spec.arch)) + "_" + c.cfg;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

void PrintTo(const Config& c, std::ostream* os) { *os << test_name(c); }

class Parity : public ::testing::TestWithParam<Config> {};

TEST_P(Parity, MatchesLlamaCpp) {
  const Config& c = GetParam();
  const std::string arch(ft::testgen::arch_name(c.spec.arch));
  const fs::path dir = ft::oracle_test::models_dir(test_name(c));
  const std::string model = (dir / "model.gguf").string(), twin = (dir / "twin.f32.gguf").string(),
                    noscale = (dir / "noscale.gguf").string();
  const auto gen = ft::testgen::generate_model(c.spec, model, twin, c.check_noscale ? noscale : "");
  if (c.check_noscale) {
    ASSERT_GT(gen.n_scale_tensors, 0) << "config should carry .scale tensors";
  }

  std::vector<int> prompt;
  for (int i = 0; i < c.prompt_len; ++i) prompt.push_back(static_cast<int>((37 * i + 11 * c.spec.seed + 5) % gen.n_vocab));

  // ---- (a) exact math ----
  const Oracle ref = run_oracle(twin, prompt);
  ASSERT_TRUE(ref.ok) << "llama.cpp failed on the F32 twin " << twin;
  ASSERT_EQ(static_cast<int>(ref.tokens.size()), kTokens);
  // The model must not be degenerate (a constant repeat would make the comparison weak).
  EXPECT_GE(std::set<int>(ref.tokens.begin(), ref.tokens.end()).size(), 6u) << "generated tokens barely vary";
  const Ours free = run_ours(model, prompt, "float32", nullptr, (dir / "logits.json").string());
  ASSERT_TRUE(free.ok) << "ft generate failed (rc " << free.rc << ") on " << model;
  const Ours tf = run_ours(model, prompt, "float32", &ref.tokens, (dir / "logits_tf.json").string());
  ASSERT_TRUE(tf.ok) << "ft generate --force-tokens failed (rc " << tf.rc << ") on " << model;

  const float dlogit = max_abs_diff(ref.logits, free.logits);
  int tf_ok = 0;
  for (int i = 0; i < kTokens && i < static_cast<int>(tf.tokens.size()); ++i) {
    const bool same = tf.tokens[i] == ref.tokens[i];
    if (same || ref.margins[i] < kNearTie) ++tf_ok;
    EXPECT_TRUE(same || ref.margins[i] < kNearTie)
        << "teacher-forced step " << i << ": ours " << tf.tokens[i] << ", llama.cpp " << ref.tokens[i]
        << " (margin " << ref.margins[i] << ")";
  }
  EXPECT_EQ(static_cast<int>(tf.tokens.size()), kTokens);
  const int free_same = common_prefix(free.tokens, ref.tokens);
  const bool free_ok = free_same >= kTokens || ref.margins[free_same] < kNearTie;
  EXPECT_LE(dlogit, kExactLogitTol) << "prompt logits differ from llama.cpp on the F32 twin";
  EXPECT_TRUE(free_ok) << "free-running tokens diverge at step " << free_same << " where llama.cpp's margin is "
                       << (free_same < kTokens ? ref.margins[free_same] : 0.0f);

  // ---- (b) llama.cpp's numerics on the quantised file (--dtype auto) ----
  const bool gpu = device() == "cuda";
  float near_b = gpu ? kNearTieGpu : c.near_tie_b, tol_b = gpu ? kQuantFileTolGpu : c.quant_file_tol;
  if (gpu && c.gpu_auto_as_cpu) near_b = kNearTieGpuCpuNumerics, tol_b = kQuantFileTolGpuCpuNumerics;
  const Oracle q = run_oracle(model, prompt);
  ASSERT_TRUE(q.ok) << "llama.cpp failed on the quantised file " << model;
  ASSERT_EQ(static_cast<int>(q.tokens.size()), kTokens);
  const int f32_same = common_prefix(free.tokens, q.tokens);  // exact math vs llama.cpp's numerics
  const Ours qa = run_ours(model, prompt, "auto", nullptr, (dir / "logits_auto.json").string());
  ASSERT_TRUE(qa.ok) << "ft generate --dtype auto failed (rc " << qa.rc << ") on " << model;
  const Ours qtf = run_ours(model, prompt, "auto", &q.tokens, (dir / "logits_auto_tf.json").string());
  ASSERT_TRUE(qtf.ok) << "ft generate --dtype auto --force-tokens failed (rc " << qtf.rc << ") on " << model;
  const float dq = max_abs_diff(q.logits, qa.logits);
  int q_tf_ok = 0;
  for (int i = 0; i < kTokens && i < static_cast<int>(qtf.tokens.size()); ++i) {
    const bool same = qtf.tokens[i] == q.tokens[i];
    if (same || q.margins[i] < near_b) ++q_tf_ok;
    EXPECT_TRUE(same || q.margins[i] < near_b)
        << "--dtype auto, teacher-forced step " << i << ": ours " << qtf.tokens[i] << ", llama.cpp "
        << q.tokens[i] << " (margin " << q.margins[i] << ")";
  }
  EXPECT_EQ(static_cast<int>(qtf.tokens.size()), kTokens);
  const int q_same = common_prefix(qa.tokens, q.tokens);
  char q_margin[32] = "-";
  if (q_same < kTokens) std::snprintf(q_margin, sizeof q_margin, "%.3g", q.margins[q_same]);
  EXPECT_TRUE(q_same >= kTokens || q.margins[q_same] < near_b)
      << "--dtype auto free-running tokens diverge from llama.cpp on the quantised file at step " << q_same
      << " where llama.cpp's margin is " << q_margin;
  EXPECT_LE(dq, tol_b) << "--dtype auto vs llama.cpp on the quantised file: prompt logits too far apart";

  std::string extra;
  // ---- GPU: bf16 / f16 activations follow llama.cpp on the quantised file too ----
  // Asserted for dense models. In MoE models a reduced-precision router input picks another
  // expert wherever llama.cpp's routing margin is small, which moves the output logits by
  // more than any token margin (H200, 2026-11-29: divergences at token margins 0.44-2.1, all
  // in MoE configs, at steps 7-27); there the counts are reported and the GPU is held to the
  // CPU engine in the same dtype instead (tests/cuda/gpu_session_test.cpp).
  const bool moe = c.spec.arch == Arch::kQwen3Moe || c.spec.arch == Arch::kQwen35Moe ||
                   ((c.spec.arch == Arch::kLlama || c.spec.arch == Arch::kGemma4) && c.spec.n_expert > 0);
  if (gpu) {
    for (const char* dt : {"bfloat16", "float16"}) {
      const Ours o = run_ours(model, prompt, dt, nullptr, (dir / (std::string("logits_b_") + dt + ".json")).string());
      ASSERT_TRUE(o.ok) << "--dtype " << dt << " failed (rc " << o.rc << ")";
      const int same = common_prefix(o.tokens, q.tokens);
      // Held at least as far as exact fp32 math follows llama.cpp's 8-bit rounding (f32_same):
      // a reduced-precision run cannot be asked to track that rounding better than exact math.
      EXPECT_TRUE(moe || same >= kTokens || same >= f32_same || q.margins[same] < kNearTieGpu)
          << "--dtype " << dt << " free-running tokens diverge from llama.cpp on the quantised file at step " << same
          << " where llama.cpp's margin is " << (same < kTokens ? q.margins[same] : 0.0f);
      char b[64];
      std::snprintf(b, sizeof b, " | %s free %d/%d", dt, same, kTokens);
      extra += b;
    }
  }
  // ---- scales must matter ----
  if (c.check_noscale) {
    const Ours ns = run_ours(noscale, prompt, "float32", nullptr, (dir / "logits_ns.json").string());
    const float dns = ns.ok ? max_abs_diff(ref.logits, ns.logits) : INFINITY;
    EXPECT_GT(dns, kExactLogitTol) << "the copy without .scale tensors passes rule (a): the scales do not matter";
    char b[64];
    std::snprintf(b, sizeof b, " | no-scale copy: max|dlogit|=%.3g", dns);
    extra += b;
  }
  // ---- reduced-precision activations on the scaled file ----
  if (c.check_dtypes) {
    for (const char* dt : {"bfloat16", "float16"}) {
      const Ours o = run_ours(model, prompt, dt, nullptr, (dir / (std::string("logits_") + dt + ".json")).string());
      const float d = o.ok ? max_abs_diff(free.logits, o.logits) : INFINITY;
      EXPECT_TRUE(o.ok) << "--dtype " << dt << " failed (rc " << o.rc << ")";
      EXPECT_LE(d, kDtypeTol) << "--dtype " << dt << " logits (finite? max|d| vs fp32 = " << d << ")";
      char b[64];
      std::snprintf(b, sizeof b, " | %s vs fp32: %.3g", dt, d);
      extra += b;
    }
  }

  char line[512];
  std::snprintf(line, sizeof line,
                "PARITY device=%s arch=%s cfg=%s exact: max|dlogit|=%.2g tf %d/%d free %d/%d | quantized-file, auto: "
                "max|dlogit|=%.2g tf %d/%d free %d/%d (margin %s); float32 free %d/%d%s\n",
                device().c_str(), arch.c_str(), c.cfg.c_str(), dlogit, tf_ok, kTokens, free_same, kTokens, dq, q_tf_ok, kTokens, q_same,
                kTokens, q_margin, f32_same, kTokens, extra.c_str());
  std::fputs(line, stdout);
}

INSTANTIATE_TEST_SUITE_P(Models, Parity, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return test_name(i.param); });

}  // namespace
