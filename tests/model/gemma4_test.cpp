// gemma4 on the CPU engine, on tiny generated models: batch vs token-by-token decode with the
// sliding-window ring cache wrapping, the KV cache sized per layer type, the per-expert
// scale applied exactly once, the softcap default, and the loader's refusals.
// (Token parity with llama.cpp: tests/oracle/parity_test.cpp, configs gemma4_*.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "model_util.h"

namespace ft::model {
namespace {

using engine::ActType;
using test::max_diff;
using test::spread;
using testgen::Arch;
using testgen::ModelSpec;
using testgen::Role;

struct Files {
  std::string model, twin, noscale;
};

// "moe": spec config A (4 MoE layers, V = K on layer 1, output scales), NVFP4 attention,
// MLP, split experts and output with scales. "ple": config B (dense, per-layer inputs, the
// last two layers share layers 0/1's KV, double-wide MLPs), NVFP4 attention and MLP.
ModelSpec spec_of(const std::string& name) {
  ModelSpec s = testgen::preset("tiny", Arch::kGemma4);
  for (Role r : {Role::kEmbd, Role::kRouter}) s.set_type(r, GgmlType::BF16);
  for (Role r : {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput}) s.set_type(r, GgmlType::NVFP4);
  if (name == "ple") {
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_embd_per_layer = 16;
    s.g4.n_shared_kv = 2;
    s.g4.n_ff = {128, 128, 256, 256};
  }
  return s;
}

const Files& files(const std::string& name) {
  static std::map<std::string, Files> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  const std::string base = test::tmp_path("gemma4_" + name);
  Files f{base + ".gguf", base + "_twin.gguf", base + "_noscale.gguf"};
  testgen::generate_model(spec_of(name), f.model, f.twin, f.noscale);
  return cache[name] = f;
}

// 13 tokens: longer than the sliding window (8) of the tiny configs.
const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 3, 250, 7, 7, 128, 64, 5, 200, 31};

std::vector<float> run(const Model& m, bool batch, int64_t ubatch = 512, int threads = 2,
                       ActType act = ActType::kF32) {
  engine::SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = threads;
  o.act = act;
  o.n_ubatch = ubatch;
  engine::Session s(m, o);
  return test::all_logits(s, kPrompt, batch);
}

class Gemma4Test : public ::testing::TestWithParam<std::string> {};

// Token-by-token decode with n_ubatch 1 keeps only the window (8 rows) on sliding layers, so
// the ring wraps after 8 of the 13 tokens; micro-batches of 4 keep 11 rows.
// fp32 sums in another order move logits (spread > 5) by up to 3.4e-3 on "ple" (session 9,
// dev host with AVX-512: scalar 1.5e-3, AVX2 6.4e-4, AVX-512 1.5e-3 here and 3.4e-3 against
// the twin below); a wrong window, cache or scale moves them by tenths.
constexpr float kOrderTol = 5e-3f;

TEST_P(Gemma4Test, PrefillBatchMatchesRingDecode) {
  auto m = load_model(files(GetParam()).model);
  const auto batch = run(*m, true);
  EXPECT_GT(spread(batch), 5.0f);
  EXPECT_LT(max_diff(batch, run(*m, false, 1)), kOrderTol);
  EXPECT_LT(max_diff(batch, run(*m, true, 4)), kOrderTol);
}

TEST_P(Gemma4Test, ThreadCountDoesNotChangeResults) {
  auto m = load_model(files(GetParam()).model);
  EXPECT_EQ(run(*m, true, 512, 1), run(*m, true, 512, 3));
}

TEST_P(Gemma4Test, ScaledFileMatchesF32Twin) {
  auto m = load_model(files(GetParam()).model);
  auto t = load_model(files(GetParam()).twin);
  EXPECT_LT(max_diff(run(*m, true), run(*t, true)), kOrderTol);
}

TEST_P(Gemma4Test, IgnoringScalesChangesTheOutput) {
  auto m = load_model(files(GetParam()).model);
  auto n = load_model(files(GetParam()).noscale);
  const auto a = run(*m, true);
  EXPECT_GT(max_diff(a, run(*n, true)), 0.1f * spread(a));
}

TEST_P(Gemma4Test, ReducedPrecisionActivations) {
  auto m = load_model(files(GetParam()).model);
  const auto ref = run(*m, true);
  for (ActType act : {ActType::kBF16, ActType::kF16}) {
    const auto a = run(*m, true, 512, 2, act);
    for (float x : a) ASSERT_TRUE(std::isfinite(x)) << engine::act_type_name(act);
    EXPECT_LT(max_diff(a, ref), 0.15f * spread(ref)) << engine::act_type_name(act);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, Gemma4Test, ::testing::Values("moe", "ple"));

// Sliding layers keep window + n_ubatch - 1 rows, global layers the whole context, and a
// KV-shared layer none (it reads its source layer's cache).
TEST(Gemma4, KvCacheSizedPerLayerType) {
  auto m = load_model(files("ple").model);
  engine::SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 1;
  o.n_ubatch = 4;
  engine::Session s(*m, o);
  const HParams& hp = m->hp;
  ASSERT_EQ(hp.kv_src(2), 0);
  ASSERT_EQ(hp.kv_src(3), 1);
  EXPECT_EQ(s.kv().n_cells(0), 8 + 4 - 1);  // sliding, window 8
  EXPECT_EQ(s.kv().n_cells(1), 64);         // global
  const size_t row0 = static_cast<size_t>(hp.n_head_kv[0] * hp.head_dim(0)) * 4 * 2;  // K + V fp32
  const size_t row1 = static_cast<size_t>(hp.n_head_kv[1] * hp.head_dim(1)) * 4 * 2;
  EXPECT_EQ(s.kv().bytes(), 11 * row0 + 64 * row1);  // layers 2 and 3 store nothing
}

// ffn_down_exps.scale is the router's per_expert_scale (folded with the NVFP4 scale_2): the
// twin has it in the down rows. Leaving it out or applying it twice gives other logits.
TEST(Gemma4, PerExpertScaleAppliedExactlyOnce) {
  ModelSpec spec = testgen::preset("tiny", Arch::kGemma4);
  for (auto& r : spec.role_type) r = GgmlType::BF16;
  const std::string base = test::tmp_path("gemma4_pes");
  testgen::generate_model(spec, base + ".gguf", base + "_twin.gguf");
  auto twin = load_model(base + "_twin.gguf");
  const auto ref = run(*twin, true);
  EXPECT_LT(max_diff(run(*load_model(base + ".gguf"), true), ref), 1e-3f);

  auto is_down_scale = [](const gguf::TensorInfo& t) {
    return t.name.find("ffn_down_exps.scale") != std::string::npos;
  };
  // Without the scale tensors (loads: ffn_down_exps.scale is optional).
  test::rewrite_gguf(base + ".gguf", base + "_none.gguf", [&](const gguf::TensorInfo& t) { return !is_down_scale(t); },
                     nullptr);
  EXPECT_GT(max_diff(run(*load_model(base + "_none.gguf"), true), ref), 0.1f * spread(ref));
  // Squared (what a router that also applied it would compute).
  auto f = gguf::File::open(base + ".gguf");
  test::rewrite_gguf(base + ".gguf", base + "_twice.gguf", [&](const gguf::TensorInfo& t) { return !is_down_scale(t); },
                     [&](gguf::Writer& w) {
                       for (const auto& t : f->tensors()) {
                         if (!is_down_scale(t)) continue;
                         std::vector<float> v(reinterpret_cast<const float*>(t.data),
                                              reinterpret_cast<const float*>(t.data) + t.ne[0]);
                         for (float& x : v) x *= x;
                         std::vector<uint8_t> b(v.size() * 4);
                         std::memcpy(b.data(), v.data(), b.size());
                         w.add_tensor(t.name, GgmlType::F32, {t.ne[0]}, std::move(b));
                       }
                     });
  EXPECT_GT(max_diff(run(*load_model(base + "_twice.gguf"), true), ref), 0.1f * spread(ref));
}

// final_logit_softcapping: 30 when the key is absent (llama.cpp's default), the key's value
// otherwise; every logit lies in [-cap, cap] (tanh rounds to 1 in fp32 far out).
TEST(Gemma4, FinalLogitSoftcap) {
  for (bool write : {false, true}) {
    ModelSpec spec = testgen::preset("tiny", Arch::kGemma4);
    for (auto& r : spec.role_type) r = GgmlType::BF16;
    spec.n_expert = spec.n_expert_used = 0;
    spec.logit_std = 20.0f;  // raw logits well past the cap
    spec.g4.write_softcap = write;
    spec.g4.softcap = 5.0f;
    const std::string path = test::tmp_path(write ? "gemma4_cap5.gguf" : "gemma4_cap_default.gguf");
    testgen::generate_model(spec, path);
    auto m = load_model(path);
    const float cap = write ? 5.0f : 30.0f;
    EXPECT_EQ(m->hp.final_logit_softcap, cap);
    const auto l = run(*m, true);
    float mx = 0;
    for (float x : l) mx = std::max(mx, std::fabs(x));
    EXPECT_LE(mx, cap);
    EXPECT_GT(mx, 0.5f * cap);  // the cap is reached for, so it is doing something
  }
}

// The loader names the key or tensor and what was expected.
TEST(Gemma4, LoaderRefusals) {
  ModelSpec spec = testgen::preset("tiny", Arch::kGemma4);
  for (auto& r : spec.role_type) r = GgmlType::BF16;
  const std::string base = test::tmp_path("gemma4_bad");
  testgen::generate_model(spec, base + ".gguf");
  auto expect_error = [&](const std::string& name, const std::function<bool(const gguf::TensorInfo&)>& keep,
                          const std::function<void(gguf::Writer&)>& extra, const std::string& needle) {
    const std::string p = base + "_" + name + ".gguf";
    test::rewrite_gguf(base + ".gguf", p, keep, extra);
    try {
      load_model(p);
      ADD_FAILURE() << name << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << name << ": " << e.what();
    }
  };
  expect_error("pattern", nullptr,
               [](gguf::Writer& w) { w.set_bool_array("gemma4.attention.sliding_window_pattern", {true, false}); },
               "sliding_window_pattern");
  expect_error("rope_swa", nullptr, [](gguf::Writer& w) { w.set_u32("gemma4.rope.dimension_count_swa", 128); },
               "dimension_count_swa");
  expect_error("router_scale", [](const gguf::TensorInfo& t) { return t.name != "blk.2.ffn_gate_inp.scale"; }, nullptr,
               "blk.2.ffn_gate_inp.scale");
  expect_error("shared", nullptr, [](gguf::Writer& w) { w.set_u32("gemma4.attention.shared_kv_layers", 3); },
               "shared_kv_layers");
  expect_error("no_ffn_norm", [](const gguf::TensorInfo& t) { return t.name != "blk.0.post_ffw_norm.weight"; }, nullptr,
               "blk.0.post_ffw_norm.weight");
}

}  // namespace
}  // namespace ft::model
