// Jinja source -> tokens, with @huggingface/jinja's preprocessing (the template's
// final newline dropped, lstrip_blocks and trim_blocks on as transformers sets them,
// {% generation %} tags removed) and whitespace control ({%- -%} {{- -}} {#- -#}).
// Every token keeps the byte offset of its start in the original source, for errors.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace ft::jinja {

// A template error at a byte offset of the original source (npos: unknown).
class TemplateError : public std::runtime_error {
 public:
  TemplateError(const std::string& msg, size_t offset) : std::runtime_error(msg), offset(offset) {}
  size_t offset;
};

enum class Tok {
  TEXT, NUMBER, STRING, IDENT, EQUALS, LPAREN, RPAREN, OPEN_STMT, CLOSE_STMT, OPEN_EXPR, CLOSE_EXPR,
  LBRACKET, RBRACKET, LBRACE, RBRACE, COMMA, DOT, COLON, PIPE, ADD, MUL, POW, CMP, UNARY, COMMENT
};

struct Token {
  Tok type;
  std::string value;
  size_t offset;
};

std::vector<Token> tokenize(const std::string& source);

// "line L, column C" (1-based; columns count bytes) for an offset into source.
std::string describe_position(const std::string& source, size_t offset);

}  // namespace ft::jinja
