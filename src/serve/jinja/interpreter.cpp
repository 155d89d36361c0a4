#include "serve/jinja/interpreter.h"

#include "serve/jinja/lexer.h"

#include <cmath>

namespace ft::jinja {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw TemplateError(msg, std::string::npos); }

// Does the body read `name` (kwargs / varargs) without declaring it? Decides whether
// a macro accepts extra keyword / positional arguments, as HF does.
bool reads_name(const Node* n, const std::string& name) {
  if (!n) return false;
  if (n->kind == NodeKind::IDENT) return n->str == name;
  if (n->kind == NodeKind::MACRO) return false;  // a nested macro has its own
  if (reads_name(n->x.get(), name) || reads_name(n->y.get(), name) || reads_name(n->z.get(), name)) return true;
  for (const NodeList* l : {&n->args, &n->body, &n->alt})
    for (const auto& c : *l)
      if (reads_name(c.get(), name)) return true;
  return false;
}

bool body_reads(const NodeList& body, const std::string& name) {
  for (const auto& c : body)
    if (reads_name(c.get(), name)) return true;
  return false;
}

}  // namespace

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent_) {
    auto it = e->vars_.find(name);
    if (it != e->vars_.end()) return it->second;
  }
  return Value::undefined();
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_string_bytes)
    fail("string longer than the limit of " + std::to_string(limits_.max_string_bytes) + " bytes");
}

std::string Interpreter::render(const NodeList& program, Env& globals) {
  std::string out;
  if (exec_block(program, globals, out) != Flow::NORMAL) fail("break or continue outside a for loop");
  return out;
}

Interpreter::Flow Interpreter::exec_block(const NodeList& body, Env& env, std::string& out) {
  for (const auto& n : body) {
    const Flow f = exec(*n, env, out);
    if (f != Flow::NORMAL) return f;
  }
  return Flow::NORMAL;
}

Interpreter::Flow Interpreter::exec(const Node& n, Env& env, std::string& out) {
  try {
    switch (n.kind) {
      case NodeKind::COMMENT: return Flow::NORMAL;
      case NodeKind::BREAK: return Flow::BREAK;
      case NodeKind::CONTINUE: return Flow::CONTINUE;
      case NodeKind::IF: return exec_block(eval(*n.x, env).truthy() ? n.body : n.alt, env, out);
      case NodeKind::FOR: return exec_for(n, env, out);
      case NodeKind::SET: exec_set(n, env); return Flow::NORMAL;
      case NodeKind::MACRO: exec_macro(n, env); return Flow::NORMAL;
      case NodeKind::CALL_BLOCK: out += exec_call_block(n, env); break;
      case NodeKind::FILTER_BLOCK: {
        std::string inner;
        if (exec_block(n.body, env, inner) != Flow::NORMAL) fail("break or continue inside a filter block");
        out += to_output(apply_filter(*this, Value::string(std::move(inner)), *n.x, env));
        break;
      }
      default: out += to_output(eval(n, env)); break;
    }
  } catch (const TemplateError& e) {
    if (e.offset == std::string::npos) throw TemplateError(e.what(), n.offset);
    throw;
  }
  check_size(out.size());
  return Flow::NORMAL;
}

Interpreter::Flow Interpreter::exec_for(const Node& n, Env& env, std::string& out) {
  Env scope(&env);
  const Node* iter_node = n.y.get();
  const Node* cond = nullptr;
  if (iter_node->kind == NodeKind::SELECT) {  // {% for x in xs if cond %}
    cond = iter_node->y.get();
    iter_node = iter_node->x.get();
  }
  Value iterable = eval(*iter_node, scope);
  Array source;
  if (iterable.is_array()) {
    source = *iterable.arr;
  } else if (iterable.is_mapping()) {
    for (const auto& kv : *iterable.obj) source.push_back(Value::string(kv.first));
  } else {
    fail(std::string("for loop expects a list or a mapping, got ") + type_name(iterable.type));
  }
  auto bind = [&](Env& e, const Value& item) {
    if (n.x->kind == NodeKind::IDENT) {
      e.set(n.x->str, item);
      return;
    }
    if (!item.is_array()) fail(std::string("cannot unpack a ") + type_name(item.type) + " into loop variables");
    if (item.arr->size() != n.x->args.size())
      fail(std::string("too ") + (item.arr->size() < n.x->args.size() ? "few" : "many") + " items to unpack");
    for (size_t k = 0; k < n.x->args.size(); ++k) {
      if (n.x->args[k]->kind != NodeKind::IDENT) fail("loop variables must be names");
      e.set(n.x->args[k]->str, (*item.arr)[k]);
    }
  };
  Array items;
  if (!cond) {
    items = std::move(source);
  } else {
    for (const Value& item : source) {
      if (++iterations_ > limits_.max_loop_iterations) fail("template ran more loop iterations than the limit");
      Env test_scope(&scope);
      bind(test_scope, item);
      if (eval(*cond, test_scope).truthy()) items.push_back(item);
    }
  }
  bool no_iteration = true;
  const int64_t len = int64_t(items.size());
  for (int64_t i = 0; i < len; ++i) {
    if (++iterations_ > limits_.max_loop_iterations)
      fail("template ran more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
    Object loop = {
        {"index", Value::integer(i + 1)},
        {"index0", Value::integer(i)},
        {"revindex", Value::integer(len - i)},
        {"revindex0", Value::integer(len - i - 1)},
        {"first", Value::boolean(i == 0)},
        {"last", Value::boolean(i == len - 1)},
        {"length", Value::integer(len)},
        {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined()},
        {"nextitem", i < len - 1 ? items[size_t(i + 1)] : Value::undefined()},
    };
    scope.set("loop", Value::object(std::move(loop)));
    bind(scope, items[size_t(i)]);
    const Flow f = exec_block(n.body, scope, out);
    if (f == Flow::CONTINUE) continue;
    if (f == Flow::BREAK) break;
    no_iteration = false;
  }
  // HF runs the else block when no iteration ran to its end (every one skipped).
  if (no_iteration && exec_block(n.alt, scope, out) != Flow::NORMAL) fail("break or continue in a for loop's else");
  return Flow::NORMAL;
}

void Interpreter::exec_set(const Node& n, Env& env) {
  Value rhs;
  if (n.y) {
    rhs = eval(*n.y, env);
  } else {
    std::string captured;
    if (exec_block(n.body, env, captured) != Flow::NORMAL) fail("break or continue inside a set block");
    rhs = Value::string(std::move(captured));
  }
  const Node& target = *n.x;
  if (target.kind == NodeKind::IDENT) {
    env.set(target.str, std::move(rhs));
  } else if (target.kind == NodeKind::TUPLE) {
    if (!rhs.is_array()) fail(std::string("cannot unpack a ") + type_name(rhs.type) + " in set");
    if (rhs.arr->size() != target.args.size())
      fail(std::string("too ") + (rhs.arr->size() < target.args.size() ? "few" : "many") + " items to unpack in set");
    for (size_t k = 0; k < target.args.size(); ++k) {
      if (target.args[k]->kind != NodeKind::IDENT) fail("set can only unpack into names");
      env.set(target.args[k]->str, (*rhs.arr)[k]);
    }
  } else if (target.kind == NodeKind::MEMBER && !target.flag) {
    Value object = eval(*target.x, env);
    if (object.type != Type::NAMESPACE) fail("set can assign an attribute only on a namespace() object");
    if (target.y->kind != NodeKind::IDENT) fail("set needs an attribute name");
    object.set(target.y->str, std::move(rhs));
  } else {
    fail("invalid target of set");
  }
}

void Interpreter::bind_macro_args(const std::string& name, const NodeList& params, bool takes_kwargs,
                                  bool takes_varargs, CallArgs& args, Env& scope) {
  Object kw = args.kw;
  std::vector<const Node*> pending;
  for (size_t k = 0; k < params.size(); ++k) {
    const Node& p = *params[k];
    Value v;
    bool given = false;
    if (k < args.pos.size()) {
      v = args.pos[k];
      given = true;
    } else {
      for (auto it = kw.begin(); it != kw.end(); ++it)
        if (it->first == p.str) {
          v = it->second;
          given = true;
          kw.erase(it);
          break;
        }
    }
    if (!given && p.kind == NodeKind::KWARG) pending.push_back(&p);
    scope.set(p.str, given ? v : Value::undefined());
  }
  if (takes_kwargs) scope.set("kwargs", Value::object(kw));
  else if (!kw.empty()) fail("macro " + name + " takes no keyword argument '" + kw.front().first + "'");
  if (takes_varargs) {
    Array rest;
    for (size_t k = params.size(); k < args.pos.size(); ++k) rest.push_back(args.pos[k]);
    scope.set("varargs", Value::array(std::move(rest)));
  } else if (args.pos.size() > params.size()) {
    fail("macro " + name + " takes at most " + std::to_string(params.size()) + " argument(s)");
  }
  for (const Node* p : pending) scope.set(p->str, eval(*p->x, scope));
}

void Interpreter::exec_macro(const Node& n, Env& env) {
  const bool kwargs = body_reads(n.body, "kwargs"), varargs = body_reads(n.body, "varargs");
  const Node* node = &n;
  env.set(n.str, Value::function([this, node, kwargs, varargs](CallArgs& args, Env& caller_env) {
    Env scope(&caller_env);
    bind_macro_args("'" + node->str + "'", node->args, kwargs, varargs, args, scope);
    std::string out;
    if (exec_block(node->body, scope, out) != Flow::NORMAL) fail("break or continue outside a for loop");
    return Value::string(std::move(out));
  }));
}

std::string Interpreter::exec_call_block(const Node& n, Env& env) {
  const bool kwargs = body_reads(n.body, "kwargs"), varargs = body_reads(n.body, "varargs");
  const Node* node = &n;
  Env* defined_in = &env;
  Value caller = Value::function([this, node, kwargs, varargs, defined_in](CallArgs& args, Env&) {
    Env scope(defined_in);
    bind_macro_args("caller", node->args, kwargs, varargs, args, scope);
    std::string out;
    if (exec_block(node->body, scope, out) != Flow::NORMAL) fail("break or continue outside a for loop");
    return Value::string(std::move(out));
  });
  const Node& call = *n.x;
  CallArgs args = eval_args(call.args, env);
  Value fn = eval(*call.x, env);
  Env with_caller(&env);
  with_caller.set("caller", caller);
  return to_output(this->call(fn, args, with_caller));
}

Value Interpreter::call(const Value& fn, CallArgs& args, Env& env) {
  if (fn.type != Type::FUNCTION) fail(std::string("cannot call a ") + type_name(fn.type) + ", it is not a function");
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    fail("calls nest deeper than " + std::to_string(limits_.max_call_depth) + " levels (runaway recursion?)");
  }
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{call_depth_};
  return (*fn.fn)(args, env);
}

Value Interpreter::eval(const Node& n, Env& env) {
  try {
    return eval_inner(n, env);
  } catch (const TemplateError& e) {
    if (e.offset == std::string::npos) throw TemplateError(e.what(), n.offset);
    throw;
  }
}

CallArgs Interpreter::eval_args(const NodeList& args, Env& env) {
  CallArgs out;
  for (const auto& a : args) {
    if (a->kind == NodeKind::SPREAD) {
      Value v = eval(*a->x, env);
      if (!v.is_array()) fail(std::string("cannot unpack a ") + type_name(v.type) + " with *");
      for (const auto& item : *v.arr) out.pos.push_back(item);
    } else if (a->kind != NodeKind::KWARG && a->kind != NodeKind::KWSPREAD) {
      out.pos.push_back(eval(*a, env));
    }
  }
  auto add_kw = [&](const std::string& k, Value v) {
    if (out.kwarg(k)) fail("got multiple values for keyword argument '" + k + "'");
    out.kw.emplace_back(k, std::move(v));
  };
  for (const auto& a : args) {
    if (a->kind == NodeKind::KWARG) {
      add_kw(a->str, eval(*a->x, env));
    } else if (a->kind == NodeKind::KWSPREAD) {
      Value v = eval(*a->x, env);
      if (!v.is_mapping()) fail(std::string("argument after ** must be a mapping, not ") + type_name(v.type));
      for (const auto& [k, item] : *v.obj) add_kw(k, item);
    }
  }
  return out;
}

Value Interpreter::eval_inner(const Node& n, Env& env) {
  switch (n.kind) {
    case NodeKind::INT: return Value::integer(n.i);
    case NodeKind::FLOAT: return Value::number(n.f);
    case NodeKind::STR: return Value::string(n.str);
    case NodeKind::IDENT: return env.lookup(n.str);
    case NodeKind::ARRAY:
    case NodeKind::TUPLE: {
      Array a;
      for (const auto& e : n.args) a.push_back(eval(*e, env));
      Value v = Value::array(std::move(a));
      v.is_tuple = n.kind == NodeKind::TUPLE;
      return v;
    }
    case NodeKind::DICT: {
      Value v = Value::object();
      for (size_t k = 0; k + 1 < n.args.size(); k += 2) {
        Value key = eval(*n.args[k], env);
        if (!key.is_string()) fail(std::string("dict keys must be strings, got ") + type_name(key.type));
        v.set(key.s, eval(*n.args[k + 1], env));
      }
      return v;
    }
    case NodeKind::BINARY: return eval_binary(n, env);
    case NodeKind::UNARY: {
      Value a = eval(*n.x, env);
      if (n.str == "not") return Value::boolean(!a.truthy());
      const int sign = n.str == "-" ? -1 : 1;
      if (a.type == Type::FLOAT) return Value::number(sign * a.f);
      if (a.type == Type::INT || a.type == Type::BOOL) return Value::integer(sign * int64_t(a.as_double()));
      fail("unary " + n.str + " needs a number, got " + type_name(a.type));
    }
    case NodeKind::MEMBER: return eval_member(n, env);
    case NodeKind::CALL: {
      CallArgs args = eval_args(n.args, env);
      Value fn = eval(*n.x, env);
      return call(fn, args, env);
    }
    case NodeKind::FILTER: return apply_filter(*this, eval(*n.x, env), *n.y, env);
    case NodeKind::TEST: {
      const bool r = apply_test(n.str, eval(*n.x, env), nullptr);
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::SELECT: return eval(*n.y, env).truthy() ? eval(*n.x, env) : Value::undefined();
    case NodeKind::TERNARY: return eval(*n.x, env).truthy() ? eval(*n.y, env) : eval(*n.z, env);
    case NodeKind::KWARG:
    case NodeKind::SPREAD:
    case NodeKind::KWSPREAD: fail("argument syntax outside a call");
    case NodeKind::SLICE: fail("slice outside []");
    default: {
      // A statement inside an expression position cannot happen from the parser.
      std::string out;
      exec(n, env, out);
      return Value::string(std::move(out));
    }
  }
}

Value Interpreter::eval_binary(const Node& n, Env& env) {
  const std::string& op = n.str;
  Value l = eval(*n.x, env);
  if (op == "and") return l.truthy() ? eval(*n.y, env) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.y, env);
  Value r = eval(*n.y, env);
  if (op == "==") return Value::boolean(loose_equal(l, r));
  if (op == "!=") return Value::boolean(!loose_equal(l, r));
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    fail("cannot apply '" + op + "' to an undefined value");
  }
  if (l.is_none() || r.is_none()) fail("cannot apply '" + op + "' to none");
  if (op == "~") {
    std::string s = concat_string(l) + concat_string(r);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  const bool l_num = l.is_number() || l.type == Type::BOOL, r_num = r.is_number() || r.type == Type::BOOL;
  if (op == "**" && l_num && r_num) {
    const double a = l.as_double(), b = r.as_double();
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    const double res = std::pow(a, b);
    if (!std::isfinite(res)) fail("exponentiation result is not a finite number");
    if (l.type == Type::FLOAT || r.type == Type::FLOAT || b < 0 || std::fabs(res) >= 9.2e18) return Value::number(res);
    return Value::integer(int64_t(res));
  }
  if (l.is_number() && r.is_number()) {
    const bool is_float = l.type == Type::FLOAT || r.type == Type::FLOAT;
    const double a = l.as_double(), b = r.as_double();
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "/") {
      if (b == 0) fail("division by zero");
      return Value::number(a / b);
    }
    if (!is_float) {
      int64_t res = 0;
      const int64_t x = l.i, y = r.i;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(x, y, &res);
      else if (op == "-") overflow = __builtin_sub_overflow(x, y, &res);
      else if (op == "*") overflow = __builtin_mul_overflow(x, y, &res);
      else if (op == "//" || op == "%") {
        if (y == 0) fail(op == "//" ? "integer division by zero" : "modulo by zero");
        if (x == INT64_MIN && y == -1) overflow = true;
        else if (op == "//") res = int64_t(std::floor(double(x) / double(y)));
        else res = x % y;  // JS: the sign follows the dividend
      }
      if (overflow) fail("integer overflow in '" + op + "'");
      if (op == "+" || op == "-" || op == "*" || op == "//" || op == "%") return Value::integer(res);
    } else {
      if (op == "+") return Value::number(a + b);
      if (op == "-") return Value::number(a - b);
      if (op == "*") return Value::number(a * b);
      if (op == "//") {
        if (b == 0) fail("division by zero");
        return Value::number(std::floor(a / b));
      }
      if (op == "%") {
        if (b == 0) fail("modulo by zero");
        return Value::number(std::fmod(a, b));
      }
    }
  }
  if (l.is_array() && r.is_array() && op == "+") {
    Array a = *l.arr;
    a.insert(a.end(), r.arr->begin(), r.arr->end());
    return Value::array(std::move(a));
  }
  if (r.is_array() && (op == "in" || op == "not in")) {
    bool found = false;
    for (const auto& item : *r.arr)
      if (strict_equal(item, l)) {
        found = true;
        break;
      }
    return Value::boolean(op == "in" ? found : !found);
  }
  if ((l.is_string() || r.is_string()) && op == "+") {
    std::string s = concat_string(l) + concat_string(r);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  if (l.is_string() && r.is_string()) {
    if (op == "in") return Value::boolean(r.s.find(l.s) != std::string::npos);
    if (op == "not in") return Value::boolean(r.s.find(l.s) == std::string::npos);
    // Beyond HF (which has no string ordering): byte order, as Python for ASCII.
    if (op == "<") return Value::boolean(l.s < r.s);
    if (op == ">") return Value::boolean(l.s > r.s);
    if (op == "<=") return Value::boolean(l.s <= r.s);
    if (op == ">=") return Value::boolean(l.s >= r.s);
  }
  if (l.is_string() && r.is_mapping() && (op == "in" || op == "not in")) {
    const bool found = r.find(l.s) != nullptr;
    return Value::boolean(op == "in" ? found : !found);
  }
  fail("unsupported operator '" + op + "' between " + type_name(l.type) + " and " + type_name(r.type));
}

Value Interpreter::eval_slice(const Value& obj, const Node& slice, Env& env) {
  if (!obj.is_array() && !obj.is_string()) fail(std::string("cannot slice a ") + type_name(obj.type));
  auto part = [&](const NodePtr& p, const char* what) -> std::pair<bool, int64_t> {
    if (!p) return {false, 0};
    Value v = eval(*p, env);
    if (v.is_undefined()) return {false, 0};
    if (v.type != Type::INT) fail(std::string("slice ") + what + " must be an integer");
    return {true, v.i};
  };
  auto [has_start, start] = part(slice.x, "start");
  auto [has_stop, stop] = part(slice.y, "stop");
  auto [has_step, step] = part(slice.z, "step");
  if (!has_step) step = 1;
  if (step == 0) fail("slice step cannot be zero");
  // Strings slice by code point.
  std::vector<std::string> chars;
  if (obj.is_string()) chars = split_code_points(obj.s);
  const int64_t size = obj.is_array() ? int64_t(obj.arr->size()) : int64_t(chars.size());
  if (step > 0) {
    start = !has_start ? 0 : start < 0 ? std::max<int64_t>(size + start, 0) : std::min(start, size);
    stop = !has_stop ? size : stop < 0 ? std::max<int64_t>(size + stop, 0) : std::min(stop, size);
  } else {
    start = !has_start ? size - 1 : start < 0 ? std::max<int64_t>(size + start, -1) : std::min(start, size - 1);
    stop = !has_stop ? -1 : stop < -1 ? std::max<int64_t>(size + stop, -1) : std::min(stop, size - 1);
  }
  Array a;
  std::string s;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (obj.is_array()) a.push_back((*obj.arr)[size_t(k)]);
    else s += chars[size_t(k)];
  }
  return obj.is_array() ? Value::array(std::move(a)) : Value::string(std::move(s));
}

Value Interpreter::eval_member(const Node& n, Env& env) {
  Value obj = eval(*n.x, env);
  Value prop;
  if (n.flag) {
    if (n.y->kind == NodeKind::SLICE) return eval_slice(obj, *n.y, env);
    prop = eval(*n.y, env);
  } else if (n.y->kind == NodeKind::INT) {
    prop = Value::integer(n.y->i);
  } else {
    prop = Value::string(n.y->str);
  }
  if (obj.has_attributes()) {
    if (!prop.is_string()) fail(std::string("a mapping's key must be a string, got ") + type_name(prop.type));
    if (const Value* v = obj.find(prop.s)) return *v;
    return obj.is_mapping() ? get_builtin_member(obj, prop.s) : Value::undefined();
  }
  if (obj.is_array() || obj.is_string()) {
    if (prop.type == Type::INT) {
      std::vector<std::string> chars;
      if (obj.is_string()) chars = split_code_points(obj.s);
      const int64_t size = obj.is_array() ? int64_t(obj.arr->size()) : int64_t(chars.size());
      const int64_t k = prop.i < 0 ? size + prop.i : prop.i;
      if (k < 0 || k >= size) return Value::undefined();
      return obj.is_array() ? (*obj.arr)[size_t(k)] : Value::string(chars[size_t(k)]);
    }
    if (prop.is_string()) return get_builtin_member(obj, prop.s);
    fail(std::string("cannot index a sequence with a ") + type_name(prop.type));
  }
  if (!prop.is_string()) fail(std::string("cannot index a ") + type_name(obj.type) + " with a " + type_name(prop.type));
  return get_builtin_member(obj, prop.s);
}

}  // namespace ft::jinja
