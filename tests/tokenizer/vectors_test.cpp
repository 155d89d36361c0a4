// llama.cpp's own tokenizer test vectors (tests/test-tokenizer-0.cpp: add_special
// and parse_special both false) for the four target vocabularies.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "vocab_files.h"

namespace ft {
namespace {

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
  const std::string name = GetParam();
  if (!test::require_vocab(name)) return;
  const auto v = test::load_vocab(name);
  const auto vectors = test::read_vectors(name);
  ASSERT_GT(vectors.size(), 20u) << name;
  int failures = 0;
  for (const auto& [text, expected] : vectors) {
    const std::vector<int32_t> got = v.tok->encode(text, false, false);
    EXPECT_EQ(got, expected) << name << ": text " << fmt::format("{:?}", text) << "\n  got      "
                             << fmt::format("{}", got) << "\n  expected " << fmt::format("{}", expected);
    failures += got != expected;
  }
  EXPECT_EQ(failures, 0) << name;
}

// Concatenated pieces give the input back byte for byte (decode without
// clean_spaces). Gemma 4 turns a literal U+2581 into a space, so those texts are skipped.
TEST_P(VocabVectors, PiecesRoundTrip) {
  const std::string name = GetParam();
  if (!test::require_vocab(name)) return;
  const auto v = test::load_vocab(name);
  int checked = 0;
  for (const auto& [text, expected] : test::read_vectors(name)) {
    if (name == "gemma-4" && text.find("\xE2\x96\x81") != std::string::npos) continue;
    std::string joined;
    for (int32_t id : v.tok->encode(text, false, false)) joined += v.tok->token_to_piece(id, true);
    EXPECT_EQ(joined, text) << name;
    ++checked;
  }
  EXPECT_GT(checked, 20) << name;
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors, ::testing::ValuesIn(test::kVocabNames),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace ft
