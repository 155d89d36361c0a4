// Server-sent events framing (https://html.spec.whatwg.org/multipage/server-sent-events.html):
// OpenAI and llama-server send `data: <json>\n\n` frames (OpenAI ends with `data: [DONE]`),
// Anthropic names each frame with an `event:` line.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ft::serve {

inline std::string dump_json(const nlohmann::json& j) {
  // Invalid UTF-8 (a model may emit any bytes) becomes U+FFFD instead of an exception.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline std::string sse_data(const nlohmann::json& j) { return "data: " + dump_json(j) + "\n\n"; }

inline std::string sse_event(const std::string& event, const nlohmann::json& j) {
  return "event: " + event + "\ndata: " + dump_json(j) + "\n\n";
}

inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace ft::serve
