// LoadFuzz on the GPU (tests/model/load_fuzz_test.cpp says what): a tiny model of every architecture with its GGUF
// metadata or tensor table mutated (tests/gguf_mutate.h) must load into a GpuSession and decode three tokens to
// finite logits, or fail with ft::Error -- never another exception, a CUDA fault (which would also fail every later
// test of the process), or NaN / inf logits. FT_LOAD_MUTANTS=N (default 25 an architecture).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../gguf_mutate.h"
#include "core/error.h"
#include "cuda/device.h"
#include "gpu/session.h"
#include "model/model.h"
#include "session_test_util.h"

namespace {

using ft::testgen::Arch;
using ft::gpu_test::test_dir;
namespace fs = std::filesystem;

std::string outcome(const std::string& path, int* decoded) {
  try {
    const auto m = ft::model::load_model(path);
    ft::gpu::GpuSessionOptions go;
    go.n_ctx = 16;
    ft::gpu::GpuSession s(*m, go);
    const std::vector<int32_t> prompt = {1, 2, 3};
    const float* l = s.eval(prompt.data(), 3);
    for (int64_t v = 0; v < s.n_vocab(); ++v)
      if (!std::isfinite(l[v])) return "logit " + std::to_string(v) + " is " + std::to_string(l[v]);
    const int32_t t = 4;
    l = s.eval(&t, 1);  // a decode step: the graph path
    for (int64_t v = 0; v < s.n_vocab(); ++v)
      if (!std::isfinite(l[v])) return "decode logit " + std::to_string(v) + " is " + std::to_string(l[v]);
    if (decoded) ++*decoded;
  } catch (const ft::Error&) {
  } catch (const std::exception& e) {
    return std::string("a std::exception: ") + e.what();
  }
  return "";
}

class GpuLoadFuzz : public ::testing::TestWithParam<Arch> {};

TEST_P(GpuLoadFuzz, MutatedModelsLoadAndDecodeOrFailWithFtError) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Arch arch = GetParam();
  const fs::path dir = test_dir("ft-gpu-load-fuzz-");
  const std::string tag = std::to_string(static_cast<int>(arch));
  const std::string src = (dir / ("src_" + tag + ".gguf")).string();
  ft::testgen::generate_model(ft::testgen::preset("tiny", arch), src);
  ft::test::gguf_mutate::run_load_fuzz(src, (dir / ("mut_" + tag + ".gguf")).string(),
                                       2000 + static_cast<unsigned>(arch), ft::test::gguf_mutate::mutants(25), outcome);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(All, GpuLoadFuzz,
                         ::testing::Values(Arch::kLlama, Arch::kQwen3, Arch::kQwen3Moe, Arch::kGemma4, Arch::kQwen35,
                                           Arch::kQwen35Moe),
                         ft::test::gguf_mutate::arch_name);

}  // namespace
