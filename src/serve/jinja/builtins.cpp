// Filters, tests, methods and globals, with @huggingface/jinja's semantics where the
// chat templates can observe them; a few extras (select/reject, map with a filter
// name, strip with characters as Python has it) are marked where they differ.
#include "serve/jinja/interpreter.h"
#include "serve/jinja/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

namespace ft::jinja {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw TemplateError(msg, std::string::npos); }

uint32_t decode_at(const std::string& s, size_t i, size_t& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  if (i + len > s.size()) len = 1;
  if (len == 1) return c;
  uint32_t cp = c & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  return cp;
}

// JS String.prototype.trim's whitespace (ASCII, NBSP, BOM and Unicode spaces).
bool js_space(uint32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000 || cp == 0xfeff;
}

// Strips code points matching `drop` from the left and/or right.
template <class Pred>
std::string strip_if(const std::string& s, bool left, bool right, Pred drop) {
  const auto cps = split_code_points(s);
  size_t b = 0, e = cps.size();
  auto cp_of = [&](size_t k) {
    size_t len;
    return decode_at(cps[k], 0, len);
  };
  if (left)
    while (b < e && drop(cp_of(b), cps[b])) ++b;
  if (right)
    while (e > b && drop(cp_of(e - 1), cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

std::string js_trim(const std::string& s, bool left = true, bool right = true) {
  return strip_if(s, left, right, [](uint32_t cp, const std::string&) { return js_space(cp); });
}

// Python's str.strip(chars): with chars, exactly those characters go. (HF ignores
// the argument and strips whitespace; the templates call strip('\n') meaning newlines.)
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  if (!chars || chars->is_none() || chars->is_undefined()) return js_trim(s, left, right);
  if (!chars->is_string()) fail("strip() argument must be a string");
  const auto set = split_code_points(chars->s);
  return strip_if(s, left, right, [&](uint32_t, const std::string& c) {
    return std::find(set.begin(), set.end(), c) != set.end();
  });
}

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = char(c - 32);
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c + 32);
  return s;
}
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

int64_t utf16_length(const std::string& s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const uint32_t cp = decode_at(s, i, len);
    n += cp >= 0x10000 ? 2 : 1;
    i += len;
  }
  return n;
}

std::string js_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (count == 0) return s;
  int64_t left = count < 0 ? INT64_MAX : count;
  std::string out;
  if (from.empty()) {  // JS: at every code point boundary, both ends included
    const auto cps = split_code_points(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (left > 0) {
        out += to;
        --left;
      }
      if (k < cps.size()) out += cps[k];
    }
    return out;
  }
  size_t pos = 0;
  for (;;) {
    const size_t hit = left > 0 ? s.find(from, pos) : std::string::npos;
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    --left;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value str_array(const std::vector<std::string>& parts) {
  Array a;
  for (const auto& p : parts) a.push_back(Value::string(p));
  return Value::array(std::move(a));
}

Value string_split(const std::string& s, const Value* sep, const Value* maxsplit_v) {
  int64_t maxsplit = -1;
  if (maxsplit_v && !maxsplit_v->is_undefined()) {
    if (maxsplit_v->type != Type::INT) fail("split() maxsplit must be an integer");
    maxsplit = maxsplit_v->i;
  }
  std::vector<std::string> parts;
  if (!sep || sep->is_none() || sep->is_undefined()) {
    const std::string text = js_trim(s, true, false);
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i >= text.size()) break;
      if (maxsplit != -1 && int64_t(parts.size()) >= maxsplit) {
        parts.push_back(text.substr(i));
        break;
      }
      size_t j = i;
      while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      parts.push_back(text.substr(i, j - i));
      i = j;
    }
    return str_array(parts);
  }
  if (!sep->is_string()) fail("split() separator must be a string or none");
  if (sep->s.empty()) fail("split() got an empty separator");
  size_t pos = 0;
  for (;;) {
    if (maxsplit != -1 && int64_t(parts.size()) >= maxsplit) break;
    const size_t hit = s.find(sep->s, pos);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + sep->s.size();
  }
  parts.push_back(s.substr(pos));
  return str_array(parts);
}

bool affix_match(const std::string& s, const Value* pattern, bool prefix, const char* name) {
  if (!pattern) fail(std::string(name) + "() needs an argument");
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (pattern->is_string()) return one(pattern->s);
  if (pattern->is_array()) {
    for (const auto& item : *pattern->arr) {
      if (!item.is_string()) fail(std::string(name) + "() tuple elements must be strings");
      if (one(item.s)) return true;
    }
    return false;
  }
  fail(std::string(name) + "() argument must be a string or a tuple of strings");
}

Value method(std::function<Value(CallArgs&)> f) {
  return Value::function([f = std::move(f)](CallArgs& a, Env&) { return f(a); });
}

Value items_of(const Value& obj) {
  Array a;
  for (const auto& [k, v] : *obj.obj) a.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(a));
}

Value dictsort(const Value& obj, const CallArgs& args) {
  const Value* cs = args.get(0, "case_sensitive");
  const Value* by = args.get(1, "by");
  const Value* rev = args.get(2, "reverse");
  if (cs && cs->type != Type::BOOL) fail("dictsort: case_sensitive must be a boolean");
  if (by && (!by->is_string() || (by->s != "key" && by->s != "value"))) fail("dictsort: by must be 'key' or 'value'");
  if (rev && rev->type != Type::BOOL) fail("dictsort: reverse must be a boolean");
  const bool case_sensitive = cs && cs->b, reverse = rev && rev->b;
  const size_t idx = by && by->s == "value" ? 1 : 0;
  Value items = items_of(obj);
  std::stable_sort(items.arr->begin(), items.arr->end(), [&](const Value& a, const Value& b) {
    const int r = compare_values((*a.arr)[idx], (*b.arr)[idx], case_sensitive);
    return reverse ? r > 0 : r < 0;
  });
  return items;
}

// item.a.b or item.0 as HF's attribute paths for sort / map.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t pos = 0;
  for (;;) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (v.has_attributes()) {
      const Value* f = v.find(part);
      v = f ? *f : Value::undefined();
    } else if (v.is_array()) {
      char* end = nullptr;
      const long k = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || k < 0 || size_t(k) >= v.arr->size()) return Value::undefined();
      v = (*v.arr)[size_t(k)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

std::string strftime_now(const std::string& fmt) {
  static const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  static const char* kLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                "July",    "August",   "September", "October", "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto pad2 = [](int v) {
    std::string r = v < 10 ? "0" : "";
    r += std::to_string(v);
    return r;
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char c = fmt[++i];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += kShort[tm.tm_mon]; break;
      case 'B': out += kLong[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%', out += c;  // HF leaves other directives as written
    }
  }
  return out;
}

Value string_filter(const std::string& name, const Value& v, Interpreter& in, CallArgs& args, Env& env) {
  const std::string& s = v.s;
  if (name == "length" || name == "count") return Value::integer(utf16_length(s));
  if (name == "upper") return Value::string(ascii_upper(s));
  if (name == "lower") return Value::string(ascii_lower(s));
  if (name == "title" || name == "capitalize") return in.call(get_builtin_member(v, name), args, env);
  if (name == "trim") return Value::string(js_trim(s));
  if (name == "string" || name == "safe") return v;
  if (name == "join") {
    const Value* sep = args.get(0, "separator");
    std::string out;
    const auto cps = split_code_points(s);
    for (size_t k = 0; k < cps.size(); ++k) out += (k ? (sep ? sep->s : "") : "") + cps[k];
    in.check_size(out.size());
    return Value::string(out);
  }
  if (name == "indent") {
    const Value* w = args.get(0, "width");
    const Value* first = args.get(1, "first");
    const Value* blank = args.get(2, "blank");
    if (w && w->type != Type::INT) fail("indent: width must be an integer");
    const int64_t width = w ? w->i : 4;
    if (width < 0 || width > 1000) fail("indent: width out of range");
    const std::string pad(size_t(width), ' ');
    std::string out;
    size_t pos = 0;
    for (int line = 0;; ++line) {
      const size_t nl = s.find('\n', pos);
      const std::string l = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      const bool skip = (line == 0 && !(first && first->truthy())) || (l.empty() && !(blank && blank->truthy()));
      out += (skip ? "" : pad) + l;
      if (nl == std::string::npos) break;
      out += '\n';
      pos = nl + 1;
    }
    in.check_size(out.size());
    return Value::string(out);
  }
  if (name == "replace") {
    return in.call(get_builtin_member(v, "replace"), args, env);
  }
  if (name == "int" || name == "float") {
    const char* p = s.c_str();
    while (*p && std::isspace(static_cast<unsigned char>(*p))) ++p;
    char* end = nullptr;
    const double d = name == "int" ? double(std::strtoll(p, &end, 10)) : std::strtod(p, &end);
    if (end == p) {
      if (const Value* def = args.get(0, "default")) return *def;
      return name == "int" ? Value::integer(0) : Value::number(0);
    }
    return name == "int" ? Value::integer(int64_t(d)) : Value::number(d);
  }
  fail("unknown filter '" + name + "' for a string");
}

}  // namespace

std::vector<std::string> split_code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    decode_at(s, i, len);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string concat_string(const Value& v) {
  switch (v.type) {
    case Type::INT: return std::to_string(v.i);
    case Type::FLOAT: return js_number(v.f);
    case Type::NONE: return "null";
    case Type::UNDEFINED: return "undefined";
    default: return to_output(v);
  }
}

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::UNDEFINED:
    case Type::NONE: return true;
    case Type::BOOL: return a.b == b.b;
    case Type::STRING: return a.s == b.s;
    case Type::ARRAY: return a.arr == b.arr;
    case Type::OBJECT:
    case Type::NAMESPACE: return a.obj == b.obj;
    case Type::FUNCTION: return a.fn == b.fn;
    default: return false;
  }
}

// JS `==` on the wrapped values, which is what HF's == compares.
bool loose_equal(const Value& a, const Value& b) {
  const bool a_nil = a.is_none() || a.is_undefined(), b_nil = b.is_none() || b.is_undefined();
  if (a_nil || b_nil) return a_nil && b_nil;
  auto numeric = [](const Value& v, double& out) {
    if (v.is_number() || v.type == Type::BOOL) {
      out = v.as_double();
      return true;
    }
    if (v.is_string()) {
      const std::string t = js_trim(v.s);
      if (t.empty()) {
        out = 0;
        return true;
      }
      char* end = nullptr;
      out = std::strtod(t.c_str(), &end);
      if (*end != 0) out = NAN;
      return true;
    }
    return false;
  };
  if (a.is_string() && b.is_string()) return a.s == b.s;
  if (a.type == b.type || (a.is_number() && b.is_number())) return strict_equal(a, b);
  double x, y;
  if (numeric(a, x) && numeric(b, y)) return x == y;  // JS coerces mixed primitives to numbers
  return false;
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_none() || b.is_none()) fail(std::string("cannot compare ") + type_name(a.type) + " with " + type_name(b.type));
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined())
    fail(std::string("cannot compare ") + type_name(a.type) + " with " + type_name(b.type));
  const bool an = a.is_number() || a.type == Type::BOOL, bn = b.is_number() || b.type == Type::BOOL;
  if (an && bn) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.type != b.type) fail(std::string("cannot compare ") + type_name(a.type) + " with " + type_name(b.type));
  if (a.is_string()) {
    const std::string x = case_sensitive ? a.s : ascii_lower(a.s), y = case_sensitive ? b.s : ascii_lower(b.s);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail(std::string("cannot compare values of type ") + type_name(a.type));
}

Value get_builtin_member(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    const std::string s = obj.s;
    if (name == "length") return Value::integer(utf16_length(s));
    if (name == "upper") return method([s](CallArgs&) { return Value::string(ascii_upper(s)); });
    if (name == "lower") return method([s](CallArgs&) { return Value::string(ascii_lower(s)); });
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return method([s, l, r](CallArgs& a) { return Value::string(py_strip(s, a.get(0, "chars"), l, r)); });
    }
    if (name == "title")
      return method([s](CallArgs&) {
        std::string out = s;
        for (size_t k = 0; k < out.size(); ++k)
          if (is_word(out[k]) && (k == 0 || !is_word(out[k - 1])) && out[k] >= 'a' && out[k] <= 'z')
            out[k] = char(out[k] - 32);
        return Value::string(out);
      });
    if (name == "capitalize")
      return method([s](CallArgs&) {
        std::string out = s;
        if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 32);
        return Value::string(out);
      });
    if (name == "startswith" || name == "endswith") {
      const bool prefix = name == "startswith";
      return method([s, prefix](CallArgs& a) {
        return Value::boolean(affix_match(s, a.pos.empty() ? nullptr : &a.pos[0], prefix, prefix ? "startswith" : "endswith"));
      });
    }
    if (name == "split")
      return method([s](CallArgs& a) { return string_split(s, a.get(0, "sep"), a.get(1, "maxsplit")); });
    if (name == "replace")
      return method([s](CallArgs& a) {
        if (a.pos.size() < 2) fail("replace() needs two arguments");
        if (!a.pos[0].is_string() || !a.pos[1].is_string()) fail("replace() arguments must be strings");
        const Value* count = a.get(2, "count");
        if (count && count->type != Type::INT && !count->is_none()) fail("replace() count must be an integer");
        std::string out = js_replace(s, a.pos[0].s, a.pos[1].s, count && count->type == Type::INT ? count->i : -1);
        if (out.size() > (64u << 20)) fail("replace() result too long");
        return Value::string(std::move(out));
      });
    return Value::undefined();
  }
  if (obj.is_array()) {
    if (name == "length") return Value::integer(int64_t(obj.arr->size()));
    return Value::undefined();
  }
  if (obj.is_mapping()) {
    if (name == "get")
      return method([obj](CallArgs& a) {
        if (a.pos.empty() || !a.pos[0].is_string())
          fail(std::string("get() key must be a string, got ") + (a.pos.empty() ? "nothing" : type_name(a.pos[0].type)));
        if (const Value* v = obj.find(a.pos[0].s)) return *v;
        return a.pos.size() > 1 ? a.pos[1] : Value::none();
      });
    if (name == "items") return method([obj](CallArgs&) { return items_of(obj); });
    if (name == "keys")
      return method([obj](CallArgs&) {
        Array a;
        for (const auto& kv : *obj.obj) a.push_back(Value::string(kv.first));
        return Value::array(std::move(a));
      });
    if (name == "values")
      return method([obj](CallArgs&) {
        Array a;
        for (const auto& kv : *obj.obj) a.push_back(kv.second);
        return Value::array(std::move(a));
      });
    if (name == "dictsort") return method([obj](CallArgs& a) { return dictsort(obj, a); });
  }
  return Value::undefined();
}

bool apply_test(const std::string& name, const Value& v, const Value* arg) {
  if (name == "boolean") return v.type == Type::BOOL;
  if (name == "callable") return v.type == Type::FUNCTION;
  if (name == "odd" || name == "even") {
    if (v.type != Type::INT) fail("cannot test '" + name + "' on a " + type_name(v.type));
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "false") return v.type == Type::BOOL && !v.b;
  if (name == "true") return v.type == Type::BOOL && v.b;
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.type == Type::INT;
  if (name == "iterable") return v.is_array() || v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "sequence") return v.is_array() || v.is_mapping() || v.is_string();
  if (name == "lower") return v.is_string() && v.s == ascii_lower(v.s);
  if (name == "upper") return v.is_string() && v.s == ascii_upper(v.s);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq" || name == "sameas") return arg ? strict_equal(v, *arg) : v.is_undefined();
  fail("unknown test '" + name + "'");
}

Value apply_filter(Interpreter& in, const Value& v, const Node& filter, Env& env) {
  std::string name;
  CallArgs args;
  if (filter.kind == NodeKind::IDENT) {
    name = filter.str;
  } else if (filter.kind == NodeKind::CALL && filter.x->kind == NodeKind::IDENT) {
    name = filter.x->str;
    // evaluated below through the interpreter so errors carry positions
    for (const auto& a : filter.args) {
      if (a->kind == NodeKind::KWARG) args.kw.emplace_back(a->str, in.eval(*a->x, env));
      else args.pos.push_back(in.eval(*a, env));
    }
  } else {
    fail("a filter must be a name or a call");
  }

  if (name == "safe") return v;
  if (name == "tojson") {
    JsonOptions opt;
    const Value* indent = args.kwarg("indent");
    if (!indent && !args.pos.empty()) indent = &args.pos[0];
    if (indent && indent->type != Type::INT && !indent->is_none()) fail("tojson: indent must be an integer");
    opt.indent = indent && indent->type == Type::INT ? int(std::clamp<int64_t>(indent->i, -1, 64)) : -1;
    if (const Value* ea = args.kwarg("ensure_ascii")) {
      if (ea->type != Type::BOOL) fail("tojson: ensure_ascii must be a boolean");
      opt.ensure_ascii = ea->b;
    }
    if (const Value* sk = args.kwarg("sort_keys")) {
      if (sk->type != Type::BOOL) fail("tojson: sort_keys must be a boolean");
      opt.sort_keys = sk->b;
    }
    if (const Value* sep = args.kwarg("separators"); sep && !sep->is_none()) {
      if (!sep->is_array() || sep->arr->size() != 2 || !(*sep->arr)[0].is_string() || !(*sep->arr)[1].is_string())
        fail("tojson: separators must be a tuple of two strings");
      opt.has_separators = true;
      opt.item_sep = (*sep->arr)[0].s;
      opt.key_sep = (*sep->arr)[1].s;
    }
    try {
      std::string s = to_json(v, opt);
      in.check_size(s.size());
      return Value::string(std::move(s));
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const TemplateError*>(&e)) throw;
      fail(std::string("tojson: ") + e.what());
    }
  }
  if (name == "default" || name == "d") {
    const Value def = args.pos.empty() ? Value::string("") : args.pos[0];
    const Value* boolean = args.get(1, "boolean");
    if (boolean && boolean->type != Type::BOOL) fail("default: the boolean flag must be a boolean");
    if (v.is_undefined() || (boolean && boolean->b && !v.truthy())) return def;
    return v;
  }

  if (v.is_array()) {
    const Array& a = *v.arr;
    if (name == "list") return v;
    if (name == "first") return a.empty() ? Value::undefined() : a.front();
    if (name == "last") return a.empty() ? Value::undefined() : a.back();
    if (name == "length" || name == "count") return Value::integer(int64_t(a.size()));
    if (name == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
    if (name == "string") return Value::string(to_json(v, JsonOptions{}, false));
    if (name == "join") {
      const Value* sep = args.get(0, "separator");
      if (sep && !sep->is_string()) fail("join: separator must be a string");
      std::string out;
      for (size_t k = 0; k < a.size(); ++k) {
        if (k && sep) out += sep->s;
        out += concat_string(a[k]);
        in.check_size(out.size());
      }
      return Value::string(out);
    }
    if (name == "unique") {
      Array out;
      for (const auto& item : a)
        if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return strict_equal(o, item); }))
          out.push_back(item);
      return Value::array(std::move(out));
    }
    if (name == "sort") {
      const Value* rev = args.get(0, "reverse");
      const Value* cs = args.get(1, "case_sensitive");
      const Value* attr = args.get(2, "attribute");
      Array out = a;
      std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
        auto key = [&](const Value& item) {
          if (!attr || attr->is_none()) return item;
          return attribute_path(item, attr->type == Type::INT ? std::to_string(attr->i) : attr->s);
        };
        const int r = compare_values(key(x), key(y), cs && cs->truthy());
        return rev && rev->truthy() ? r > 0 : r < 0;
      });
      return Value::array(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      const bool by_attr = name == "selectattr" || name == "rejectattr";
      const bool keep = name == "selectattr" || name == "select";
      size_t k = 0;
      const Value* attr = nullptr;
      if (by_attr) {
        if (args.pos.empty() || !args.pos[0].is_string()) fail(name + ": the attribute name must be a string");
        attr = &args.pos[k++];
      }
      const Value* test = k < args.pos.size() ? &args.pos[k++] : nullptr;
      const Value* test_arg = k < args.pos.size() ? &args.pos[k] : nullptr;
      if (test && !test->is_string()) fail(name + ": the test name must be a string");
      Array out;
      for (const auto& item : a) {
        Value subject = item;
        bool r;
        if (by_attr) {
          if (!item.has_attributes()) fail(name + " applies to a list of mappings");
          const Value* f = item.find(attr->s);
          if (!f) {
            if (!keep) out.push_back(item);
            continue;
          }
          subject = *f;
        }
        r = test ? apply_test(test->s, subject, test_arg) : subject.truthy();
        if (r == keep) out.push_back(item);
      }
      return Value::array(std::move(out));
    }
    if (name == "map") {
      Array out;
      if (const Value* attr = args.kwarg("attribute")) {
        if (!attr->is_string()) fail("map: attribute must be a string");
        const Value* def = args.kwarg("default");
        for (const auto& item : a) {
          if (!item.has_attributes()) fail("map: the items must be mappings");
          Value r = attribute_path(item, attr->s);
          out.push_back(r.is_undefined() && def ? *def : r);
        }
        return Value::array(std::move(out));
      }
      // Beyond HF: map('filter_name') applies a filter by name to each item.
      if (args.pos.empty() || !args.pos[0].is_string()) fail("map needs attribute= or a filter name");
      Node f;
      f.kind = NodeKind::IDENT;
      f.str = args.pos[0].s;
      for (const auto& item : a) out.push_back(apply_filter(in, item, f, env));
      return Value::array(std::move(out));
    }
    fail("unknown filter '" + name + "' for a list");
  }
  if (v.is_string()) return string_filter(name, v, in, args, env);
  if (v.is_number()) {
    if (name == "abs") return v.type == Type::INT ? Value::integer(std::llabs(v.i)) : Value::number(std::fabs(v.f));
    if (name == "int") return v.type == Type::INT ? v : Value::integer(int64_t(std::floor(v.f)));
    if (name == "float") return Value::number(v.as_double());
    if (name == "string") return Value::string(to_output(v));
    fail("unknown filter '" + name + "' for a number");
  }
  if (v.is_mapping()) {
    if (name == "items") return items_of(v);
    if (name == "length" || name == "count") return Value::integer(int64_t(v.obj->size()));
    if (name == "string") return Value::string(to_output(v));
    Value m = get_builtin_member(v, name);
    if (m.type == Type::FUNCTION) return in.call(m, args, env);
    fail("unknown filter '" + name + "' for a mapping");
  }
  if (v.type == Type::BOOL) {
    if (name == "bool") return v;
    if (name == "int") return Value::integer(v.b ? 1 : 0);
    if (name == "float") return Value::number(v.b ? 1 : 0);
    if (name == "string") return Value::string(v.b ? "true" : "false");
    fail("unknown filter '" + name + "' for a boolean");
  }
  fail("cannot apply filter '" + name + "' to a " + type_name(v.type));
}

void install_globals(Env& env) {
  env.set("true", Value::boolean(true));
  env.set("false", Value::boolean(false));
  env.set("none", Value::none());
  env.set("True", Value::boolean(true));
  env.set("False", Value::boolean(false));
  env.set("None", Value::none());
  env.set("raise_exception", method([](CallArgs& a) -> Value {
            fail("raise_exception: " + (a.pos.empty() ? std::string() : concat_string(a.pos[0])));
          }));
  env.set("strftime_now", method([](CallArgs& a) {
            if (a.pos.empty() || !a.pos[0].is_string()) fail("strftime_now() needs a format string");
            return Value::string(strftime_now(a.pos[0].s));
          }));
  env.set("range", Value::function([](CallArgs& a, Env&) {
            for (const auto& p : a.pos)
              if (p.type != Type::INT) fail("range() arguments must be integers");
            if (a.pos.empty() || a.pos.size() > 3) fail("range() takes 1 to 3 arguments");
            int64_t start = 0, stop, step = 1;
            if (a.pos.size() == 1) stop = a.pos[0].i;
            else start = a.pos[0].i, stop = a.pos[1].i;
            if (a.pos.size() == 3) step = a.pos[2].i;
            if (step == 0) fail("range() step must not be zero");
            const double n = std::ceil((double(stop) - double(start)) / double(step));
            // A chat template ranges over messages; 100k values (~10 MB) bounds what a
            // hostile one can allocate in one call.
            if (n > 100'000) fail("range() of more than 100000 numbers");
            Array out;
            for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
            return Value::array(std::move(out));
          }));
  env.set("namespace", method([](CallArgs& a) {
            if (a.pos.size() > 1) fail("namespace() takes at most 1 positional argument");
            Value ns = Value::object({}, Type::NAMESPACE);
            if (a.pos.size() == 1) {
              const Value& src = a.pos[0];
              if (src.is_mapping()) {
                for (const auto& [k, v] : *src.obj) ns.set(k, v);
              } else if (src.is_array()) {
                for (const auto& pair : *src.arr) {
                  if (!pair.is_array() || pair.arr->size() != 2 || !(*pair.arr)[0].is_string())
                    fail("namespace() expects a mapping or a list of [key, value] pairs");
                  ns.set((*pair.arr)[0].s, (*pair.arr)[1]);
                }
              } else {
                fail(std::string("namespace() cannot take a ") + type_name(src.type));
              }
            }
            for (const auto& [k, v] : a.kw) ns.set(k, v);
            return ns;
          }));
}

}  // namespace ft::jinja
