// Evaluates a parsed template. Scoping follows @huggingface/jinja: a for loop opens
// one scope for its body (a `set` inside stays there), if does not, a macro runs in
// a child of its caller's scope. Limits bound loop iterations, call depth and output
// size, so a malformed or hostile template ends in an error, never a hang.
#pragma once

#include "serve/jinja/ast.h"
#include "serve/jinja/value.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace ft::jinja {

struct Limits {
  int64_t max_loop_iterations = 2'000'000;  // all loops of one render together
  int max_call_depth = 128;                 // macro / caller recursion
  size_t max_string_bytes = 64u << 20;      // any string, the output included
};

class Env {
 public:
  explicit Env(Env* parent = nullptr) : parent_(parent) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  Env* parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Interpreter {
 public:
  explicit Interpreter(Limits limits = {}) : limits_(limits) {}

  std::string render(const NodeList& program, Env& globals);

  // Used by the builtins.
  Value eval(const Node& n, Env& env);
  const Limits& limits() const { return limits_; }
  void check_size(size_t bytes) const;
  Value call(const Value& fn, CallArgs& args, Env& env);

 private:
  enum class Flow { NORMAL, BREAK, CONTINUE };
  Flow exec_block(const NodeList& body, Env& env, std::string& out);
  Flow exec(const Node& n, Env& env, std::string& out);
  Flow exec_for(const Node& n, Env& env, std::string& out);
  void exec_set(const Node& n, Env& env);
  void exec_macro(const Node& n, Env& env);
  std::string exec_call_block(const Node& n, Env& env);

  Value eval_inner(const Node& n, Env& env);
  Value eval_binary(const Node& n, Env& env);
  Value eval_member(const Node& n, Env& env);
  Value eval_slice(const Value& obj, const Node& slice, Env& env);
  CallArgs eval_args(const NodeList& args, Env& env);
  void bind_macro_args(const std::string& name, const NodeList& params, bool takes_kwargs, bool takes_varargs,
                       CallArgs& args, Env& scope);

  Limits limits_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

// builtins.cpp
void install_globals(Env& env);
Value apply_filter(Interpreter& in, const Value& operand, const Node& filter, Env& env);
bool apply_test(const std::string& name, const Value& operand, const Value* arg);
// A method or property of a value (s.strip, d.items, list.length); undefined if none.
Value get_builtin_member(const Value& obj, const std::string& name);
bool strict_equal(const Value& a, const Value& b);
bool loose_equal(const Value& a, const Value& b);
// Orders two values as HF's sort/dictsort do (numbers, or strings case-insensitively).
int compare_values(const Value& a, const Value& b, bool case_sensitive);
std::vector<std::string> split_code_points(const std::string& s);
// JS String(value) for `+` / `~` concatenation.
std::string concat_string(const Value& v);

}  // namespace ft::jinja
