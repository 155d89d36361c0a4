#include "serve/jinja/template.h"

#include "core/error.h"
#include "serve/jinja/lexer.h"
#include "serve/jinja/parser.h"

namespace ft::jinja {

Template::Template(std::string source) : source_(std::move(source)) {
  try {
    program_ = parse(tokenize(source_));
  } catch (const TemplateError& e) {
    fail("chat template syntax error at {}: {}", describe_position(source_, e.offset), e.what());
  }
}

std::string Template::render(const nlohmann::ordered_json& context, const Limits& limits) const {
  Env globals;
  install_globals(globals);
  if (context.is_object())
    for (const auto& [k, v] : context.items()) globals.set(k, from_json(v));
  Interpreter in(limits);
  try {
    return in.render(program_, globals);
  } catch (const TemplateError& e) {
    fail("chat template error at {}: {}", describe_position(source_, e.offset), e.what());
  }
}

}  // namespace ft::jinja
