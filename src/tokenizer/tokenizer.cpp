// Tokenizer: special-token partition, BPE encoding of the text between special
// tokens, token pieces and whole-sequence decoding (llama.cpp's tokenize,
// token_to_piece and detokenize).
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/unicode.h"

namespace ft {

namespace {
constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xXX>" token: the (up to two) hex digits at index 3, read the
// way llama.cpp's strtol(text.substr(3, 2), 16) reads them.
char byte_of_token(const std::string& text) {
  int v = 0;
  for (size_t i = 3; i < text.size() && i < 5; ++i) {
    const int h = hex_value(text[i]);
    if (h < 0) break;
    v = v * 16 + h;
  }
  return static_cast<char>(v);
}

// llama.cpp's clean_spaces, three in-place passes over the decoded bytes.
void clean_spaces(std::string& t) {
  auto is_punct = [](char c) { return c == '?' || c == '!' || c == '.' || c == ','; };
  if (t.empty()) return;
  // 1: " ?" " !" " ." " ," lose the space.
  {
    const size_t n = t.size();
    size_t out = 1;
    for (size_t i = 1; i < n; ++i) {
      const char x = t[i];
      if (t[i - 1] == ' ' && is_punct(x)) --out;
      t[out++] = x;
    }
    t.resize(out);
  }
  // 2: " ' " becomes "'". The byte after the apostrophe is overwritten before it
  // is skipped, so the next comparison with t[i - 1] sees '\0' (as llama.cpp).
  {
    const size_t n = t.size();
    size_t out = 1;
    for (size_t i = 1; i < n; ++i) {
      const char x = t[i];
      if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
        --out;
        t[++i] = '\0';
      }
      t[out++] = x;
    }
    t.resize(out);
  }
  // 3: " 's" " 'm" " 're" " 've" lose the space (" 't" " 'd" " 'll" keep it).
  {
    const size_t n = t.size();
    size_t out = 1;
    for (size_t i = 1; i < n; ++i) {
      const char x = t[i];
      if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
        const char x1 = t[i + 1];
        if (x1 == 's' || x1 == 'm') {
          --out;
        } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
          const char x2 = t[i + 2];
          if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --out;
        }
      }
      t[out++] = x;
    }
    t.resize(out);
  }
}

}  // namespace

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range [0, {})", id, n_vocab());
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return texts_[id];
}

uint32_t Tokenizer::token_attr(int32_t id) const {
  check_id(id);
  return attrs_[id];
}

int32_t Tokenizer::find_token(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? kNull : it->second;
}

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }

std::string Tokenizer::piece_for_cache(int32_t id) const {
  const uint32_t attr = attrs_[id];
  const std::string& text = texts_[id];
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    std::string out;
    if (escape_whitespaces_) {
      size_t pos = 0;
      while (true) {
        const size_t hit = text.find(kSpaceEscape, pos);
        out.append(text, pos, hit == std::string::npos ? std::string::npos : hit - pos);
        if (hit == std::string::npos) break;
        out += ' ';
        pos = hit + kSpaceEscape.size();
      }
      return out;
    }
    for (uint32_t cpt : tok::utf8_to_cpts(text)) {
      const int b = tok::unicode_to_byte(cpt);
      if (b >= 0) {
        out += static_cast<char>(b);
        continue;
      }
      // Not a byte-map code point: llama.cpp's marker, text included.
      std::string utf8;
      tok::append_utf8(utf8, cpt);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) out += fmt::format("{:02x}", c);
      out += text + "]";
    }
    return out;
  }
  if (attr & kAttrByte) return std::string(1, byte_of_token(text));
  return {};  // UNDEFINED / UNUSED-only tokens render as nothing
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  check_id(id);
  if (kind_ == Kind::kNone) return special ? fmt::format("<{}>", id) : std::string();
  if (!special && (attrs_[id] & (kAttrUnknown | kAttrControl))) return {};
  return pieces_[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string text;
  bool strip_space = add_space_prefix_;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    text += piece;
  }
  if (kind_ != Kind::kNone && clean_spaces_) clean_spaces(text);
  return text;
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({kNull, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids_) {
    if (!parse_special && (attrs_[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& s = texts_[id];
    if (text.find(s) == std::string_view::npos) continue;  // cheap reject for most specials
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token != kNull) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      const std::string_view hay = text.substr(0, end);
      size_t pos = f.offset;
      while (true) {
        const size_t m = hay.find(s, pos);
        if (m == std::string_view::npos) break;
        if (m > pos) next.push_back({kNull, pos, m - pos});
        next.push_back({id, m, s.size()});
        pos = m + s.size();
      }
      if (pos < end) next.push_back({kNull, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out, std::vector<tok::BpeSpan>& spans) const {
  if (ignore_merges_) {
    const int32_t id = find_token(word);
    if (id != kNull) {
      out.push_back(id);
      return;
    }
  } else if (pre_ == tok::PreType::kGemma4 && word.find_first_not_of('\n') == std::string_view::npos) {
    // Newline runs are looked up whole (llama.cpp PR 21343).
    const int32_t id = find_token(word);
    if (id != kNull) {
      out.push_back(id);
      return;
    }
  }
  tok::bpe_merge(word, ranks_, spans);
  for (const tok::BpeSpan& sp : spans) {
    const std::string_view sym = word.substr(sp.offset, sp.length);
    const int32_t id = find_token(sym);
    if (id != kNull) {
      out.push_back(id);
      continue;
    }
    for (unsigned char b : sym) {  // bytes without a fallback token are dropped, as in llama.cpp
      if (byte_ids_[b] != kNull) out.push_back(byte_ids_[b]);
    }
  }
}

void Tokenizer::encode_fragment(std::string_view text, std::vector<int32_t>& out) const {
  std::string escaped;
  if (escape_whitespaces_) {
    escaped.reserve(text.size() + text.size() / 4);
    for (char c : text) {
      if (c == ' ') {
        escaped += kSpaceEscape;
      } else {
        escaped += c;
      }
    }
    text = escaped;
  }
  const std::vector<uint32_t> cpts = tok::utf8_to_cpts(text);
  const std::vector<size_t> lengths = tok::split_words(cpts, pre_);
  std::string word;
  std::string utf8;
  std::vector<tok::BpeSpan> spans;
  size_t start = 0;
  for (size_t len : lengths) {
    word.clear();
    for (size_t k = start; k < start + len; ++k) {
      if (byte_encode_) {
        utf8.clear();
        tok::append_utf8(utf8, cpts[k]);
        for (unsigned char b : utf8) word += tok::byte_to_unicode(b);
      } else {
        tok::append_utf8(word, cpts[k]);
      }
    }
    start += len;
    encode_word(word, out, spans);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  if (kind_ == Kind::kNone) {
    fail("cannot encode text: the model has no vocabulary (tokenizer.ggml.model = \"{}\")", model_name_);
  }
  std::vector<int32_t> out;
  if (add_special && add_bos_) {
    if (bos_ == kNull) fail("cannot add BOS: tokenizer.ggml.add_bos_token is true but the vocabulary has no BOS token");
    out.push_back(bos_);
  }
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token != kNull) {
      out.push_back(f.token);
    } else {
      encode_fragment(text.substr(f.offset, f.length), out);
    }
  }
  if (add_special && add_eos_) {
    if (eos_ == kNull) fail("cannot add EOS: tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token");
    out.push_back(eos_);
  }
  if (add_special && add_bos_ && out.size() >= 2 && out[1] == bos_) {
    log::warn("the prompt starts with a BOS token and another one was added: it now starts with 2 BOS tokens");
  }
  if (add_special && add_eos_ && out.size() >= 2 && out[out.size() - 2] == eos_) {
    log::warn("the prompt ends with an EOS token and another one was added: it now ends with 2 EOS tokens");
  }
  return out;
}

// ---- StreamDecoder -----------------------------------------------------------

namespace {
// Bytes at the end of `s` that start a UTF-8 character still missing bytes.
size_t incomplete_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[n - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = 1;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    return need > k ? k : 0;
  }
  return 0;  // only continuation bytes: malformed, nothing will complete them
}
}  // namespace

std::string Tokenizer::StreamDecoder::feed(int32_t id) {
  pending_ += tok_.token_to_piece(id, special_);
  const size_t keep = incomplete_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string Tokenizer::StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ft
