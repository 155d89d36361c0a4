// Tokens -> syntax tree, following @huggingface/jinja's grammar (operator
// precedence, tests and filters binding tighter than arithmetic, `a if b` without
// else yielding undefined). Nesting deeper than kMaxNesting is an error rather than
// a stack overflow.
#pragma once

#include "serve/jinja/ast.h"
#include "serve/jinja/lexer.h"

namespace ft::jinja {

constexpr int kMaxNesting = 200;

NodeList parse(const std::vector<Token>& tokens);

}  // namespace ft::jinja
