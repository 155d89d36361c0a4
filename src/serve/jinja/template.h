// A compiled Jinja template: parse once, render many times with a JSON context.
//   ft::jinja::Template t(src);             // throws ft::Error on a syntax error
//   std::string s = t.render({{"messages", ...}});
// Errors (syntax, raise_exception, a limit hit) are ft::Error naming the line and
// column of the template where they happened.
#pragma once

#include "serve/jinja/ast.h"
#include "serve/jinja/interpreter.h"

#include <nlohmann/json.hpp>

#include <string>

namespace ft::jinja {

class Template {
 public:
  explicit Template(std::string source);
  // Each key of context becomes a top-level variable.
  std::string render(const nlohmann::ordered_json& context, const Limits& limits = {}) const;

 private:
  std::string source_;
  NodeList program_;
};

}  // namespace ft::jinja
