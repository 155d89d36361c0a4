// Errors a client causes, carried to the HTTP layer as an exception and rendered as the
// body its API expects: OpenAI's {"error": {"message", "type", "param", "code"}} (also
// used by the llama-server endpoints) or Anthropic's {"type": "error", "error": {...}}.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace ft::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// 400 naming the request field (the OpenAI `param`).
template <typename... Args>
[[noreturn]] void bad_param(const std::string& param, fmt::format_string<Args...> f, Args&&... args) {
  throw ApiError(400, fmt::format(f, std::forward<Args>(args)...), param);
}

// OpenAI's error type names for a status code.
const char* openai_error_type(int status);
nlohmann::json openai_error_body(int status, const std::string& message, const std::string& param);
nlohmann::json anthropic_error_body(int status, const std::string& message);

}  // namespace ft::serve
