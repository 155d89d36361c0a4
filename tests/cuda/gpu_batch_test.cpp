// The GPU batch runner (gpu/batch_runner_gpu.h) against GpuSession, one sequence at a time:
// 11 sequences with prompts of 1..19 tokens join at different steps, prefill in chunks of
// up to 5 tokens beside the others' decode steps, and leave after 12..20 generated tokens, so
// steps run 1..11 sequences and up to 17 tokens (decode-only steps up to 11) (the GEMV path up to 8 tokens, the GEMM path above, MoE experts
// of all tokens through one backend call per layer). Greedy, free-running: each sequence's
// tokens equal the ones it generates alone, up to a step where the lone run's top-2 margin
// is a near tie; its logits stay within a per-dtype tolerance. Then a prompt extending a
// finished sequence's text reuses its slot (n_cached > 0) with the lone run's logits, and
// graphs off gives the tokens of graphs on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/device.h"
#include "engine/batch_runner.h"
#include "engine/sampler.h"
#include "gpu/batch_runner_gpu.h"
#include "gpu/session.h"
#include "model/model.h"
#include "session_test_util.h"

using ft::GgmlType;
using ft::testgen::Arch;
using ft::testgen::Role;
using namespace ft::gpu_test;

namespace {

std::vector<Case> cases() {
  auto base = [](Arch a) { return ft::gpu_test::base(a, 5); };
  std::vector<Case> v;
  v.push_back({"llama_f32", base(Arch::kLlama)});
  v.push_back({"qwen3_q8_0", all(base(Arch::kQwen3), GgmlType::Q8_0)});
  v.push_back({"qwen3moe_bf16", all(base(Arch::kQwen3Moe), GgmlType::BF16)});
  v.push_back({"qwen3moe_nvfp4", with(all(base(Arch::kQwen3Moe), GgmlType::BF16), {Role::kExperts}, GgmlType::NVFP4)});
  return v;
}

// fp32: GEMM vs GEMV summation order only. auto: above 8 tokens the batch runs bf16 tensor
// cores where a lone decode step runs Q8 dp4a GEMVs (llama.cpp's split as well).
float tol(const std::string& dtype) { return dtype == "float32" ? 2e-3f : 1.0f; }
float near_tie(const std::string& dtype) { return dtype == "float32" ? 1e-3f : 0.5f; }

struct Seq {
  std::vector<int32_t> prompt;
  int n_gen = 0;
  int join = 0;  // step at which it is added
};

std::vector<Seq> seqs(int64_t n_vocab) {
  const int lens[] = {7, 1, 19, 3, 12, 5, 9, 2, 16, 4, 11};
  const int gens[] = {20, 16, 18, 19, 14, 17, 15, 18, 14, 16, 12};
  const int joins[] = {0, 0, 0, 1, 2, 3, 5, 5, 8, 9, 12};
  std::vector<Seq> v;
  for (int i = 0; i < 11; ++i) {
    Seq s;
    for (int j = 0; j < lens[i]; ++j) s.prompt.push_back(static_cast<int32_t>((37 * i + 11 * j + 5) % n_vocab));
    s.n_gen = gens[i];
    s.join = joins[i];
    v.push_back(s);
  }
  return v;
}

struct Alone {
  std::vector<int32_t> tokens;             // greedy, n_gen of them
  std::vector<std::vector<float>> logits;  // before each token
};

Alone run_alone(ft::gpu::GpuSession& g, const Seq& s) {
  Alone a;
  const int64_t V = g.n_vocab();
  g.reset();
  const float* l = g.eval(s.prompt.data(), static_cast<int64_t>(s.prompt.size()));
  for (int k = 0; k < s.n_gen; ++k) {
    a.logits.emplace_back(l, l + V);
    const int32_t t = ft::engine::argmax(l, static_cast<int32_t>(V));
    a.tokens.push_back(t);
    if (k + 1 < s.n_gen) l = g.eval(&t, 1);
  }
  return a;
}

struct Batched {
  std::vector<std::vector<int32_t>> tokens;
  int max_batch = 0;
  float dmax = 0;
  int agree = 0, compared = 0;
};

// Steps all sequences through the batch runner as the scheduler does (decode items first,
// then a prompt chunk of up to 5 tokens for every sequence still reading its prompt).
// device_argmax: the runner picks each row's argmax on the device (set_argmax_only).
Batched run_batched(ft::engine::BatchRunner& br, const std::vector<Seq>& ss, const std::vector<Alone>& alone,
                    const std::string& dtype, bool device_argmax = false) {
  const int64_t V = br.n_vocab();
  const size_t n = ss.size();
  Batched out;
  out.tokens.resize(n);
  std::vector<int64_t> id(n, -1), fed(n, 0);
  std::vector<bool> done(n, false), diverged(n, false);
  std::vector<int32_t> next(n, 0);
  for (int step = 0; std::find(done.begin(), done.end(), false) != done.end(); ++step) {
    for (size_t i = 0; i < n; ++i)
      if (ss[i].join == step) {
        int64_t cached = -1;
        id[i] = br.add_sequence(ss[i].prompt.data(), static_cast<int64_t>(ss[i].prompt.size()), false, &cached);
        EXPECT_EQ(cached, 0);
      }
    std::vector<ft::engine::BatchItem> items;
    std::vector<size_t> who;
    for (size_t i = 0; i < n; ++i)
      if (id[i] >= 0 && !done[i] && fed[i] == static_cast<int64_t>(ss[i].prompt.size())) {
        items.push_back({id[i], &next[i], 1});
        who.push_back(i);
      }
    for (size_t i = 0; i < n; ++i) {
      const auto len = static_cast<int64_t>(ss[i].prompt.size());
      if (id[i] < 0 || done[i] || fed[i] == len) continue;
      const int64_t c = std::min<int64_t>(5, len - fed[i]);
      items.push_back({id[i], ss[i].prompt.data() + fed[i], c});
      who.push_back(i);
    }
    if (items.empty()) continue;
    out.max_batch = std::max(out.max_batch, static_cast<int>(items.size()));
    br.set_argmax_only(device_argmax);
    const float* l = br.step(items);
    const int32_t* am = br.argmax_rows();
    EXPECT_EQ(l == nullptr, device_argmax);
    EXPECT_EQ(am != nullptr, device_argmax);
    for (size_t r = 0; r < items.size(); ++r) {
      const size_t i = who[r];
      const float* row = l ? l + r * V : nullptr;
      if (items[r].tokens != &next[i]) {  // a prompt chunk
        fed[i] += items[r].n;
        if (fed[i] < static_cast<int64_t>(ss[i].prompt.size())) continue;
      }
      const size_t k = out.tokens[i].size();
      const int32_t t = am ? am[r] : ft::engine::argmax(row, static_cast<int32_t>(V));
      out.tokens[i].push_back(t);
      if (!diverged[i]) {
        const std::vector<float>& want = alone[i].logits[k];
        if (row) out.dmax = std::max(out.dmax, max_abs_diff(row, want.data(), V));
        ++out.compared;
        if (t == alone[i].tokens[k]) {
          ++out.agree;
        } else {
          const float m = top2_margin(want.data(), V);
          EXPECT_LT(m, near_tie(dtype)) << "sequence " << i << " token " << k << ": batched " << t << ", alone "
                                        << alone[i].tokens[k] << " (alone margin " << m << ")";
          diverged[i] = true;
        }
      }
      next[i] = t;
      if (static_cast<int>(out.tokens[i].size()) == ss[i].n_gen) {
        done[i] = true;
        br.remove_sequence(id[i]);
      }
    }
  }
  return out;
}

class GpuBatch : public ::testing::TestWithParam<Param> {};

TEST_P(GpuBatch, SequencesTogetherMatchAlone) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Param& p = GetParam();
  const fs::path dir = test_dir("ft-gpu-batch-");
  const TestModel tm = write_model(p.c.spec, dir, p.c.name);
  const ft::model::Model& m = *tm.m;
  const int64_t V = m.hp.n_vocab;
  const std::vector<Seq> ss = seqs(tm.gen.n_vocab);

  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 64;
  go.dtype = p.dtype;
  ft::gpu::GpuSession lone(m, go);
  std::vector<Alone> alone;
  for (const Seq& s : ss) alone.push_back(run_alone(lone, s));

  ft::gpu::GpuSession host(m, go);
  auto br = ft::gpu::make_gpu_batch_runner(host, 12);
  const Batched b = run_batched(*br, ss, alone, p.dtype);
  EXPECT_GE(b.max_batch, 9) << "no step ran more than 8 sequences (the GEMM path and its head)";
  if (p.dtype == "float32") {
    EXPECT_LE(b.dmax, tol(p.dtype)) << "logits";
  }
  std::printf("GPU-BATCH %s %s: %d sequences, up to %d a step, max|dlogit| vs alone %.3g, tokens agree %d/%d\n",
              p.c.name.c_str(), p.dtype.c_str(), static_cast<int>(ss.size()), b.max_batch, b.dmax, b.agree,
              b.compared);
  EXPECT_GE(b.agree * 10, b.compared * 9) << "fewer than 90% of the tokens agree";

  // Prefix reuse: sequence 0's text plus 2 tokens takes over its slot.
  std::vector<int32_t> ext = ss[0].prompt;
  ext.insert(ext.end(), b.tokens[0].begin(), b.tokens[0].begin() + 5);
  ext.push_back(3);
  ext.push_back(9);
  int64_t cached = 0;
  const int64_t id = br->add_sequence(ext.data(), static_cast<int64_t>(ext.size()), true, &cached);
  EXPECT_GE(cached, static_cast<int64_t>(ss[0].prompt.size()) + 5) << "the finished text was not reused";
  const int64_t rest = static_cast<int64_t>(ext.size()) - cached;
  const float* lr = br->step({{id, ext.data() + cached, rest}});
  std::vector<float> got(lr, lr + V);
  EXPECT_EQ(br->n_past(id), static_cast<int64_t>(ext.size()));
  br->remove_sequence(id);
  lone.reset();
  const float* la = lone.eval(ext.data(), static_cast<int64_t>(ext.size()));
  const float dr = max_abs_diff(got.data(), la, V);
  std::printf("GPU-BATCH %s %s: prefix reuse %lld of %zu tokens cached, max|dlogit| %.3g\n", p.c.name.c_str(),
              p.dtype.c_str(), static_cast<long long>(cached), ext.size(), dr);
  EXPECT_LE(dr, p.dtype == "float32" ? tol(p.dtype) : 2.0f);

  // The argmax on the device: the same tokens.
  {
    ft::gpu::GpuSession h(m, go);
    auto r = ft::gpu::make_gpu_batch_runner(h, 12);
    EXPECT_EQ(b.tokens, run_batched(*r, ss, alone, p.dtype, true).tokens) << "device argmax";
  }
  // Graphs off: the same tokens.
  go.graphs = false;
  ft::gpu::GpuSession host2(m, go);
  auto br2 = ft::gpu::make_gpu_batch_runner(host2, 12);
  const Batched b2 = run_batched(*br2, ss, alone, p.dtype);
  EXPECT_EQ(b.tokens, b2.tokens) << "graphs change the tokens";
  EXPECT_EQ(b.dmax, b2.dmax) << "graphs change the logits";
  std::error_code ec;
  fs::remove(tm.path, ec);
}

// A step of one sequence runs the session's one-sequence pass on that sequence's KV slot
// (GpuForward::set_solo): its logits are the lone session's bit for bit. Three sequences read a
// first chunk of 5, 12 (the GEMM path) and 1 tokens, then a token a step in turn, so slots 1 and 2
// are read at their offsets; the tensor-core decode attention from 6 keys on (where the model's
// shape takes it), so both attention graphs replay.
TEST_P(GpuBatch, OneSequenceStepsEqualTheSessionBitwise) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Param& p = GetParam();
  const fs::path dir = test_dir("ft-gpu-batch-solo-");
  const TestModel tm = write_model(p.c.spec, dir, p.c.name);
  const ft::model::Model& m = *tm.m;
  const int64_t V = m.hp.n_vocab;
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 32;
  go.dtype = p.dtype;
  go.attn_mma_min_keys = 6;
  std::vector<std::vector<int32_t>> text(3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 14; ++j) text[i].push_back(static_cast<int32_t>((29 * i + 13 * j + 3) % tm.gen.n_vocab));
  const int chunk[3] = {5, 12, 1};
  // Alone: the chunk, then token by token through the session's decode step.
  ft::gpu::GpuSession lone(m, go);
  std::vector<std::vector<std::vector<float>>> want(3);
  for (int i = 0; i < 3; ++i) {
    lone.reset();
    const float* l = lone.eval(text[i].data(), chunk[i]);
    want[i].emplace_back(l, l + V);
    for (int j = chunk[i]; j < 14; ++j) {
      l = lone.eval(&text[i][j], 1);
      want[i].emplace_back(l, l + V);
    }
  }
  // The batch side warmed up (the session and the runner, as ft serve does; the lone one not): the warm-up leaves
  // no trace -- no cached prefix of its tokens, the same bits after it.
  ft::gpu::GpuSession host(m, go);
  host.warmup();
  EXPECT_EQ(host.n_past(), 0);
  auto br = ft::gpu::make_gpu_batch_runner(host, 3);
  br->warmup();
  {
    const std::vector<int32_t> zeros(20, 0);
    int64_t n_cached = -1;
    const int64_t z = br->add_sequence(zeros.data(), 20, true, &n_cached);
    EXPECT_EQ(n_cached, 0) << "the warm-up's tokens stay cached";
    br->remove_sequence(z);
  }
  std::vector<int64_t> id(3);
  for (int i = 0; i < 3; ++i) id[i] = br->add_sequence(text[i].data(), 14, false, nullptr);
  int differ = 0, steps = 0;
  auto check = [&](int i, size_t at, const float* l) {
    ++steps;
    if (std::memcmp(l, want[i][at].data(), V * sizeof(float)) != 0) {
      ++differ;
      ADD_FAILURE() << "sequence " << i << " logits " << at << ": max|dlogit| " << max_abs_diff(l, want[i][at].data(), V);
    }
  };
  for (int i = 0; i < 3; ++i) check(i, 0, br->step({{id[i], text[i].data(), chunk[i]}}));
  for (int j = 1; j < 14; ++j)
    for (int i = 0; i < 3; ++i)
      if (chunk[i] + j - 1 < 14) check(i, j, br->step({{id[i], &text[i][chunk[i] + j - 1], 1}}));
  std::printf("GPU-BATCH %s %s: one-sequence steps, %d of %d differ from the session\n", p.c.name.c_str(),
              p.dtype.c_str(), differ, steps);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Errors users' requests can cause are ft::Errors, not crashes.
TEST(GpuBatchErrors, BadItems) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = test_dir("ft-gpu-batch-err-");
  const TestModel tm = write_model(ft::testgen::preset("tiny", Arch::kQwen3), dir, "m");
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 16;
  go.dtype = "float32";
  ft::gpu::GpuSession s(*tm.m, go);
  auto br = ft::gpu::make_gpu_batch_runner(s, 2);
  std::vector<int32_t> p(10, 1);
  const int64_t a = br->add_sequence(p.data(), 10, false, nullptr);
  br->add_sequence(p.data(), 10, false, nullptr);
  EXPECT_THROW(br->add_sequence(p.data(), 10, false, nullptr), ft::Error);  // full
  EXPECT_THROW(br->step({{a + 7, p.data(), 1}}), ft::Error);                 // no such sequence
  const int32_t bad = 1 << 20;
  EXPECT_THROW(br->step({{a, &bad, 1}}), ft::Error);  // out of vocabulary
  br->step({{a, p.data(), 10}});
  EXPECT_THROW(br->step({{a, p.data(), 7}}), ft::Error);  // 10 + 7 > 16
  EXPECT_EQ(br->n_past(a), 10);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Models, GpuBatch, ::testing::ValuesIn(params(cases(), {"float32", "auto"})), param_name);

// Through the engine hook: make_batch_runner finds the GPU runner once it is registered.
TEST(GpuBatchHook, MakeBatchRunnerFindsGpuSession) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = test_dir("ft-gpu-batch-hook-");
  const TestModel tm = write_model(ft::testgen::preset("tiny", Arch::kLlama), dir, "m");
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 32;
  ft::gpu::GpuSession s(*tm.m, go);
  ft::gpu::register_gpu_batch_runner();
  auto br = ft::engine::make_batch_runner(s, 3);
  ASSERT_NE(br, nullptr);
  EXPECT_EQ(br->max_sequences(), 3);
  EXPECT_NE(br->describe().find("batched on the GPU"), std::string::npos);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
