// GGUF metadata values: names, rendering and the typed getters of gguf::File.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "format/gguf.h"

namespace ft::gguf {
namespace {

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}

std::string type_desc(const Value& v) {
  if (!v.is_array()) return std::string(value_type_name(v.type));
  return fmt::format("array[{}]", value_type_name(v.elem_type));
}

// s with its control bytes escaped (\n, \xNN), and with quote and backslash escaped too when `quote` (then in quotes):
// a file's strings printed on a terminal (a NUL or an escape sequence in a name is the file's, not ours to emit).
std::string escaped(std::string_view s, bool quote) {
  std::string out = quote ? "\"" : "";
  for (unsigned char ch : s) {
    if (quote && (ch == '"' || ch == '\\')) {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch < 0x20 || ch == 0x7f) {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  return quote ? out + "\"" : out;
}
std::string quoted(std::string_view s) { return escaped(s, true); }

// Value of an integer-typed v as T, or nullopt when it does not fit.
template <class T>
std::optional<T> integer_as(const Value& v) {
  if (is_unsigned(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v.u);
  }
  if constexpr (std::is_unsigned_v<T>) {
    if (v.i < 0) return std::nullopt;
  }
  return static_cast<T>(v.i);
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

std::string Value::to_string(size_t max_items) const {
  if (is_unsigned(type)) return fmt::format("{}", u);
  if (is_integer()) return fmt::format("{}", i);
  switch (type) {
    case ValueType::FLOAT32: return fmt::format("{}", static_cast<float>(f));
    case ValueType::FLOAT64: return fmt::format("{}", f);
    case ValueType::BOOL: return b ? "true" : "false";
    case ValueType::STRING: return escaped(str, false);
    default: break;
  }
  std::string out = "[";
  for (size_t k = 0; k < arr.size() && k < max_items; ++k) {
    if (k) out += ", ";
    out += arr[k].type == ValueType::STRING ? quoted(arr[k].str) : arr[k].to_string(max_items);
  }
  if (arr.size() > max_items) out += fmt::format(", ... ({} items)", arr.size());
  return out + "]";
}

std::string TensorInfo::shape_string() const {
  std::string out = "[";
  for (int d = 0; d < n_dims; ++d) out += fmt::format("{}{}", d ? ", " : "", ne[d]);
  return out + "]";
}

std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    fail("{}: metadata key '{}' has type {}, expected an unsigned integer", path_, key, type_desc(*v));
  auto r = integer_as<uint64_t>(*v);
  if (!r) fail("{}: metadata key '{}' is {}, expected a value >= 0", path_, key, v->i);
  return r;
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    fail("{}: metadata key '{}' has type {}, expected an integer", path_, key, type_desc(*v));
  auto r = integer_as<int64_t>(*v);
  if (!r) fail("{}: metadata key '{}' is {}, expected a value <= {}", path_, key, v->u, INT64_MAX);
  return r;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (is_unsigned(v->type)) return static_cast<double>(v->u);
  if (v->is_integer()) return static_cast<double>(v->i);
  fail("{}: metadata key '{}' has type {}, expected a number", path_, key, type_desc(*v));
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL)
    fail("{}: metadata key '{}' has type {}, expected bool", path_, key, type_desc(*v));
  return v->b;
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING)
    fail("{}: metadata key '{}' has type {}, expected string", path_, key, type_desc(*v));
  return v->str;
}

std::optional<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array() || v->elem_type != ValueType::STRING)
    fail("{}: metadata key '{}' has type {}, expected array[string]", path_, key, type_desc(*v));
  std::vector<std::string> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) out.push_back(e.str);
  return out;
}

std::optional<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  Value elem;
  elem.type = v->elem_type;
  if (!v->is_array() || !elem.is_integer())
    fail("{}: metadata key '{}' has type {}, expected an array of integers", path_, key,
         type_desc(*v));
  std::vector<int64_t> out;
  out.reserve(v->arr.size());
  for (size_t k = 0; k < v->arr.size(); ++k) {
    auto r = integer_as<int64_t>(v->arr[k]);
    if (!r)
      fail("{}: metadata key '{}' element {} is {}, expected a value <= {}", path_, key, k,
           v->arr[k].u, INT64_MAX);
    out.push_back(*r);
  }
  return out;
}

std::optional<std::vector<float>> File::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  Value elem;
  elem.type = v->elem_type;
  if (!v->is_array() || !(elem.is_integer() || elem.is_float()))
    fail("{}: metadata key '{}' has type {}, expected an array of numbers", path_, key,
         type_desc(*v));
  std::vector<float> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) {
    if (e.is_float()) out.push_back(static_cast<float>(e.f));
    else if (is_unsigned(e.type)) out.push_back(static_cast<float>(e.u));
    else out.push_back(static_cast<float>(e.i));
  }
  return out;
}

uint64_t File::require_uint(std::string_view key) const {
  auto v = get_uint(key);
  if (!v) fail("{}: missing metadata key '{}'", path_, key);
  return *v;
}

double File::require_float(std::string_view key) const {
  auto v = get_float(key);
  if (!v) fail("{}: missing metadata key '{}'", path_, key);
  return *v;
}

std::string File::require_string(std::string_view key) const {
  auto v = get_string(key);
  if (!v) fail("{}: missing metadata key '{}'", path_, key);
  return *v;
}

}  // namespace ft::gguf
