// HF checkpoints against llama.cpp: every tiny fixture (testgen/gen_hf.h: llama, qwen3,
// qwen3moe; BF16, ModelOpt NVFP4, compressed-tensors NVFP4; plus BF16 -> --outtype nvfp4)
// is converted with the real `ft convert`, llama.cpp (llama-oracle) must load the file, and
// `ft generate --model DIR` (the HF directory loaded directly) must follow llama.cpp's run on
// the converted file by the Foundation rules with llama.cpp's numerics (--dtype auto):
//   prompt logits within 0.1; 32 free-running greedy tokens identical up to a step where
//   llama.cpp's top-2 margin is below 0.05 (a near tie).
// Prints one "HF-PARITY ..." line per fixture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hf/convert.h"
#include "oracle_util.h"
#include "testgen/bpe_vocab.h"
#include "testgen/gen_hf.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using ft::testgen::Arch;
using ft::testgen::HfFormat;
using ft::oracle_test::bin;
using ft::oracle_test::Proc;
using ft::oracle_test::run;

namespace {

constexpr int kTokens = 32;
constexpr float kLogitTol = 0.1f;  // parity_test.cpp's kQuantFileTol (measured 0 there on these archs)
constexpr float kNearTie = 0.05f;

struct Case {
  std::string name;
  Arch arch;
  HfFormat format;
  std::string outtype = "auto";
  bool llama3_rope = false;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (Arch a : {Arch::kLlama, Arch::kQwen3, Arch::kQwen3Moe}) {
    const std::string n(ft::testgen::arch_name(a));
    v.push_back({n + "_bf16", a, HfFormat::kBF16});
    v.push_back({n + "_modelopt", a, HfFormat::kModelOpt});
    v.push_back({n + "_compressed", a, HfFormat::kCompressed});
    v.push_back({n + "_bf16_to_nvfp4", a, HfFormat::kBF16, "nvfp4"});
  }
  v.push_back({"llama_bf16_llama3rope", Arch::kLlama, HfFormat::kBF16, "auto", true});
  return v;
}

class HfParity : public ::testing::TestWithParam<Case> {};

TEST_P(HfParity, ConvertedFileLoadsInLlamaCppAndTheHfDirFollowsIt) {
  const Case& c = GetParam();
  const fs::path root = ft::oracle_test::models_dir("hf_" + c.name);
  const std::string dir = (root / "checkpoint").string(), model = (root / "converted.gguf").string();
  auto fx = ft::testgen::hf_fixture(c.arch, c.format, 7);
  fx.llama3_rope = c.llama3_rope;
  const auto res = ft::testgen::generate_hf(fx, dir, (root / "source.gguf").string());
  const Proc conv = run(bin("ft") + " convert " + dir + " --out " + model + " --outtype " + c.outtype + " --quiet");
  ASSERT_EQ(conv.rc, 0) << "ft convert failed on " << dir;

  // The tokenizer from tokenizer.json (HF directory, in memory) against llama.cpp's on the
  // converted file: special tokens, contractions, digits, runs of spaces and newlines.
  {
    const std::string text = "<|im_start|>user\n" + ft::testgen::bpe_training_text().substr(0, 300) +
                             " It's 2026: 12345 apples,  and   spaces\n\n<|im_end|>\n";
    auto hf_file = ft::hf::open_hf_as_gguf(dir);
    auto tok = ft::Tokenizer::from_gguf(*hf_file);
    const auto ours = tok->encode(text, /*add_special=*/true, /*parse_special=*/true);
    std::string quoted = "'";
    for (char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    quoted += "'";
    const Proc t = run(bin("llama-oracle") + " --model " + model + " --tokenize " + quoted);
    ASSERT_EQ(t.rc, 0) << "llama.cpp could not tokenize with " << model;
    const auto tj = nlohmann::json::parse(t.out, nullptr, false);
    ASSERT_FALSE(tj.is_discarded());
    const auto ref = tj["tokens"].get<std::vector<int>>();
    EXPECT_EQ(std::vector<int>(ours.begin(), ours.end()), ref) << "tokenization differs from llama.cpp's";
    EXPECT_GT(ref.size(), 40u);
  }

  std::vector<int> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int>((37 * i + 82) % res.n_vocab));

  const auto ref = ft::oracle_test::run_oracle(model, prompt, kTokens);
  ASSERT_TRUE(ref.ok) << "llama.cpp failed to load or run " << model;
  const auto& ref_logits = ref.logits;
  const auto& ref_tokens = ref.tokens;
  const auto& margins = ref.margins;
  ASSERT_EQ(static_cast<int>(ref_tokens.size()), kTokens);

  // Ours: the HF directory itself (converted in memory) or, for --outtype nvfp4, the file.
  const std::string ours_model = c.outtype == "auto" ? dir : model;
  const auto ours =
      ft::oracle_test::run_ours(ours_model, prompt, kTokens, "cpu", "auto", nullptr, (root / "logits.json").string());
  ASSERT_TRUE(ours.ok) << "ft generate failed (rc " << ours.rc << ") on " << ours_model;
  const auto& tokens = ours.tokens;
  const auto& logits = ours.logits;

  ASSERT_EQ(logits.size(), ref_logits.size());
  float dmax = 0;
  for (size_t i = 0; i < logits.size(); ++i) dmax = std::max(dmax, std::fabs(logits[i] - ref_logits[i]));
  EXPECT_LE(dmax, kLogitTol) << "prompt logits differ from llama.cpp's";
  int same = 0;
  while (same < kTokens && same < static_cast<int>(tokens.size()) && tokens[static_cast<size_t>(same)] == ref_tokens[static_cast<size_t>(same)])
    ++same;
  EXPECT_TRUE(same >= kTokens || margins[static_cast<size_t>(same)] < kNearTie)
      << "greedy tokens diverge at step " << same << " where llama.cpp's margin is "
      << (same < kTokens ? margins[static_cast<size_t>(same)] : 0.0f);
  std::printf("HF-PARITY fixture=%s outtype=%s max|dlogit|=%.2g free %d/%d\n", c.name.c_str(), c.outtype.c_str(), dmax,
              same, kTokens);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
