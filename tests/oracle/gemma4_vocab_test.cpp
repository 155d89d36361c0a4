// A generated gemma4 model with Gemma-4 tokenizer metadata (testgen/gemma4_vocab.h: '▁'
// escaping, <0xXX> byte fallback, newline-run tokens, BOS always added) works end to end:
// our tokenizer gives llama.cpp's token ids on texts that exercise each of those rules, and
// `ft generate --prompt TEXT` on the (F32) model gives llama.cpp's greedy tokens.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "testgen/model_gen.h"
#include "tokenizer/tokenizer.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

// Single-quoted for the shell.
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q.append("'\\''");
    else
      q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

std::string bin(const char* name) { return std::string(FT_BINARY_DIR) + "/" + name; }

const std::string& model_path() {
  static const std::string path = [] {
    auto s = testgen::preset("tiny", testgen::Arch::kGemma4);
    s.n_expert = s.n_expert_used = 0;
    s.g4.n_merges = 200;
    s.seed = 11;
    const fs::path dir = fs::path(FT_BINARY_DIR) / "parity-models" / "gemma4_vocab";
    fs::create_directories(dir);
    const std::string p = (dir / "model.f32.gguf").string();
    testgen::generate_model(s, p);
    return p;
  }();
  return path;
}

std::vector<int> llama_tokens(const std::string& text, bool special) {
  const auto j = nlohmann::json::parse(
      run(bin("llama-oracle") + " --model " + model_path() + " --tokenize " + quote(text) + (special ? "" : " --no-special")),
      nullptr, false);
  if (j.is_discarded() || !j.contains("tokens")) return {-999};
  return j["tokens"].get<std::vector<int>>();
}

TEST(Gemma4Vocab, TokensMatchLlamaCpp) {
  auto f = gguf::File::open(model_path());
  auto tok = Tokenizer::from_gguf(*f);
  const std::vector<std::string> texts = {
      "The river ran past the old mill and under the stone bridge.",
      "  leading spaces, trailing spaces   ",
      "one\ntwo\n\nthree\n\n\nfour\n\n\n\n\nfive",  // newline runs (whole-run tokens and longer)
      "caf\xC3\xA9 na\xC3\xAFve \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x99\x82 {json: [1, 2]}",  // byte fallback
      "<bos>inside<eos> text <pad>",                                                      // specials
      "Anna counted 1024 stones; ZQXJ zqxj!",
  };
  int checked = 0;
  for (const std::string& t : texts) {
    for (bool special : {true, false}) {
      std::vector<int> ours;
      for (int32_t id : tok->encode(t, special, special)) ours.push_back(id);
      EXPECT_EQ(ours, llama_tokens(t, special)) << "text " << ::testing::PrintToString(t) << " special " << special;
      ++checked;
    }
  }
  // BOS is added (Gemma 4 always adds it) and the byte fallback is used.
  const auto ids = tok->encode("\xF0\x9F\x99\x82", true, true);
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(tok->decode(ids, false), "\xF0\x9F\x99\x82");
  EXPECT_EQ(checked, 12);
  // The merges are used (the first text is far fewer tokens than characters).
  EXPECT_LT(tok->encode(texts[0], false, false).size(), texts[0].size() / 2);
}

// The CLI's text path on the generated model: same prompt ids and greedy tokens as llama.cpp.
TEST(Gemma4Vocab, GenerateFromTextMatchesLlamaCpp) {
  const std::string text = "The children of the village counted the boats.\n\nAnna";
  const std::vector<int> prompt = llama_tokens(text, true);
  const auto ours = nlohmann::json::parse(
      run(bin("ft") + " generate --model " + model_path() + " --prompt " + quote(text) +
          " --max-tokens 16 --temperature 0 --ignore-eos --threads 1 --json --device cpu --dtype float32"),
      nullptr, false);
  ASSERT_FALSE(ours.is_discarded()) << "ft generate failed";
  EXPECT_EQ(ours["prompt_tokens"].get<std::vector<int>>(), prompt);
  std::string ids;
  for (int t : prompt) {
    if (!ids.empty()) ids.push_back(',');
    ids.append(std::to_string(t));
  }
  const auto ref = nlohmann::json::parse(
      run(bin("llama-oracle") + " --model " + model_path() + " --prompt-tokens " + ids + " --n-predict 16"), nullptr,
      false);
  ASSERT_FALSE(ref.is_discarded()) << "llama-oracle failed";
  const auto a = ours["tokens"].get<std::vector<int>>(), b = ref["tokens"].get<std::vector<int>>();
  const auto margins = ref["margins"].get<std::vector<float>>();
  size_t same = 0;
  while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
  EXPECT_TRUE(same == 16 || margins[same] < 0.05f) << "diverges at step " << same;
  std::printf("gemma4 vocab (%zu-token prompt): %zu/16 greedy tokens equal\n", prompt.size(), same);
}

}  // namespace
}  // namespace ft
