// Robustness of the model loader and the CPU engine against a GGUF that parses but lies (tests/gguf_mutate.h): a tiny
// model of every architecture with its metadata or tensor table mutated must load and decode three tokens to finite
// logits, or fail with ft::Error; never another exception, a crash, or NaN / inf logits (silent garbage). The GGUF
// parser's own fuzzing is fuzz/gguf_fuzz.cpp and GgufCompat; this is the level above it. Deterministic;
// FT_LOAD_MUTANTS=N (default 40 an architecture) for a long run. tests/cuda/gpu_load_fuzz_test.cpp: the same on the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../gguf_mutate.h"
#include "core/error.h"
#include "engine/session.h"
#include "model/model.h"
#include "model_util.h"

namespace ft::model {
namespace {

using testgen::Arch;

// "" when the file loads and decodes to finite logits (decoded counts it) or fails with ft::Error; else what went
// wrong.
std::string outcome(const std::string& path, int* decoded) {
  try {
    const auto m = load_model(path);
    engine::SessionOptions so;
    so.n_ctx = 16;
    so.n_threads = 1;
    engine::Session s(*m, so);
    const std::vector<int32_t> prompt = {1, 2, 3};
    const float* l = s.eval(prompt.data(), 3);
    for (int64_t v = 0; v < s.n_vocab(); ++v)
      if (!std::isfinite(l[v])) return "logit " + std::to_string(v) + " is " + std::to_string(l[v]);
    if (decoded) ++*decoded;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    return std::string("a std::exception: ") + e.what();
  }
  return "";
}

class LoadFuzz : public ::testing::TestWithParam<Arch> {};

TEST_P(LoadFuzz, MutatedModelsLoadAndDecodeOrFailWithFtError) {
  const Arch arch = GetParam();
  const std::string tag = std::to_string(static_cast<int>(arch));
  const std::string src = test::tmp_path("fuzz_src_" + tag + ".gguf");
  testgen::generate_model(testgen::preset("tiny", arch), src);
  test::gguf_mutate::run_load_fuzz(src, test::tmp_path("fuzz_mut_" + tag + ".gguf"), 1000 + static_cast<unsigned>(arch),
                                   test::gguf_mutate::mutants(40), outcome);
}

INSTANTIATE_TEST_SUITE_P(All, LoadFuzz,
                         ::testing::Values(Arch::kLlama, Arch::kQwen3, Arch::kQwen3Moe, Arch::kGemma4, Arch::kQwen35,
                                           Arch::kQwen35Moe),
                         test::gguf_mutate::arch_name);

}  // namespace
}  // namespace ft::model
