// Runtime values of the Jinja engine. Semantics follow @huggingface/jinja (the
// reference the chat templates are tested against), which differs from Python Jinja
// in printing: true/false, and lists/dicts as JSON. Arrays, objects and namespaces
// are shared by reference (as in JS and Python), so `ns.x = ...` is seen by every
// holder and `==` on containers compares identity.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ft::jinja {

struct Value;
using Array = std::vector<Value>;
// Insertion-ordered: templates print tool schemas in the order the client sent them.
using Object = std::vector<std::pair<std::string, Value>>;

struct CallArgs;
class Env;
// A callable: a builtin, a bound method, or a macro. env is the caller's scope (HF
// macros see the variables of the place they are called from).
using Function = std::function<Value(CallArgs&, Env&)>;

enum class Type { UNDEFINED, NONE, BOOL, INT, FLOAT, STRING, ARRAY, OBJECT, NAMESPACE, FUNCTION };

struct Value {
  Type type = Type::UNDEFINED;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> arr;       // ARRAY
  std::shared_ptr<Object> obj;      // OBJECT, NAMESPACE
  std::shared_ptr<Function> fn;     // FUNCTION
  bool is_tuple = false;            // ARRAY made by (a, b)

  static Value undefined() { return {}; }
  static Value none() { Value v; v.type = Type::NONE; return v; }
  static Value boolean(bool x) { Value v; v.type = Type::BOOL; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.type = Type::INT; v.i = x; return v; }
  static Value number(double x) { Value v; v.type = Type::FLOAT; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.type = Type::STRING; v.s = std::move(x); return v; }
  static Value array(Array a = {}) {
    Value v; v.type = Type::ARRAY; v.arr = std::make_shared<Array>(std::move(a)); return v;
  }
  static Value object(Object o = {}, Type t = Type::OBJECT) {
    Value v; v.type = t; v.obj = std::make_shared<Object>(std::move(o)); return v;
  }
  static Value function(Function f) {
    Value v; v.type = Type::FUNCTION; v.fn = std::make_shared<Function>(std::move(f)); return v;
  }

  bool is_undefined() const { return type == Type::UNDEFINED; }
  bool is_none() const { return type == Type::NONE; }
  bool is_string() const { return type == Type::STRING; }
  bool is_number() const { return type == Type::INT || type == Type::FLOAT; }
  bool is_array() const { return type == Type::ARRAY; }
  bool is_mapping() const { return type == Type::OBJECT; }
  bool has_attributes() const { return type == Type::OBJECT || type == Type::NAMESPACE; }

  double as_double() const { return type == Type::FLOAT ? f : type == Type::BOOL ? (b ? 1 : 0) : double(i); }
  bool truthy() const;
  // Member lookup in an OBJECT / NAMESPACE; nullptr when absent.
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Keyword arguments of a call, kept apart from the positional ones.
struct CallArgs {
  std::vector<Value> pos;
  Object kw;
  const Value* kwarg(const std::string& name) const;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

const char* type_name(Type t);

// How `{{ v }}` prints (HF: floats keep ".0", booleans are lower case, containers as JSON).
std::string to_output(const Value& v);
// How JS stringifies a number: shortest round trip, exponent outside [1e-6, 1e21).
std::string js_number(double x);

struct JsonOptions {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_sep, key_sep;
};
// Python-json.dumps-style text (HF's tojson): ", " and ": " on one line, "," and
// ": " with an indent, unless separators are given.
std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null = true);
std::string json_quote(const std::string& s, bool ensure_ascii);

// Conversions at the API boundary. Integral floats become integers, as JSON.parse does.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace ft::jinja
