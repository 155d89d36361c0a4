#include "serve/jinja/lexer.h"

#include <cstring>

namespace ft::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// The preprocessed source and, for each of its bytes, the offset in the original.
struct Source {
  std::string text;
  std::vector<size_t> origin;
  void put(char c, size_t at) {
    text += c;
    origin.push_back(at);
  }
};

// {% generation %} / {% endgeneration %} at s[i] ("{%" already seen): returns the
// length of the tag and whether it has '-' on either side, or 0.
size_t generation_tag(const std::string& s, size_t i, bool& lstrip, bool& rstrip) {
  size_t p = i + 2;
  lstrip = p < s.size() && s[p] == '-';
  if (lstrip) ++p;
  while (p < s.size() && is_space(s[p])) ++p;
  if (s.compare(p, 3, "end") == 0) p += 3;
  if (s.compare(p, 10, "generation") != 0) return 0;
  p += 10;
  while (p < s.size() && is_space(s[p])) ++p;
  rstrip = p < s.size() && s[p] == '-';
  if (rstrip) ++p;
  if (s.compare(p, 2, "%}") != 0) return 0;
  return p + 2 - i;
}

Source preprocess(const std::string& original) {
  size_t n = original.size();
  if (n > 0 && original[n - 1] == '\n') --n;  // HF drops the template's final newline

  // lstrip_blocks: blanks at a line start before {% / {# / {- go.
  Source a;
  for (size_t i = 0; i < n;) {
    const bool line_start = i == 0 || original[i - 1] == '\n' || original[i - 1] == '\r';
    if (line_start) {
      size_t j = i;
      while (j < n && (original[j] == ' ' || original[j] == '\t')) ++j;
      if (j + 1 < n && original[j] == '{' && std::strchr("#%-", original[j + 1])) i = j;
    }
    // copy up to and including the next line break
    while (i < n) {
      a.put(original[i], i);
      if (original[i++] == '\n' || original[i - 1] == '\r') break;
    }
  }

  // trim_blocks: the newline right after #} %} -} goes.
  Source b;
  for (size_t i = 0; i < a.text.size(); ++i) {
    if (a.text[i] == '\n' && i >= 2 && a.text[i - 1] == '}' && std::strchr("#%-", a.text[i - 2])) continue;
    b.put(a.text[i], a.origin[i]);
  }

  // {% generation %} markers (HF's assistant-mask tags) are removed with their
  // whitespace control applied.
  Source c;
  size_t protect = 0;  // whitespace kept by a previous marker cannot be stripped again
  for (size_t i = 0; i < b.text.size();) {
    bool ls = false, rs = false;
    size_t len = 0;
    if (b.text.compare(i, 2, "{%") == 0) len = generation_tag(b.text, i, ls, rs);
    if (len == 0) {
      c.put(b.text[i], b.origin[i]);
      ++i;
      continue;
    }
    if (ls)
      while (c.text.size() > protect && is_space(c.text.back())) {
        c.text.pop_back();
        c.origin.pop_back();
      }
    i += len;
    if (rs)
      while (i < b.text.size() && is_space(b.text[i])) ++i;
    else
      while (i < b.text.size() && is_space(b.text[i])) c.put(b.text[i], b.origin[i]), ++i;
    protect = c.text.size();
  }
  return c;
}

struct Table {
  const char* seq;
  Tok type;
};
// Longest first where one is a prefix of another.
const Table kTable[] = {
    {"{%", Tok::OPEN_STMT}, {"%}", Tok::CLOSE_STMT}, {"{{", Tok::OPEN_EXPR}, {"}}", Tok::CLOSE_EXPR},
    {"(", Tok::LPAREN},     {")", Tok::RPAREN},      {"{", Tok::LBRACE},     {"}", Tok::RBRACE},
    {"[", Tok::LBRACKET},   {"]", Tok::RBRACKET},    {",", Tok::COMMA},      {".", Tok::DOT},
    {":", Tok::COLON},      {"|", Tok::PIPE},        {"<=", Tok::CMP},       {">=", Tok::CMP},
    {"==", Tok::CMP},       {"!=", Tok::CMP},        {"<", Tok::CMP},        {">", Tok::CMP},
    {"+", Tok::ADD},        {"-", Tok::ADD},         {"~", Tok::ADD},        {"**", Tok::POW},
    {"*", Tok::MUL},        {"//", Tok::MUL},        {"/", Tok::MUL},        {"%", Tok::MUL},
    {"=", Tok::EQUALS},
};

class Lexer {
 public:
  explicit Lexer(const std::string& original) : src_(preprocess(original)), s_(src_.text), end_offset_(original.size()) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const bool after_tag = tokens_.empty() || last() == Tok::CLOSE_STMT || last() == Tok::CLOSE_EXPR ||
                             last() == Tok::COMMENT;
      if (after_tag) {
        const size_t start = pos_;
        while (pos_ < s_.size() && !(s_[pos_] == '{' && pos_ + 1 < s_.size() &&
                                     (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '{' || s_[pos_ + 1] == '#')))
          ++pos_;
        if (pos_ > start) {
          push(Tok::TEXT, s_.substr(start, pos_ - start), start);
          continue;
        }
      }
      if (at("{#")) {
        comment();
        continue;
      }
      if (at("{%-") || at("{{-")) {
        strip_trailing();
        push(s_[pos_ + 1] == '%' ? Tok::OPEN_STMT : Tok::OPEN_EXPR, s_[pos_ + 1] == '%' ? "{%" : "{{", pos_);
        if (s_[pos_ + 1] == '{') curly_ = 0;
        pos_ += 3;
        continue;
      }
      consume_while([](char c) { return is_space(c); });
      if (at("-%}") || at("-}}")) {
        push(s_[pos_ + 1] == '%' ? Tok::CLOSE_STMT : Tok::CLOSE_EXPR, s_[pos_ + 1] == '%' ? "%}" : "}}", pos_);
        pos_ += 3;
        while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char ch = s_[pos_];
      if ((ch == '-' || ch == '+') && sign_or_number(ch)) continue;
      if (table()) continue;
      if (ch == '\'' || ch == '"') {
        const size_t start = pos_++;
        std::string str = consume_while([ch](char c) { return c != ch; });
        push(Tok::STRING, std::move(str), start);
        ++pos_;
        continue;
      }
      if (is_digit(ch)) {
        const size_t start = pos_;
        std::string num = consume_while(is_digit);
        if (last() != Tok::DOT && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
          ++pos_;
          num += '.';
          num += consume_while(is_digit);
        }
        push(Tok::NUMBER, std::move(num), start);
        continue;
      }
      if (is_word(ch)) {
        const size_t start = pos_;
        push(Tok::IDENT, consume_while(is_word), start);
        continue;
      }
      fail(std::string("unexpected character '") + ch + "'", pos_);
    }
    return std::move(tokens_);
  }

 private:
  Tok last() const { return tokens_.empty() ? Tok::TEXT : tokens_.back().type; }
  bool at(const char* seq) const { return s_.compare(pos_, std::strlen(seq), seq) == 0; }
  size_t origin(size_t p) const { return p < src_.origin.size() ? src_.origin[p] : end_offset_; }
  [[noreturn]] void fail(const std::string& msg, size_t p) const { throw TemplateError(msg, origin(p)); }
  void push(Tok t, std::string v, size_t at_pos) { tokens_.push_back({t, std::move(v), origin(at_pos)}); }

  void strip_trailing() {
    if (tokens_.empty() || tokens_.back().type != Tok::TEXT) return;
    std::string& v = tokens_.back().value;
    while (!v.empty() && is_space(v.back())) v.pop_back();
    if (v.empty()) tokens_.pop_back();
  }

  // Consumes characters while pred holds, decoding backslash escapes (as HF does
  // everywhere, though only string literals can contain them).
  template <class Pred>
  std::string consume_while(Pred pred) {
    std::string out;
    while (pos_ < s_.size() && pred(s_[pos_])) {
      if (s_[pos_] == '\\') {
        if (++pos_ >= s_.size()) fail("unexpected end of input in an escape sequence", pos_);
        const char e = s_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case 'x':
          case 'u': hex_escape(e == 'x' ? 2 : 4, out); break;
          default: fail(std::string("unexpected escaped character '") + e + "'", pos_ - 1);
        }
        continue;
      }
      out += s_[pos_++];
      if (pos_ >= s_.size()) fail("unexpected end of input (unclosed string or tag)", pos_);
    }
    return out;
  }

  void hex_escape(int len, std::string& out) {
    if (pos_ + size_t(len) > s_.size()) fail("invalid hexadecimal escape", pos_);
    uint32_t cp = 0;
    for (int k = 0; k < len; ++k) {
      const char h = s_[pos_ + size_t(k)];
      const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) fail("invalid hexadecimal escape", pos_);
      cp = cp * 16 + uint32_t(d);
    }
    pos_ += size_t(len);
    // UTF-8 encode (a lone surrogate is encoded as is, like CESU).
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }

  void comment() {
    const size_t start = pos_;
    pos_ += 2;
    const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
    if (strip_before) ++pos_;
    const size_t close = s_.find("#}", pos_);
    if (close == std::string::npos) fail("missing end of comment tag '#}'", start);
    std::string text = s_.substr(pos_, close - pos_);
    const bool strip_after = !text.empty() && text.back() == '-';
    if (strip_after) text.pop_back();
    if (strip_before) strip_trailing();
    push(Tok::COMMENT, std::move(text), start);
    pos_ = close + 2;
    if (strip_after)
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  // '-' / '+' that is not a binary operator: a signed number literal or a unary sign.
  bool sign_or_number(char ch) {
    const Tok lt = last();
    if (tokens_.empty() || lt == Tok::TEXT) fail(std::string("unexpected character '") + ch + "'", pos_);
    if (lt == Tok::IDENT || lt == Tok::NUMBER || lt == Tok::STRING || lt == Tok::RPAREN || lt == Tok::RBRACKET)
      return false;
    const size_t start = pos_++;
    std::string num = consume_while(is_digit);
    if (!num.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      ++pos_;
      num += '.';
          num += consume_while(is_digit);
    }
    push(num.empty() ? Tok::UNARY : Tok::NUMBER, std::string(1, ch) + num, start);
    return true;
  }

  bool table() {
    for (const auto& t : kTable) {
      if (t.type == Tok::CLOSE_EXPR && curly_ > 0) continue;
      if (!at(t.seq)) continue;
      push(t.type, t.seq, pos_);
      if (t.type == Tok::OPEN_EXPR) curly_ = 0;
      else if (t.type == Tok::LBRACE) ++curly_;
      else if (t.type == Tok::RBRACE) --curly_;
      pos_ += std::strlen(t.seq);
      return true;
    }
    return false;
  }

  Source src_;
  const std::string& s_;
  size_t end_offset_;
  size_t pos_ = 0;
  int curly_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

std::string describe_position(const std::string& source, size_t offset) {
  if (offset == std::string::npos) return "unknown position";
  if (offset > source.size()) offset = source.size();
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace ft::jinja
