// Reading request bodies: JSON parsing and typed field access whose errors are 400s that
// name the field and say what was expected.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/scheduler.h"

namespace ft::serve {

// Parses a request body that must be a JSON object.
nlohmann::json parse_body(const std::string& body);

// Each returns nullopt when the field is absent or null, and throws a 400 naming the field
// when it has the wrong type or lies outside [lo, hi].
std::optional<double> get_number(const nlohmann::json& j, const char* key, double lo, double hi);
std::optional<int64_t> get_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi);
std::optional<bool> get_bool(const nlohmann::json& j, const char* key);
std::optional<std::string> get_string(const nlohmann::json& j, const char* key);
// A string or an array of strings (OpenAI `stop`, Anthropic `stop_sequences`).
std::vector<std::string> get_stops(const nlohmann::json& j, const char* key);

// temperature, top_p, top_k, min_p, seed, repeat_penalty into `r.sampling`. Defaults are
// llama-server's (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05); a missing seed draws one.
void read_sampling(const nlohmann::json& j, GenRequest& r);

// Checks `model` (when given) against the served id: 404 for another model.
void check_model(const nlohmann::json& j, const std::string& model_id);

}  // namespace ft::serve
