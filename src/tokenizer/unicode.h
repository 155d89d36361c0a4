// Code-point helpers for the tokenizer, with llama.cpp's exact conventions:
// how malformed UTF-8 decodes, which Unicode category a code point has, what
// counts as whitespace, and the GPT-2 byte <-> code point table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft::tok {

// Category bits of one code point (one of the first eight, plus kWhitespace).
enum CptFlag : uint16_t {
  kUndefined = 1 << 0,    // Cn (unassigned)
  kNumber = 1 << 1,       // \p{N}
  kLetter = 1 << 2,       // \p{L}
  kSeparator = 1 << 3,    // \p{Z}
  kMark = 1 << 4,         // \p{M}
  kPunctuation = 1 << 5,  // \p{P}
  kSymbol = 1 << 6,       // \p{S}
  kControl = 1 << 7,      // \p{C} except Cn
  kWhitespace = 1 << 8,   // Unicode White_Space (the regexes' \s)
};

// Flags of `cpt`; code points above U+10FFFF are kUndefined.
uint16_t cpt_flags(uint32_t cpt);

// Decodes like llama.cpp's unicode_cpts_from_utf8: a well-formed lead byte
// with enough continuation bytes yields its value (overlong forms and
// surrogates are accepted, as there); anything else yields U+FFFD and skips one
// byte. Our one deviation: 4-byte forms above U+10FFFF (lead F5..F7) are
// treated as invalid here, where llama.cpp throws from inside llama_tokenize.
std::vector<uint32_t> utf8_to_cpts(std::string_view s);

// Appends the UTF-8 encoding of `cpt` (<= U+10FFFF) to `out`.
void append_utf8(std::string& out, uint32_t cpt);

// Length of the UTF-8 sequence that `lead` starts (1 for continuation bytes),
// by the top four bits as llama.cpp does.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// GPT-2 byte-level table: the UTF-8 text of the code point that byte `b` maps to.
const std::string& byte_to_unicode(uint8_t b);
// Inverse: the byte a code point stands for, or -1 when it is not in the table.
int unicode_to_byte(uint32_t cpt);

}  // namespace ft::tok
