// Small helpers between the endpoint handlers and cpp-httplib: JSON responses and SSE
// streams whose writes report a client that went away.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "serve/sse.h"

namespace ft::serve {

inline void send_json(httplib::Response& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(dump_json(j), "application/json; charset=utf-8");
}

// Writes one frame; false once the client is gone (the stream should stop).
using SseWrite = std::function<bool(const std::string& frame)>;
// Runs `body` when httplib starts sending the response; `body` writes frames through the
// SseWrite it gets. `on_abort` runs when the connection ended before `body` finished (the
// client disconnected), so the generation behind the stream can be cancelled.
void send_sse(httplib::Response& res, std::function<void(const SseWrite&)> body,
              std::function<void()> on_abort);

}  // namespace ft::serve
