#include "serve/server_http.h"

#include <atomic>

namespace ft::serve {

void send_sse(httplib::Response& res, std::function<void(const SseWrite&)> body,
              std::function<void()> on_abort) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must not buffer the stream
  auto finished = std::make_shared<std::atomic<bool>>(false);
  res.set_chunked_content_provider(
      "text/event-stream",
      [body = std::move(body), finished](size_t, httplib::DataSink& sink) {
        bool ok = true;
        const SseWrite write = [&](const std::string& frame) {
          if (ok) ok = sink.write(frame.data(), frame.size());
          return ok;
        };
        body(write);
        if (!ok) return false;  // httplib drops the connection
        finished->store(true);
        sink.done();
        return true;
      },
      [finished, on_abort = std::move(on_abort)](bool success) {
        if (!success || !finished->load()) on_abort();
      });
}

}  // namespace ft::serve
