// PCRE2 twin of the hand-written pre-tokenizers: the original Hugging Face
// patterns, compiled with PCRE2_UTF | PCRE2_UCP. Slow and only as exact as
// PCRE2's Unicode tables allow; the tests use it as the reference for
// split_words on text both agree on (see pretokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"

namespace ft::tok {
namespace {

constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kNewlines = R"([^\n]+|[\n]+)";
constexpr const char* kDefault[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

std::unique_ptr<pcre2_code, CodeDeleter> compile(const char* pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail("pre-tokenizer regex {} does not compile at {}: {}", pattern, err_off,
         reinterpret_cast<const char*>(msg));
  }
  return std::unique_ptr<pcre2_code, CodeDeleter>(code);
}

size_t count_cpts(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Splits `region` (valid UTF-8) by `pattern`: matches and the gaps between them
// become words. Appends lengths in code points.
void split_region(const pcre2_code* code, std::string_view region, std::vector<size_t>& out) {
  std::unique_ptr<pcre2_match_data, MatchDeleter> md(pcre2_match_data_create_from_pattern(code, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(region.data());
  size_t pos = 0;
  size_t prev = 0;
  while (pos < region.size()) {
    const int rc = pcre2_match(code, subject, region.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("pre-tokenizer regex: pcre2_match error {}", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0];
    size_t e = ov[1];
    if (e == b) {  // none of our patterns matches empty; step over one code point anyway
      e = b + 1;
      while (e < region.size() && (static_cast<unsigned char>(region[e]) & 0xC0) == 0x80) ++e;
      pos = e;
      continue;
    }
    if (b > prev) out.push_back(count_cpts(region.substr(prev, b - prev)));
    out.push_back(count_cpts(region.substr(b, e - b)));
    prev = pos = e;
  }
  if (region.size() > prev) out.push_back(count_cpts(region.substr(prev)));
}

// Applies `pattern` to every region (given as code-point lengths) of `text`.
std::vector<size_t> refine(std::string_view text, const std::vector<size_t>& lengths, const char* pattern) {
  const auto code = compile(pattern);
  std::vector<size_t> out;
  size_t byte = 0;
  for (size_t len : lengths) {
    size_t end = byte;
    for (size_t k = 0; k < len; ++k) {
      ++end;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    }
    split_region(code.get(), text.substr(byte, end - byte), out);
    byte = end;
  }
  return out;
}

}  // namespace

std::vector<size_t> split_words_regex(std::string_view text, PreType pre) {
  if (text.empty()) return {};
  std::vector<size_t> words = {count_cpts(text)};
  switch (pre) {
    case PreType::kLlama3: return refine(text, words, kLlama3);
    case PreType::kQwen2: return refine(text, words, kQwen2);
    case PreType::kQwen35: return refine(text, words, kQwen35);
    case PreType::kGemma4: return refine(text, words, kNewlines);
    case PreType::kDefault:
      for (const char* p : kDefault) words = refine(text, words, p);
      return words;
  }
  return words;
}

}  // namespace ft::tok
