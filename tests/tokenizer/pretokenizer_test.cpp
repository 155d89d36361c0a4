// The hand-written pre-tokenizers against their PCRE2 twin, plus hand-checked splits.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace ft::tok {
namespace {

std::vector<std::string> split(const std::string& text, PreType pre) {
  const auto cpts = utf8_to_cpts(text);
  const auto lens = split_words(cpts, pre);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t n : lens) {
    std::string w;
    for (size_t k = start; k < start + n; ++k) append_utf8(w, cpts[k]);
    words.push_back(w);
    start += n;
  }
  EXPECT_EQ(start, cpts.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(Pretokenizer, Llama3HandChecked) {
  EXPECT_EQ(split("a  b", PreType::kLlama3), (Words{"a", " ", " b"}));
  EXPECT_EQ(split("Hello world", PreType::kLlama3), (Words{"Hello", " world"}));
  EXPECT_EQ(split("1234567", PreType::kLlama3), (Words{"123", "456", "7"}));
  EXPECT_EQ(split("I'M here", PreType::kLlama3), (Words{"I", "'M", " here"}));
  EXPECT_EQ(split("x  \n\n y", PreType::kLlama3), (Words{"x", "  \n\n", " y"}));
  EXPECT_EQ(split("ok!!\n\nnext", PreType::kLlama3), (Words{"ok", "!!\n\n", "next"}));
  EXPECT_EQ(split("end   ", PreType::kLlama3), (Words{"end", "   "}));
  EXPECT_EQ(split("\xE2\x82", PreType::kLlama3), (Words{"\xEF\xBF\xBD\xEF\xBF\xBD"}));  // two U+FFFD
}

TEST(Pretokenizer, QwenDigitsAndMarks) {
  EXPECT_EQ(split("1234", PreType::kQwen2), (Words{"1", "2", "3", "4"}));
  // U+0301 (combining acute) is \p{M}: a word of its own for QWEN2, part of the word for QWEN35.
  EXPECT_EQ(split("e\u0301t\u0301", PreType::kQwen2), (Words{"e", "\u0301t", "\u0301"}));
  EXPECT_EQ(split("e\u0301t\u0301", PreType::kQwen35), (Words{"e\u0301t\u0301"}));
}

TEST(Pretokenizer, Gemma4NewlineRuns) {
  EXPECT_EQ(split("a b\n\n c\n", PreType::kGemma4), (Words{"a b", "\n\n", " c", "\n"}));
}

TEST(Pretokenizer, DefaultFourPatterns) {
  EXPECT_EQ(split("Hello, world 12345!", PreType::kDefault),
            (Words{"Hello", ",", " world", " ", "123", "45", "!"}));
}

// Text from an alphabet on which llama.cpp's tables, utf8proc and PCRE2's
// (Unicode 14) agree: ASCII, Latin-1 letters, CJK, Hangul, Cyrillic, marks,
// digits of other scripts, emoji, and the White_Space characters PCRE2's \s
// also matches.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> alphabet = {
      "a", "b", "Z", "x", "s", "t", "d", "m", "l", "r", "e", "v", "S", "T", "L", "R", "E", " ", " ", " ", "  ",
      "\t", "\n", "\r", "\r\n", "\x0B", "\x0C", "'", "'s", "'LL", "'Re", "0", "1", "9", "٣", "²", "½", ".", ",",
      "!", "?", "-", "_", "(", "\"", "$", "+", "<", "=", ">", "^", "`", "|", "~", "@", "#", "%", "&", "*", "/",
      "\\", "é", "ß", "ñ", "中", "文", "한", "ж", "λ", "\u0301", "\u0308", "\u093F", "😀", "👍", "🏽", "€", "∑",
      "\u00A0", "\u3000", "\u2003", "\u2028", "«", "—", "…", "¡", "¿", "·"};
  const size_t len = 1 + rng() % 30;
  std::string s;
  for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
  return s;
}

class PretokenizerTwin : public ::testing::TestWithParam<PreType> {};

TEST_P(PretokenizerTwin, MatchesPcre2) {
  std::mt19937 rng(42 + static_cast<int>(GetParam()));
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_text(rng);
    const auto fast = split_words(utf8_to_cpts(text), GetParam());
    const auto slow = split_words_regex(text, GetParam());
    ASSERT_EQ(fast, slow) << "text " << ::testing::PrintToString(text);
    checked += fast.size() > 1;
  }
  EXPECT_GT(checked, 500);  // the texts really get split (GEMMA4 only splits at newlines)
}

INSTANTIATE_TEST_SUITE_P(All, PretokenizerTwin,
                         ::testing::Values(PreType::kLlama3, PreType::kQwen2, PreType::kQwen35, PreType::kGemma4,
                                           PreType::kDefault));

TEST(Unicode, DecodeLikeLlamaCpp) {
  // Overlong and surrogate forms decode to their value; stray/truncated bytes to U+FFFD each.
  EXPECT_EQ(utf8_to_cpts("\xC0\x80"), (std::vector<uint32_t>{0}));
  EXPECT_EQ(utf8_to_cpts("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
  EXPECT_EQ(utf8_to_cpts("\x80" "a"), (std::vector<uint32_t>{0xFFFD, 'a'}));
  EXPECT_EQ(utf8_to_cpts("\xF0\x9F\x98"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(utf8_to_cpts("\xF5\x80\x80\x80"), (std::vector<uint32_t>(4, 0xFFFD)));
  EXPECT_EQ(utf8_to_cpts("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
}

TEST(Unicode, CategoriesAndByteMap) {
  EXPECT_EQ(cpt_flags('a'), kLetter);
  EXPECT_EQ(cpt_flags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(cpt_flags('\n'), kControl | kWhitespace);
  EXPECT_EQ(cpt_flags(0x1C), kControl);  // not White_Space
  EXPECT_EQ(cpt_flags(0x0301), kMark);
  EXPECT_EQ(cpt_flags(0x2EBF0), kLetter);    // Unicode 15.1 (CJK Extension I)
  EXPECT_EQ(cpt_flags(0x1FAE9), kUndefined);  // Unicode 16, unknown to llama.cpp too
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_unicode('A'), "A");
  for (int b = 0; b < 256; ++b) {
    const auto cpts = utf8_to_cpts(byte_to_unicode(static_cast<uint8_t>(b)));
    ASSERT_EQ(cpts.size(), 1u);
    EXPECT_EQ(unicode_to_byte(cpts[0]), b);
  }
  EXPECT_EQ(unicode_to_byte(0x2581), -1);
}

}  // namespace
}  // namespace ft::tok
