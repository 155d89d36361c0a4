#include "serve/jinja/parser.h"

#include <string>

namespace ft::jinja {

namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  NodeList run() {
    NodeList program;
    while (pos_ < t_.size()) program.push_back(any());
    return program;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail("template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& peek(size_t ahead = 0) const {
    if (pos_ + ahead >= t_.size()) fail_at("unexpected end of template", end_offset());
    return t_[pos_ + ahead];
  }
  size_t end_offset() const { return t_.empty() ? 0 : t_.back().offset + t_.back().value.size(); }
  bool is(Tok type, size_t ahead = 0) const { return pos_ + ahead < t_.size() && t_[pos_ + ahead].type == type; }
  bool is_ident(const char* name, size_t ahead = 0) const {
    return is(Tok::IDENT, ahead) && t_[pos_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::OPEN_STMT) || !is(Tok::IDENT, 1)) return false;
    for (const char* n : names)
      if (t_[pos_ + 1].value == n) return true;
    return false;
  }
  [[noreturn]] void fail_at(const std::string& msg, size_t offset) const { throw TemplateError(msg, offset); }
  [[noreturn]] void fail(const std::string& msg) const {
    fail_at(msg, pos_ < t_.size() ? t_[pos_].offset : end_offset());
  }
  const Token& expect(Tok type, const char* what) {
    if (pos_ >= t_.size()) fail_at(std::string("unexpected end of template, expected ") + what, end_offset());
    if (t_[pos_].type != type) fail(std::string("expected ") + what + ", got '" + t_[pos_].value + "'");
    return t_[pos_++];
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) fail(std::string("expected '") + name + "'");
    ++pos_;
  }
  void expect_end(const char* name) {
    expect(Tok::OPEN_STMT, (std::string("{% ") + name + " %}").c_str());
    expect_ident(name);
    expect(Tok::CLOSE_STMT, "'%}'");
  }
  // Statements up to (not including) one of the closing tags `names`.
  NodeList block_until(std::initializer_list<const char*> names, const char* what) {
    NodeList out;
    while (!is_statement(names)) {
      if (pos_ >= t_.size()) fail_at(std::string("unexpected end of template, missing {% ") + what + " %}", end_offset());
      out.push_back(any());
    }
    return out;
  }
  NodePtr node(NodeKind k, size_t offset) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->offset = offset;
    return n;
  }

  NodePtr any() {
    DepthGuard g(*this);
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::COMMENT: ++pos_; return node(NodeKind::COMMENT, tok.offset);
      case Tok::TEXT: {
        auto n = node(NodeKind::STR, tok.offset);
        n->str = tok.value;
        ++pos_;
        return n;
      }
      case Tok::OPEN_STMT: return statement();
      case Tok::OPEN_EXPR: {
        ++pos_;
        auto e = expression();
        expect(Tok::CLOSE_EXPR, "'}}'");
        return e;
      }
      default: fail("unexpected '" + tok.value + "'");
    }
  }

  NodePtr statement() {
    expect(Tok::OPEN_STMT, "'{%'");
    const Token& name_tok = peek();
    if (name_tok.type != Tok::IDENT) fail("expected a statement name after '{%'");
    const std::string name = name_tok.value;
    const size_t at = name_tok.offset;
    ++pos_;
    if (name == "set") return set_statement(at);
    if (name == "if") {
      auto n = if_statement(at);
      expect_end("endif");
      return n;
    }
    if (name == "for") {
      auto n = for_statement(at);
      expect_end("endfor");
      return n;
    }
    if (name == "macro") {
      auto n = node(NodeKind::MACRO, at);
      auto callee = primary();
      if (callee->kind != NodeKind::IDENT) fail("expected a macro name");
      n->str = callee->str;
      n->args = arguments(true);
      expect(Tok::CLOSE_STMT, "'%}'");
      n->body = block_until({"endmacro"}, "endmacro");
      expect_end("endmacro");
      return n;
    }
    if (name == "call") {
      auto n = node(NodeKind::CALL_BLOCK, at);
      if (is(Tok::LPAREN)) n->args = arguments(true);
      auto callee = primary();
      if (callee->kind != NodeKind::IDENT) fail("expected a macro name after 'call'");
      auto call = node(NodeKind::CALL, callee->offset);
      call->x = std::move(callee);
      call->args = arguments(false);
      n->x = std::move(call);
      expect(Tok::CLOSE_STMT, "'%}'");
      n->body = block_until({"endcall"}, "endcall");
      expect_end("endcall");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CLOSE_STMT, "'%}'");
      return node(name == "break" ? NodeKind::BREAK : NodeKind::CONTINUE, at);
    }
    if (name == "filter") {
      auto n = node(NodeKind::FILTER_BLOCK, at);
      auto f = primary();
      if (f->kind == NodeKind::IDENT && is(Tok::LPAREN)) f = call_expression(std::move(f));
      n->x = std::move(f);
      expect(Tok::CLOSE_STMT, "'%}'");
      n->body = block_until({"endfilter"}, "endfilter");
      expect_end("endfilter");
      return n;
    }
    fail_at("unknown statement '" + name + "'", at);
  }

  NodePtr set_statement(size_t at) {
    auto n = node(NodeKind::SET, at);
    n->x = expression_sequence(false);
    if (is(Tok::EQUALS)) {
      ++pos_;
      n->y = expression_sequence(false);
    } else {
      expect(Tok::CLOSE_STMT, "'=' or '%}'");
      n->body = block_until({"endset"}, "endset");
      expect(Tok::OPEN_STMT, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::CLOSE_STMT, "'%}'");
    return n;
  }

  NodePtr if_statement(size_t at) {
    DepthGuard g(*this);
    auto n = node(NodeKind::IF, at);
    n->x = expression();
    expect(Tok::CLOSE_STMT, "'%}'");
    n->body = block_until({"elif", "else", "endif"}, "endif");
    if (is_statement({"elif"})) {
      const size_t elif_at = t_[pos_ + 1].offset;
      pos_ += 2;
      n->alt.push_back(if_statement(elif_at));
    } else if (is_statement({"else"})) {
      pos_ += 2;
      expect(Tok::CLOSE_STMT, "'%}'");
      n->alt = block_until({"endif"}, "endif");
    }
    return n;
  }

  NodePtr for_statement(size_t at) {
    auto n = node(NodeKind::FOR, at);
    n->x = expression_sequence(true);
    if (n->x->kind != NodeKind::IDENT && n->x->kind != NodeKind::TUPLE) fail("expected a loop variable name");
    expect_ident("in");
    n->y = expression();
    expect(Tok::CLOSE_STMT, "'%}'");
    n->body = block_until({"endfor", "else"}, "endfor");
    if (is_statement({"else"})) {
      pos_ += 2;
      expect(Tok::CLOSE_STMT, "'%}'");
      n->alt = block_until({"endfor"}, "endfor");
    }
    return n;
  }

  NodePtr expression_sequence(bool primary_only) {
    const size_t at = peek().offset;
    auto first = primary_only ? primary() : expression();
    if (!is(Tok::COMMA)) return first;
    auto t = node(NodeKind::TUPLE, at);
    t->args.push_back(std::move(first));
    while (is(Tok::COMMA)) {
      ++pos_;
      t->args.push_back(primary_only ? primary() : expression());
    }
    return t;
  }

  NodePtr expression() {
    DepthGuard g(*this);
    auto a = logical_or();
    if (!is_ident("if")) return a;
    const size_t at = t_[pos_].offset;
    ++pos_;
    auto test = logical_or();
    if (is_ident("else")) {
      ++pos_;
      auto n = node(NodeKind::TERNARY, at);
      n->x = std::move(test);
      n->y = std::move(a);
      n->z = expression();
      return n;
    }
    auto n = node(NodeKind::SELECT, at);
    n->x = std::move(a);
    n->y = std::move(test);
    return n;
  }

  NodePtr binary(std::string op, size_t at, NodePtr l, NodePtr r) {
    auto n = node(NodeKind::BINARY, at);
    n->str = std::move(op);
    n->x = std::move(l);
    n->y = std::move(r);
    return n;
  }

  NodePtr logical_or() {
    auto l = logical_and();
    while (is_ident("or")) {
      const size_t at = t_[pos_++].offset;
      l = binary("or", at, std::move(l), logical_and());
    }
    return l;
  }
  NodePtr logical_and() {
    auto l = logical_not();
    while (is_ident("and")) {
      const size_t at = t_[pos_++].offset;
      l = binary("and", at, std::move(l), logical_not());
    }
    return l;
  }
  NodePtr logical_not() {
    if (!is_ident("not")) return comparison();
    DepthGuard g(*this);
    auto n = node(NodeKind::UNARY, t_[pos_++].offset);
    n->str = "not";
    n->x = logical_not();
    return n;
  }
  NodePtr comparison() {
    auto l = additive();
    for (;;) {
      std::string op;
      const size_t at = pos_ < t_.size() ? t_[pos_].offset : 0;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else if (is_ident("in") || is(Tok::CMP)) {
        op = t_[pos_++].value;
      } else {
        return l;
      }
      l = binary(op, at, std::move(l), additive());
    }
  }
  NodePtr additive() {
    auto l = multiplicative();
    while (is(Tok::ADD)) {
      const Token& op = t_[pos_++];
      l = binary(op.value, op.offset, std::move(l), multiplicative());
    }
    return l;
  }
  NodePtr multiplicative() {
    auto l = power();
    while (is(Tok::MUL)) {
      const Token& op = t_[pos_++];
      l = binary(op.value, op.offset, std::move(l), power());
    }
    return l;
  }
  NodePtr power() {
    auto l = test();
    while (is(Tok::POW)) {
      const Token& op = t_[pos_++];
      l = binary(op.value, op.offset, std::move(l), test());
    }
    return l;
  }
  NodePtr test() {
    auto operand = filter();
    while (is_ident("is")) {
      auto n = node(NodeKind::TEST, t_[pos_++].offset);
      if (is_ident("not")) {
        n->flag = true;
        ++pos_;
      }
      auto name = primary();
      if (name->kind != NodeKind::IDENT) fail_at("expected a test name after 'is'", name->offset);
      n->str = name->str;
      n->x = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr filter() {
    auto operand = unary_sign();
    while (is(Tok::PIPE)) {
      auto n = node(NodeKind::FILTER, t_[pos_++].offset);
      auto f = primary();
      if (f->kind != NodeKind::IDENT) fail_at("expected a filter name after '|'", f->offset);
      if (is(Tok::LPAREN)) f = call_expression(std::move(f));
      n->x = std::move(operand);
      n->y = std::move(f);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr unary_sign() {
    if ((is(Tok::UNARY) || is(Tok::ADD)) && (t_[pos_].value == "-" || t_[pos_].value == "+")) {
      DepthGuard g(*this);
      auto n = node(NodeKind::UNARY, t_[pos_].offset);
      n->str = t_[pos_++].value;
      n->x = unary_sign();
      return n;
    }
    auto m = member(primary());
    if (is(Tok::LPAREN)) return call_expression(std::move(m));
    return m;
  }
  NodePtr call_expression(NodePtr callee) {
    DepthGuard g(*this);
    auto n = node(NodeKind::CALL, callee->offset);
    n->x = std::move(callee);
    n->args = arguments(false);
    auto e = member(std::move(n));
    if (is(Tok::LPAREN)) return call_expression(std::move(e));
    return e;
  }

  // "(a, b=1, *xs, **kw)"; parameters: declarations of a macro (names and defaults).
  NodeList arguments(bool parameters) {
    expect(Tok::LPAREN, "'('");
    NodeList args;
    bool saw_keyword = false;
    while (!is(Tok::RPAREN)) {
      if (pos_ >= t_.size()) fail_at("unexpected end of template in an argument list", end_offset());
      const size_t at = t_[pos_].offset;
      const bool kw_spread = is(Tok::POW);
      const bool spread = is(Tok::MUL) && t_[pos_].value == "*";
      if (parameters && (kw_spread || spread)) fail("argument unpacking is not allowed in parameter declarations");
      if (kw_spread || spread) {
        ++pos_;
        auto n = node(kw_spread ? NodeKind::KWSPREAD : NodeKind::SPREAD, at);
        n->x = expression();
        args.push_back(std::move(n));
      } else {
        auto a = expression();
        if (is(Tok::EQUALS)) {
          ++pos_;
          if (a->kind != NodeKind::IDENT) fail_at("expected a name before '='", a->offset);
          auto kw = node(NodeKind::KWARG, a->offset);
          kw->str = a->str;
          kw->x = expression();
          a = std::move(kw);
        }
        if (parameters && a->kind != NodeKind::IDENT && a->kind != NodeKind::KWARG)
          fail_at("expected a parameter name", a->offset);
        if (a->kind == NodeKind::KWARG) saw_keyword = true;
        else if (saw_keyword)
          fail_at(parameters ? "a parameter without default follows one with a default"
                             : "positional argument follows keyword argument",
                  a->offset);
        args.push_back(std::move(a));
      }
      if (is(Tok::COMMA)) ++pos_;
      else if (!is(Tok::RPAREN)) fail("expected ',' or ')' in an argument list");
    }
    ++pos_;
    return args;
  }

  NodePtr member(NodePtr object) {
    while (is(Tok::DOT) || is(Tok::LBRACKET)) {
      const bool computed = is(Tok::LBRACKET);
      auto n = node(NodeKind::MEMBER, t_[pos_++].offset);
      n->flag = computed;
      n->x = std::move(object);
      if (computed) {
        n->y = subscript();
        expect(Tok::RBRACKET, "']'");
      } else {
        n->y = primary();
        if (n->y->kind != NodeKind::IDENT && n->y->kind != NodeKind::INT)
          fail_at("expected a name or an integer after '.'", n->y->offset);
      }
      object = std::move(n);
    }
    return object;
  }

  // The inside of [...]: an index or a slice a:b:c.
  NodePtr subscript() {
    const size_t at = peek().offset;
    NodeList parts;
    bool is_slice = false;
    while (!is(Tok::RBRACKET)) {
      if (pos_ >= t_.size()) fail_at("unexpected end of template, expected ']'", end_offset());
      if (is(Tok::COLON)) {
        parts.push_back(nullptr);
        ++pos_;
        is_slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::COLON)) {
          ++pos_;
          is_slice = true;
        } else if (!is(Tok::RBRACKET)) {
          fail("expected ':' or ']'");
        }
      }
    }
    if (parts.empty()) fail("expected an index or a slice inside []");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) fail_at("a slice takes at most 3 parts", at);
    auto n = node(NodeKind::SLICE, at);
    parts.resize(3);
    n->x = std::move(parts[0]);
    n->y = std::move(parts[1]);
    n->z = std::move(parts[2]);
    return n;
  }

  NodePtr primary() {
    DepthGuard g(*this);
    const Token& tok = peek();
    ++pos_;
    switch (tok.type) {
      case Tok::NUMBER: {
        const bool is_float = tok.value.find('.') != std::string::npos;
        auto n = node(is_float ? NodeKind::FLOAT : NodeKind::INT, tok.offset);
        try {
          if (is_float) n->f = std::stod(tok.value);
          else n->i = std::stoll(tok.value);
        } catch (const std::exception&) {
          fail_at("number out of range: " + tok.value, tok.offset);
        }
        return n;
      }
      case Tok::STRING: {
        auto n = node(NodeKind::STR, tok.offset);
        n->str = tok.value;
        while (is(Tok::STRING)) n->str += t_[pos_++].value;
        return n;
      }
      case Tok::IDENT: {
        auto n = node(NodeKind::IDENT, tok.offset);
        n->str = tok.value;
        return n;
      }
      case Tok::LPAREN: {
        auto e = expression_sequence(false);
        expect(Tok::RPAREN, "')'");
        return e;
      }
      case Tok::LBRACKET: {
        auto n = node(NodeKind::ARRAY, tok.offset);
        while (!is(Tok::RBRACKET)) {
          if (pos_ >= t_.size()) fail_at("unexpected end of template, expected ']'", end_offset());
          n->args.push_back(expression());
          if (is(Tok::COMMA)) ++pos_;
          else if (!is(Tok::RBRACKET)) fail("expected ',' or ']' in a list");
        }
        ++pos_;
        return n;
      }
      case Tok::LBRACE: {
        auto n = node(NodeKind::DICT, tok.offset);
        while (!is(Tok::RBRACE)) {
          if (pos_ >= t_.size()) fail_at("unexpected end of template, expected '}'", end_offset());
          n->args.push_back(expression());
          expect(Tok::COLON, "':' in a dict literal");
          n->args.push_back(expression());
          if (is(Tok::COMMA)) ++pos_;
          else if (!is(Tok::RBRACE)) fail("expected ',' or '}' in a dict literal");
        }
        ++pos_;
        return n;
      }
      default: fail_at("unexpected '" + tok.value + "'", tok.offset);
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

NodeList parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace ft::jinja
