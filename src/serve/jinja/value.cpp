#include "serve/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ft::jinja {

bool Value::truthy() const {
  switch (type) {
    case Type::UNDEFINED:
    case Type::NONE: return false;
    case Type::BOOL: return b;
    case Type::INT: return i != 0;
    case Type::FLOAT: return f != 0 && !std::isnan(f);
    case Type::STRING: return !s.empty();
    case Type::ARRAY: return !arr->empty();
    case Type::OBJECT: return !obj->empty();
    case Type::NAMESPACE:
    case Type::FUNCTION: return true;
  }
  return false;
}

const Value* Value::find(const std::string& key) const {
  if (!obj) return nullptr;
  for (const auto& [k, v] : *obj)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, old] : *obj)
    if (k == key) {
      old = std::move(v);
      return;
    }
  obj->emplace_back(key, std::move(v));
}

const Value* CallArgs::kwarg(const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  if (i < pos.size()) return &pos[i];
  return kwarg(name);
}

const char* type_name(Type t) {
  switch (t) {
    case Type::UNDEFINED: return "undefined";
    case Type::NONE: return "none";
    case Type::BOOL: return "boolean";
    case Type::INT: return "integer";
    case Type::FLOAT: return "float";
    case Type::STRING: return "string";
    case Type::ARRAY: return "array";
    case Type::OBJECT: return "object";
    case Type::NAMESPACE: return "namespace";
    case Type::FUNCTION: return "function";
  }
  return "?";
}

std::string js_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x == 0) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // shortest round trip: "-1.2345e+02"
  std::string out;
  size_t p = 0;
  if (sci[0] == '-') {
    out = "-";
    p = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = p; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int k = int(digits.size()), n = exp10 + 1;
  if (k <= n && n <= 21) {
    out += digits + std::string(size_t(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(size_t(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return out;
}

static std::string float_output(double x) {
  if (x == 0 && std::signbit(x)) return "-0.0";
  std::string s = js_number(x);
  if (std::isfinite(x) && x == std::floor(x) && s.find('e') == std::string::npos) s += ".0";
  return s;
}

std::string to_output(const Value& v) {
  switch (v.type) {
    case Type::UNDEFINED:
    case Type::NONE: return "";
    case Type::BOOL: return v.b ? "true" : "false";
    case Type::INT: return std::to_string(v.i);
    case Type::FLOAT: return float_output(v.f);
    case Type::STRING: return v.s;
    case Type::ARRAY:
    case Type::OBJECT:
    case Type::NAMESPACE: return to_json(v, JsonOptions{}, false);
    case Type::FUNCTION: return "[function]";
  }
  return "";
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and advances i. Invalid
// bytes decode as themselves (U+0080..U+00FF) so nothing is lost or thrown.
static uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + size_t(len) > s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((cc >> 6) != 2) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  i += size_t(len);
  return cp;
}

static void append_u16(std::string& out, uint32_t unit) {
  // Room for any uint32_t: GCC 12 (the asan preset) cannot prove unit <= 0xFFFF and refuses
  // an 8-byte buffer under -Werror=format-truncation.
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(unit & 0xFFFFu));
  out += buf;
}

std::string json_quote(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80 && ensure_ascii) {
      const uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        append_u16(out, 0xd800 + ((cp - 0x10000) >> 10));
        append_u16(out, 0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        append_u16(out, cp);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || (c == 0x7f && ensure_ascii)) append_u16(out, c);
        else out += char(c);
    }
  }
  return out + "\"";
}

static void json_rec(const Value& v, const JsonOptions& opt, int depth, bool undef_null, std::string& out) {
  const std::string item_sep = opt.has_separators ? opt.item_sep : opt.indent > 0 ? "," : ", ";
  const std::string key_sep = opt.has_separators ? opt.key_sep : ": ";
  switch (v.type) {
    case Type::NONE: out += "null"; return;
    case Type::UNDEFINED: out += undef_null ? "null" : "undefined"; return;
    case Type::BOOL: out += v.b ? "true" : "false"; return;
    case Type::INT: out += std::to_string(v.i); return;
    case Type::FLOAT: out += std::isfinite(v.f) ? js_number(v.f) : "null"; return;
    case Type::STRING: out += json_quote(v.s, opt.ensure_ascii); return;
    case Type::FUNCTION: throw std::runtime_error("cannot convert a function to JSON");
    default: break;
  }
  const bool pretty = opt.indent > 0;
  const std::string ind = pretty ? std::string(size_t(opt.indent), ' ') : "";
  std::string base = "\n", child;
  for (int d = 0; d < depth; ++d) base += ind;
  child = base + ind;
  if (v.type == Type::ARRAY) {
    out += '[';
    for (size_t k = 0; k < v.arr->size(); ++k) {
      if (k) out += item_sep;
      if (pretty) out += child;
      json_rec((*v.arr)[k], opt, depth + 1, undef_null, out);
    }
    if (pretty && !v.arr->empty()) out += base;
    out += ']';
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : *v.obj) entries.push_back(&e);
  if (opt.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  out += '{';
  for (size_t k = 0; k < entries.size(); ++k) {
    if (k) out += item_sep;
    if (pretty) out += child;
    out += json_quote(entries[k]->first, opt.ensure_ascii) + key_sep;
    json_rec(entries[k]->second, opt, depth + 1, undef_null, out);
  }
  if (pretty && !entries.empty()) out += base;
  out += '}';
}

std::string to_json(const Value& v, const JsonOptions& opt, bool undefined_as_null) {
  std::string out;
  json_rec(v, opt, 0, undefined_as_null, out);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(int64_t(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double x = j.get<double>();
      if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9007199254740992.0) return Value::integer(int64_t(x));
      return Value::number(x);
    }
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      o.reserve(j.size());
      for (const auto& [k, e] : j.items()) o.emplace_back(k, from_json(e));
      return Value::object(std::move(o));
    }
    default: return Value::none();
  }
}

}  // namespace ft::jinja
