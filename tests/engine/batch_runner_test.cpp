// BatchRunner against the single-sequence Session: B sequences stepped together (prefills of
// different lengths in one step, then batched decode) give each sequence the logits it gets
// alone, up to fp32 summation order, and the same greedy tokens. Prefix pages are shared
// and freed with their last sequence.
#include "engine/batch_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/sampler.h"
#include "engine/session.h"
#include "model/model.h"
#include "testgen/model_gen.h"

namespace ft::engine {
namespace {

std::string model_file(testgen::Arch arch) {
  const auto dir = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "batch" / std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string p = (dir / (std::string(testgen::arch_name(arch)) + ".gguf")).string();
  if (!std::filesystem::exists(p)) testgen::generate_model(testgen::preset("tiny", arch), p);
  return p;
}

std::vector<int32_t> prompt_of(int n, int seed, int64_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed * 131 + i * 29 + i * i) % n_vocab);
  return t;
}

struct Trace {
  std::vector<std::vector<float>> logits;  // after the prompt, then after each fed token
  std::vector<int32_t> tokens;             // greedy picks
};

SessionOptions options(quant::ActQuant aq, ActType act = ActType::kF32) {
  SessionOptions so;
  so.act = act;
  so.n_ctx = 128;
  so.n_threads = 2;
  so.act_quant = aq;
  return so;
}

Trace alone(const model::Model& m, const std::vector<int32_t>& prompt, int n_gen, quant::ActQuant aq,
            ActType act) {
  Session s(m, options(aq, act));
  Trace tr;
  const float* l = s.eval(prompt.data(), static_cast<int64_t>(prompt.size()));
  for (int i = 0; i < n_gen; ++i) {
    tr.logits.emplace_back(l, l + m.hp.n_vocab);
    const int32_t id = argmax(l, static_cast<int32_t>(m.hp.n_vocab));
    tr.tokens.push_back(id);
    l = s.eval(&id, 1);
  }
  return tr;
}

// All prompts prefilled in one step, then n_gen batched decode steps.
std::vector<Trace> together(BatchRunner& br, const std::vector<std::vector<int32_t>>& prompts, int n_gen) {
  const int64_t V = br.n_vocab();
  std::vector<int64_t> ids;
  std::vector<BatchItem> items;
  for (const auto& p : prompts) {
    int64_t nc = -1;
    ids.push_back(br.add_sequence(p.data(), static_cast<int64_t>(p.size()), false, &nc));
    EXPECT_EQ(nc, 0);
    items.push_back({ids.back(), p.data(), static_cast<int64_t>(p.size())});
  }
  std::vector<Trace> tr(prompts.size());
  std::vector<int32_t> next(prompts.size());
  const float* l = br.step(items);
  for (int g = 0; g < n_gen; ++g) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      tr[i].logits.emplace_back(l + i * V, l + (i + 1) * V);
      next[i] = argmax(l + i * V, static_cast<int32_t>(V));
      tr[i].tokens.push_back(next[i]);
      items[i] = {ids[i], &next[i], 1};
    }
    l = br.step(items);
  }
  for (int64_t id : ids) br.remove_sequence(id);
  return tr;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// The last-token logits a fresh session computes for `tokens` (fp32, no activation rounding).
std::vector<float> fresh_logits(const model::Model& m, const std::vector<int32_t>& tokens) {
  Session ref(m, options(quant::ActQuant::kNone));
  const float* r = ref.eval(tokens.data(), static_cast<int64_t>(tokens.size()));
  return std::vector<float>(r, r + m.hp.n_vocab);
}

// One architecture with one activation setting; `paged` says which runner it must get
// (the paged one for the attention-only architectures, the serial fallback otherwise).
struct BatchCase {
  std::string name;
  testgen::Arch arch;
  quant::ActQuant aq;
  ActType act;
  bool paged;
};

class BatchedVsAlone : public ::testing::TestWithParam<BatchCase> {};

TEST_P(BatchedVsAlone, EachSequenceGetsItsAloneLogitsAndTokens) {
  const BatchCase& c = GetParam();
  auto m = model::load_model(model_file(c.arch));
  Session host(*m, options(c.aq, c.act));
  auto br = make_batch_runner(host, 4, 16);
  ASSERT_TRUE(br);
  EXPECT_EQ(br->describe().find("paged") != std::string::npos, c.paged) << br->describe();
  // Lengths across page boundaries (16): inside one page, exactly two, past two.
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 1, m->hp.n_vocab), prompt_of(32, 2, m->hp.n_vocab),
                                                     prompt_of(37, 3, m->hp.n_vocab), prompt_of(1, 4, m->hp.n_vocab)};
  constexpr int kGen = 20;
  const auto batched = together(*br, prompts, kGen);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Trace ref = alone(*m, prompts[i], kGen, c.aq, c.act);
    EXPECT_EQ(batched[i].tokens, ref.tokens) << "sequence " << i;
    float worst = 0.0f, scale = 0.0f;
    for (int g = 0; g < kGen; ++g) {
      worst = std::max(worst, max_diff(batched[i].logits[g], ref.logits[g]));
      for (float x : ref.logits[g]) scale = std::max(scale, std::fabs(x));
    }
    // Only the summation order of the B-row matmuls differs from the one-row ones.
    EXPECT_LE(worst, 1e-4f * scale) << "sequence " << i << " (logits up to " << scale << ")";
  }
  const KvPageStats st = br->kv_stats();
  EXPECT_EQ(st.used, 0);
  EXPECT_EQ(st.free, st.total);
}

using testgen::Arch;
using quant::ActQuant;
INSTANTIATE_TEST_SUITE_P(
    Archs, BatchedVsAlone,
    ::testing::Values(BatchCase{"llama", Arch::kLlama, ActQuant::kNone, ActType::kF32, true},
                      BatchCase{"qwen3_q8", Arch::kQwen3, ActQuant::kQ8, ActType::kF32, true},
                      // A bf16 KV cache and bf16-rounded activations (--dtype bfloat16).
                      BatchCase{"qwen3_bf16", Arch::kQwen3, ActQuant::kNone, ActType::kBF16, true},
                      BatchCase{"qwen3moe", Arch::kQwen3Moe, ActQuant::kNone, ActType::kF32, true},
                      BatchCase{"qwen3moe_q8", Arch::kQwen3Moe, ActQuant::kQ8, ActType::kF32, true},
                      BatchCase{"gemma4_serial", Arch::kGemma4, ActQuant::kNone, ActType::kF32, false},
                      BatchCase{"qwen35_serial", Arch::kQwen35, ActQuant::kNone, ActType::kF32, false}),
    [](const ::testing::TestParamInfo<BatchCase>& i) { return i.param.name; });

// Two sequences with a 40-token common prefix: the second takes the first's two full pages
// (the third is partial) and still computes what a fresh session computes.
void expect_prefix_shared(testgen::Arch arch, int64_t want_cached) {
  auto m = model::load_model(model_file(arch));
  Session host(*m, options(quant::ActQuant::kNone));
  auto br = make_batch_runner(host, 4, 16);
  const int64_t V = m->hp.n_vocab;
  auto a = prompt_of(40, 7, V);
  auto b = a;
  b.push_back(3);
  b.push_back(5);
  int64_t nc = -1;
  const int64_t sa = br->add_sequence(a.data(), 40, true, &nc);
  EXPECT_EQ(nc, 0);
  br->step({{sa, a.data(), 40}});
  const int64_t sb = br->add_sequence(b.data(), 42, true, &nc);
  EXPECT_EQ(nc, want_cached);
  const float* l = br->step({{sb, b.data() + nc, 42 - nc}});
  EXPECT_LE(max_diff(std::vector<float>(l, l + V), fresh_logits(*m, b)), 1e-4f);
  if (want_cached == 32) {
    EXPECT_EQ(br->kv_stats().shared, 2);
  }
  br->remove_sequence(sa);
  br->remove_sequence(sb);
  EXPECT_EQ(br->kv_stats().used, 0);
  EXPECT_GT(br->kv_stats().cached, 0);
  // A prompt that is exactly a cached prefix still evaluates its last token.
  const int64_t sc = br->add_sequence(a.data(), 32, true, &nc);
  EXPECT_EQ(nc, arch == testgen::Arch::kQwen3 ? 16 : 0);
  br->remove_sequence(sc);
}

TEST(BatchRunner, PagedSharesPrefixPages) { expect_prefix_shared(testgen::Arch::kQwen3, 32); }
// The serial fallback reuses a slot only when the prompt extends all of its text; sa's
// slot is still running when sb arrives, so nothing is shared.
TEST(BatchRunner, SerialReusesNothingWhileTheSlotRuns) { expect_prefix_shared(testgen::Arch::kQwen35, 0); }

TEST(BatchRunner, SerialReusesAFinishedSlotThatThePromptExtends) {
  auto m = model::load_model(model_file(testgen::Arch::kQwen35));
  Session host(*m, options(quant::ActQuant::kNone));
  auto br = make_batch_runner(host, 2, 16);
  const int64_t V = m->hp.n_vocab;
  auto a = prompt_of(20, 9, V);
  int64_t nc = -1;
  const int64_t sa = br->add_sequence(a.data(), 20, true, &nc);
  br->step({{sa, a.data(), 20}});
  br->remove_sequence(sa);
  auto b = a;
  b.push_back(11);
  const int64_t sb = br->add_sequence(b.data(), 21, true, &nc);
  EXPECT_EQ(nc, 20);
  const float* l = br->step({{sb, b.data() + 20, 1}});
  EXPECT_LE(max_diff(std::vector<float>(l, l + V), fresh_logits(*m, b)), 1e-4f);
}

TEST(BatchRunner, ErrorsNameTheProblem) {
  auto m = model::load_model(model_file(testgen::Arch::kQwen3));
  Session host(*m, options(quant::ActQuant::kNone));
  auto br = make_batch_runner(host, 1, 16);
  const int32_t t[2] = {1, static_cast<int32_t>(m->hp.n_vocab)};
  int64_t nc = 0;
  const int64_t s = br->add_sequence(t, 1, true, &nc);
  EXPECT_THROW(br->add_sequence(t, 1, true, &nc), std::exception);  // one slot only
  EXPECT_THROW(br->step({{s, t, 2}}), std::exception);               // id out of range
  EXPECT_THROW(br->step({{s + 1, t, 1}}), std::exception);           // no such sequence
  std::vector<int32_t> many(129, 1);
  EXPECT_THROW(br->step({{s, many.data(), 129}}), std::exception);   // past the context
}

// A prompt that extends a finished sequence's whole text (the next turn of a chat) takes its
// pages back, the partial last one included, unless one was handed out meanwhile.
TEST(BatchRunner, PagedRevivesTheLastFinishedText) {
  auto m = model::load_model(model_file(testgen::Arch::kQwen3));
  Session host(*m, options(quant::ActQuant::kNone));
  auto br = make_batch_runner(host, 2, 16);
  const int64_t V = m->hp.n_vocab;
  auto a = prompt_of(21, 5, V);
  int64_t nc = -1;
  const int64_t sa = br->add_sequence(a.data(), 21, true, &nc);
  br->step({{sa, a.data(), 21}});
  br->remove_sequence(sa);
  EXPECT_EQ(br->kv_stats().used, 0);
  auto b = a;
  b.push_back(17);
  const int64_t sb = br->add_sequence(b.data(), 22, true, &nc);
  EXPECT_EQ(nc, 21);
  EXPECT_EQ(br->kv_stats().used, 2);
  const float* l = br->step({{sb, b.data() + 21, 1}});
  EXPECT_LE(max_diff(std::vector<float>(l, l + V), fresh_logits(*m, b)), 1e-4f);
  br->remove_sequence(sb);
  // Another sequence takes the free pages first: only the published full page is left.
  auto c = prompt_of(40, 6, V);
  const int64_t sc = br->add_sequence(c.data(), 40, true, &nc);
  br->step({{sc, c.data(), 40}});
  br->remove_sequence(sc);
  b.push_back(4);
  const int64_t sd = br->add_sequence(b.data(), 23, true, &nc);
  EXPECT_LT(nc, 22);
  br->remove_sequence(sd);
}

// The paged runner frees the session's KV cache while it lives; afterwards the session
// evaluates as a fresh one does.
TEST(BatchRunner, SessionWorksAgainAfterThePagedRunner) {
  auto m = model::load_model(model_file(testgen::Arch::kLlama));
  Session host(*m, options(quant::ActQuant::kNone));
  const auto p = prompt_of(30, 8, m->hp.n_vocab);
  {
    auto br = make_batch_runner(host, 2, 16);
    EXPECT_LT(host.kv().bytes(), 1024u);
    int64_t nc = 0;
    const int64_t s = br->add_sequence(p.data(), 30, true, &nc);
    br->step({{s, p.data(), 30}});
  }
  EXPECT_EQ(host.n_past(), 0);
  const float* l = host.eval(p.data(), 30);
  std::vector<float> got(l, l + m->hp.n_vocab);
  Session ref(*m, options(quant::ActQuant::kNone));
  const float* r = ref.eval(p.data(), 30);
  EXPECT_EQ(got, std::vector<float>(r, r + m->hp.n_vocab));
  EXPECT_EQ(host.kv().bytes(), ref.kv().bytes());
}

}  // namespace
}  // namespace ft::engine
