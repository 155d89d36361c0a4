// Priority-queue BPE against its quadratic twin, on synthetic and real merge tables.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "format/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"
#include "vocab_files.h"

namespace ft::tok {
namespace {

std::vector<std::string> texts(std::string_view word, const std::vector<BpeSpan>& spans) {
  std::vector<std::string> out;
  for (const auto& s : spans) out.emplace_back(word.substr(s.offset, s.length));
  return out;
}

TEST(Bpe, LowestRankFirstThenLeftmost) {
  BpeRanks r;
  r.add("a", "b", 1);
  r.add("b", "c", 0);
  r.add("ab", "c", 2);
  r.add("x", "x", 0);
  std::vector<BpeSpan> out;
  bpe_merge("abc", r, out);  // "bc" (rank 0) wins over "ab" (rank 1)
  EXPECT_EQ(texts("abc", out), (std::vector<std::string>{"a", "bc"}));
  bpe_merge("xxx", r, out);  // tie: leftmost pair merges first
  EXPECT_EQ(texts("xxx", out), (std::vector<std::string>{"xx", "x"}));
  bpe_merge("é\xE2\x82", r, out);  // truncated character at the end stays one symbol
  EXPECT_EQ(texts("é\xE2\x82", out), (std::vector<std::string>{"é", "\xE2\x82"}));
  EXPECT_EQ(r.find("a", "b"), 1);
  EXPECT_EQ(r.find("ab", ""), -1);
  r.add("a", "b", 7);  // duplicates keep the first rank
  EXPECT_EQ(r.find("a", "b"), 1);
}

// Random words over a 4-letter alphabet with random merges of random pieces.
TEST(Bpe, TwinSynthetic) {
  std::mt19937 rng(7);
  const std::string letters = "abcd";
  auto piece = [&] {
    std::string s;
    const size_t n = 1 + rng() % 3;
    for (size_t i = 0; i < n; ++i) s += letters[rng() % letters.size()];
    return s;
  };
  int merged = 0;
  for (int table = 0; table < 50; ++table) {
    BpeRanks r;
    for (int i = 0; i < 40; ++i) r.add(piece(), piece(), static_cast<int>(rng() % 30));
    for (int w = 0; w < 100; ++w) {
      std::string word;
      const size_t n = 1 + rng() % 24;
      for (size_t i = 0; i < n; ++i) word += letters[rng() % letters.size()];
      std::vector<BpeSpan> fast, slow;
      bpe_merge(word, r, fast);
      bpe_merge_naive(word, r, slow);
      ASSERT_EQ(fast, slow) << word;
      merged += fast.size() < word.size();
    }
  }
  EXPECT_GT(merged, 1000);
}

// Real Qwen2 merges on byte-mapped random text.
TEST(Bpe, TwinQwen2Merges) {
  if (!test::require_vocab("qwen2")) return;
  const auto file = gguf::File::open(test::vocab_path("qwen2"));
  const auto merges = file->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.has_value());
  BpeRanks r;
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& m = (*merges)[i];
    const size_t sp = m.find(' ', 1);
    ASSERT_NE(sp, std::string::npos);
    r.add(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1), static_cast<int>(i));
  }
  const std::vector<std::string> parts = {"the", "ing", " ", "tion", "a", "e", "中", "文", "é", "1", "!", "\n", "'s"};
  std::mt19937 rng(3);
  for (int w = 0; w < 2000; ++w) {
    std::string raw;
    const size_t n = 1 + rng() % 8;
    for (size_t i = 0; i < n; ++i) raw += parts[rng() % parts.size()];
    std::string word;
    for (unsigned char b : raw) word += byte_to_unicode(b);
    std::vector<BpeSpan> fast, slow;
    bpe_merge(word, r, fast);
    bpe_merge_naive(word, r, slow);
    ASSERT_EQ(fast, slow) << raw;
  }
}

}  // namespace
}  // namespace ft::tok
