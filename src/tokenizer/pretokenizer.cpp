// Hand-written matchers for the pre-tokenizer patterns (see pretokenizer.h for
// the patterns and why these are not PCRE2). Each matcher walks one region of
// code points and appends word lengths; a "region" is the whole fragment or a
// word left by a previous pattern (DEFAULT applies four in turn).
#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode.h"

namespace ft::tok {
namespace {

constexpr uint32_t kOut = 0xFFFFFFFF;  // "no code point": outside the region

struct Region {
  const std::vector<uint32_t>& cpts;
  size_t ini;
  size_t end;
  std::vector<size_t>& out;
  size_t prev_end;

  Region(const std::vector<uint32_t>& c, size_t i, size_t e, std::vector<size_t>& o)
      : cpts(c), ini(i), end(e), out(o), prev_end(i) {}

  uint32_t cpt(size_t p) const { return p < end ? cpts[p] : kOut; }
  // 0 outside the region: every code point inside has at least one flag.
  uint16_t flags(size_t p) const { return p < end ? cpt_flags(cpts[p]) : 0; }
  // Ends the current word at `e` (empty words are dropped).
  void emit(size_t e) {
    if (e > prev_end) out.push_back(e - prev_end);
    prev_end = e;
  }
};

// The contraction alternatives only ever compare against ASCII letters, and no
// non-ASCII code point lower-cases to one of s t m d r v e l, so an ASCII
// lower-casing is what llama.cpp's unicode_tolower amounts to here.
uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of a contraction ('s 't 'm 'd 're 've 'll) starting at `pos`, else 0.
size_t contraction_len(const Region& r, size_t pos, bool case_insensitive) {
  if (r.cpt(pos) != '\'' || pos + 1 >= r.end) return 0;
  auto low = [&](uint32_t c) { return case_insensitive ? ascii_lower(c) : c; };
  const uint32_t c1 = low(r.cpt(pos + 1));
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= r.end) return 0;
  const uint32_t c2 = low(r.cpt(pos + 2));
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// LLAMA3 (max_digits 3), QWEN2 (max_digits 1) and QWEN35 (max_digits 1, marks
// count as letters and are excluded from the punctuation class).
void split_llama3_like(Region r, size_t max_digits, bool marks) {
  const uint16_t letter_mask = marks ? (kLetter | kMark) : kLetter;
  const uint16_t not_punct = kWhitespace | kNumber | letter_mask;
  size_t pos = r.ini;
  while (pos < r.end) {
    const uint32_t c = r.cpt(pos);
    const uint16_t f = r.flags(pos);

    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (size_t n = contraction_len(r, pos, true)) {
      pos += n;
      r.emit(pos);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+  (QWEN35: [\p{L}\p{M}]+)
    if (!(c == '\r' || c == '\n' || (f & kNumber)) &&
        ((f & letter_mask) || (r.flags(pos + 1) & letter_mask))) {
      ++pos;
      while (r.flags(pos) & letter_mask) ++pos;
      r.emit(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (f & kNumber) {
      size_t run = 0;
      while (r.flags(pos) & kNumber) {
        ++pos;
        if (++run == max_digits) {
          r.emit(pos);
          run = 0;
        }
      }
      r.emit(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'. As in llama.cpp the "is inside the region"
    // test looks at the first code point, so a lone trailing space lands here
    // (with the same result as the \s+ branch would give).
    uint16_t f2 = (c == ' ') ? r.flags(pos + 1) : f;
    if (!(f2 & not_punct) && f != 0) {
      pos += (c == ' ');
      while (!(f2 & not_punct) && f2 != 0) f2 = r.flags(++pos);
      while (r.cpt(pos) == '\r' || r.cpt(pos) == '\n') ++pos;
      r.emit(pos);
      continue;
    }
    // Whitespace run starting here, and where its last \r or \n ends.
    size_t n_ws = 0;
    size_t last_rn_end = 0;
    while (r.flags(pos + n_ws) & kWhitespace) {
      const uint32_t w = r.cpt(pos + n_ws);
      if (w == '\r' || w == '\n') last_rn_end = pos + n_ws + 1;
      ++n_ws;
    }
    if (last_rn_end > 0) {  // \s*[\r\n]+
      pos = last_rn_end;
    } else if (n_ws > 1 && r.cpt(pos + n_ws) != kOut) {  // \s+(?!\S)
      pos += n_ws - 1;
    } else if (n_ws > 0) {  // \s+
      pos += n_ws;
    } else {  // nothing matched: the code point is a word of its own
      ++pos;
    }
    r.emit(pos);
  }
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
void split_gpt2(Region r) {
  size_t pos = r.ini;
  while (pos < r.end) {
    const uint32_t c = r.cpt(pos);
    if (size_t n = contraction_len(r, pos, false)) {
      pos += n;
      r.emit(pos);
      continue;
    }
    uint16_t f2 = (c == ' ') ? r.flags(pos + 1) : r.flags(pos);
    bool done = false;
    for (uint16_t cls : {uint16_t(kLetter), uint16_t(kNumber)}) {
      if (f2 & cls) {
        pos += (c == ' ');
        while (f2 & cls) f2 = r.flags(++pos);
        r.emit(pos);
        done = true;
        break;
      }
    }
    if (done) continue;
    constexpr uint16_t kNotOther = kWhitespace | kLetter | kNumber;
    if (!(f2 & kNotOther) && f2 != 0) {
      pos += (c == ' ');
      while (!(f2 & kNotOther) && f2 != 0) f2 = r.flags(++pos);
      r.emit(pos);
      continue;
    }
    size_t n_ws = 0;
    while (r.flags(pos + n_ws) & kWhitespace) ++n_ws;
    if (n_ws > 1 && r.cpt(pos + n_ws) != kOut) {
      pos += n_ws - 1;
    } else if (n_ws > 0) {
      pos += n_ws;
    } else {
      ++pos;
    }
    r.emit(pos);
  }
}

// Runs of code points satisfying `in_class` become words, and so does the text
// between runs (a std::regex split of a `[...]+` pattern).
template <class Pred>
void split_runs(Region r, Pred in_class) {
  size_t pos = r.ini;
  while (pos < r.end) {
    const bool in = in_class(r.cpts[pos]);
    while (pos < r.end && in_class(r.cpts[pos]) == in) ++pos;
    r.emit(pos);
  }
}

// [\p{P}\$\+<=>\^~\|]+ as llama.cpp evaluates it: ASCII punctuation and
// symbols except '`', and non-ASCII code points whose category is P.
bool is_default_punct(uint32_t c) {
  if (c < 0x80) {
    return c != '`' && ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                        (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E));
  }
  const uint16_t f = cpt_flags(c);
  return !(f & kWhitespace) && (f & kPunctuation);
}

bool is_number_cpt(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const uint16_t f = cpt_flags(c);
  return !(f & kWhitespace) && (f & kNumber);
}

// [0-9][0-9][0-9]: leftmost non-overlapping triples of ASCII digits.
void split_digit_triples(Region r) {
  auto digit = [&](size_t p) { return p < r.end && r.cpts[p] >= '0' && r.cpts[p] <= '9'; };
  size_t pos = r.ini;
  while (pos < r.end) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      r.emit(pos);
      pos += 3;
      r.emit(pos);
    } else {
      ++pos;
    }
  }
  r.emit(r.end);
}

// [^\n]+|[\n]+
void split_newlines(Region r) {
  split_runs(r, [](uint32_t c) { return c == '\n'; });
}

// Applies `fn(Region)` to every region of `lengths`, returning the new lengths.
template <class Fn>
std::vector<size_t> refine(const std::vector<uint32_t>& cpts, const std::vector<size_t>& lengths, Fn fn) {
  std::vector<size_t> out;
  out.reserve(lengths.size() * 2);
  size_t start = 0;
  for (size_t len : lengths) {
    fn(Region(cpts, start, start + len, out));
    start += len;
  }
  return out;
}

}  // namespace

std::vector<size_t> split_words(const std::vector<uint32_t>& cpts, PreType pre) {
  std::vector<size_t> words;
  if (cpts.empty()) return words;
  const std::vector<size_t> whole = {cpts.size()};
  switch (pre) {
    case PreType::kLlama3:
      return refine(cpts, whole, [](Region r) { split_llama3_like(r, 3, false); });
    case PreType::kQwen2:
      return refine(cpts, whole, [](Region r) { split_llama3_like(r, 1, false); });
    case PreType::kQwen35:
      return refine(cpts, whole, [](Region r) { split_llama3_like(r, 1, true); });
    case PreType::kGemma4:
      return refine(cpts, whole, split_newlines);
    case PreType::kDefault: {
      words = refine(cpts, whole, [](Region r) { split_runs(r, is_default_punct); });
      words = refine(cpts, words, split_gpt2);
      words = refine(cpts, words, [](Region r) { split_runs(r, is_number_cpt); });
      return refine(cpts, words, split_digit_triples);
    }
  }
  return words;
}

}  // namespace ft::tok
