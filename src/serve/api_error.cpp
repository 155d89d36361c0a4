#include "serve/api_error.h"

namespace ft::serve {

const char* openai_error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json openai_error_body(int status, const std::string& message, const std::string& param) {
  nlohmann::json e = {{"message", message}, {"type", openai_error_type(status)}, {"code", status}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  return {{"error", e}};
}

nlohmann::json anthropic_error_body(int status, const std::string& message) {
  // Anthropic's names: https://docs.anthropic.com/en/api/errors
  const char* type = "api_error";
  switch (status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 503: type = "overloaded_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace ft::serve
