// Whole tiny models (llama, qwen3, qwen3moe) from the test-model generator, run through the
// engine: prefill as one batch vs token-by-token decode, NVFP4 + scales vs the F32 twin,
// scales ignored vs applied, activation dtypes, thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
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
using testgen::Role;

struct Files {
  std::string model, twin, noscale;
};

// NVFP4 attention/MLP/experts/output with spread-out .scale tensors, plus the F32 twin and
// the copy without scales.
const Files& files(Arch a) {
  static std::map<Arch, Files> cache;
  auto it = cache.find(a);
  if (it != cache.end()) return it->second;
  auto spec = testgen::preset("tiny", a);
  for (Role r : {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput}) spec.set_type(r, GgmlType::NVFP4);
  const std::string base = test::tmp_path(std::string(testgen::arch_name(a)));
  Files f{base + ".gguf", base + "_twin.gguf", base + "_noscale.gguf"};
  testgen::generate_model(spec, f.model, f.twin, f.noscale);
  return cache[a] = f;
}

const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 3, 250, 7, 7, 128, 64, 5, 200, 31};

// Logits of every prompt position, from one batch (all_logits) or one token at a time.
std::vector<float> run(const Model& m, ActType act, bool batch, int threads = 2, int64_t ubatch = 512) {
  engine::SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = threads;
  o.act = act;
  o.n_ubatch = ubatch;
  engine::Session s(m, o);
  return test::all_logits(s, kPrompt, batch);
}

class ModelTest : public ::testing::TestWithParam<Arch> {};

TEST_P(ModelTest, PrefillBatchMatchesTokenByTokenDecode) {
  auto m = load_model(files(GetParam()).model);
  const auto batch = run(*m, ActType::kF32, true);
  const auto step = run(*m, ActType::kF32, false);
  EXPECT_GT(spread(batch), 5.0f);  // the logits are not degenerate
  EXPECT_LT(max_diff(batch, step), 1e-3f);
  // Split into micro-batches of 4 tokens: same values.
  EXPECT_LT(max_diff(batch, run(*m, ActType::kF32, true, 2, 4)), 1e-3f);
}

// Rows are split over threads but every row is computed by one kernel call: results do
// not depend on the thread count.
TEST_P(ModelTest, ThreadCountDoesNotChangeResults) {
  auto m = load_model(files(GetParam()).model);
  EXPECT_EQ(run(*m, ActType::kF32, true, 1), run(*m, ActType::kF32, true, 3));
}

// NVFP4 with .scale tensors against the F32 twin (dequantised weights with the scale folded
// in): the same function, so only accumulation-order differences remain.
TEST_P(ModelTest, ScaledNvfp4MatchesF32Twin) {
  auto m = load_model(files(GetParam()).model);
  auto t = load_model(files(GetParam()).twin);
  EXPECT_LT(max_diff(run(*m, ActType::kF32, true), run(*t, ActType::kF32, true)), 1e-3f);
}

// The scales matter: the same file without its .scale tensors gives other logits.
TEST_P(ModelTest, IgnoringScalesChangesTheOutput) {
  auto m = load_model(files(GetParam()).model);
  auto n = load_model(files(GetParam()).noscale);
  const auto a = run(*m, ActType::kF32, true), b = run(*n, ActType::kF32, true);
  EXPECT_GT(max_diff(a, b), 0.1f * spread(a));
}

// bf16 / fp16 activations stay finite and close to fp32 (fp16 with scaled NVFP4 included:
// the scale is applied before the fp16 rounding).
TEST_P(ModelTest, ReducedPrecisionActivations) {
  auto m = load_model(files(GetParam()).model);
  const auto ref = run(*m, ActType::kF32, true);
  for (ActType act : {ActType::kBF16, ActType::kF16}) {
    const auto a = run(*m, act, true);
    for (float x : a) ASSERT_TRUE(std::isfinite(x)) << engine::act_type_name(act);
    EXPECT_LT(max_diff(a, ref), 0.1f * spread(ref)) << engine::act_type_name(act);
    EXPECT_GT(max_diff(a, ref), 0.0f) << "rounding had no effect";
    // batch vs decode also agree in reduced precision
    EXPECT_LT(max_diff(a, run(*m, act, false)), 0.05f * spread(ref)) << engine::act_type_name(act);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelTest, ::testing::Values(Arch::kLlama, Arch::kQwen3, Arch::kQwen3Moe),
                         [](const auto& info) { return std::string(testgen::arch_name(info.param)); });

TEST(Session, ContextFullAndBadTokenAreErrors) {
  auto m = load_model(files(Arch::kQwen3).model);
  engine::SessionOptions o;
  o.n_ctx = 8;
  o.n_threads = 1;
  engine::Session s(*m, o);
  const std::vector<int32_t> bad = {1, 100000};
  EXPECT_THROW(s.eval(bad.data(), 2), Error);
  EXPECT_THROW(s.eval(kPrompt.data(), 9), Error);
  EXPECT_NO_THROW(s.eval(kPrompt.data(), 8));
  EXPECT_THROW(s.eval(kPrompt.data(), 1), Error);
}

}  // namespace
}  // namespace ft::model
