#include "serve/api_params.h"

#include <random>

#include "serve/api_error.h"

namespace ft::serve {

using nlohmann::json;

namespace {
const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}
}  // namespace

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past a double (1e999)
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(j)));
  return j;
}

std::optional<double> get_number(const json& j, const char* key, double lo, double hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) bad_param(key, "'{}' must be a number, got {}", key, type_name(*it));
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) bad_param(key, "'{}' must be in [{}, {}], got {}", key, lo, hi, v);
  return v;
}

std::optional<int64_t> get_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (d != static_cast<double>(static_cast<int64_t>(d)))
      bad_param(key, "'{}' must be an integer, got {}", key, d);
  } else if (!it->is_number()) {
    bad_param(key, "'{}' must be an integer, got {}", key, type_name(*it));
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad_param(key, "'{}' must be in [{}, {}], got {}", key, lo, hi, it->get<uint64_t>());
  const int64_t v = it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
  if (v < lo || v > hi) bad_param(key, "'{}' must be in [{}, {}], got {}", key, lo, hi, v);
  return v;
}

std::optional<bool> get_bool(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad_param(key, "'{}' must be a boolean, got {}", key, type_name(*it));
  return it->get<bool>();
}

std::optional<std::string> get_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad_param(key, "'{}' must be a string, got {}", key, type_name(*it));
  return it->get<std::string>();
}

std::vector<std::string> get_stops(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_string()) bad_param(key, "'{}' must be a string or an array of strings; an item is {}", key, type_name(s));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_param(key, "'{}' must be a string or an array of strings, got {}", key, type_name(*it));
  }
  // Every generated token is checked against each one.
  if (out.size() > 16) bad_param(key, "'{}' has {} stop strings; at most 16 are accepted", key, out.size());
  return out;
}

void read_sampling(const json& j, GenRequest& r) {
  engine::SamplerParams& s = r.sampling;
  s.temperature = static_cast<float>(get_number(j, "temperature", 0.0, 100.0).value_or(0.8));
  s.top_p = static_cast<float>(get_number(j, "top_p", 0.0, 1.0).value_or(0.95));
  s.min_p = static_cast<float>(get_number(j, "min_p", 0.0, 1.0).value_or(0.05));
  s.top_k = static_cast<int32_t>(get_int(j, "top_k", 0, INT32_MAX).value_or(40));
  s.repeat_penalty = static_cast<float>(get_number(j, "repeat_penalty", 0.0, 100.0).value_or(1.0));
  const auto seed = get_int(j, "seed", INT64_MIN, INT64_MAX);
  if (seed && *seed >= 0) {
    s.seed = static_cast<uint64_t>(*seed);
  } else {
    // llama-server's seed -1: a fresh one per request.
    static thread_local std::random_device rd;
    s.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  }
}

void check_model(const json& j, const std::string& model_id) {
  const auto m = get_string(j, "model");
  if (!m || m->empty() || *m == model_id) return;
  throw ApiError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", *m, model_id), "model");
}

}  // namespace ft::serve
