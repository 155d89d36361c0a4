// Pre-tokenizers: split one raw-text fragment into words before BPE, exactly as
// llama.cpp's unicode_regex_split does for the pre types we support.
//
// The patterns (Hugging Face `Split` regexes, first alternative wins):
//   LLAMA3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   QWEN2   the same with \p{N} (one digit per word)
//   QWEN35  (?i:'s|...)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   GEMMA4  [^\n]+|[\n]+
//   DEFAULT four patterns applied in turn, each refining the previous split:
//           [\p{P}\$\+<=>\^~\|]+  /  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//           /  \p{N}+  /  [0-9][0-9][0-9]   (text a pattern does not match stays a word of its own)
//
// split_words is hand-written over code points with the category table of
// tokenizer/unicode.h, like llama.cpp's own matchers, and not PCRE2, because:
// llama.cpp's \s is the White_Space list (PCRE2's UCP \s differs), its
// categories are Unicode 15.1 (PCRE2 10.42 is Unicode 14), malformed UTF-8 must
// split as U+FFFD, and one pass over code points is ~10x faster than PCRE2 with
// lookahead. split_words_regex is the PCRE2 twin over the original patterns,
// used by the tests to check the hand-written matchers on text where both
// category tables agree.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ft::tok {

enum class PreType { kDefault, kLlama3, kQwen2, kQwen35, kGemma4 };

// Word lengths (in code points, summing to cpts.size()) of the split of `cpts`.
std::vector<size_t> split_words(const std::vector<uint32_t>& cpts, PreType pre);

// The same split computed with PCRE2 (UTF|UCP) from the patterns above, on
// valid UTF-8 `text`. Returns word lengths in code points.
std::vector<size_t> split_words_regex(std::string_view text, PreType pre);

}  // namespace ft::tok
