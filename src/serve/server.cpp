#include "serve/server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "model/model.h"
#include "serve/api_error.h"
#include "serve/api_handlers.h"
#include "serve/server_http.h"

namespace ft::serve {

using nlohmann::json;

const char* const kChatMlTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

namespace {

bool is_anthropic(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

void send_error(httplib::Response& res, const std::string& path, int status, const std::string& message,
                const std::string& param = "") {
  send_json(res, status,
            is_anthropic(path) ? anthropic_error_body(status, message) : openai_error_body(status, message, param));
}

// The key a client sent: OpenAI clients use "Authorization: Bearer KEY", Anthropic's
// "x-api-key: KEY".
std::string presented_key(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
  return req.get_header_value("x-api-key");
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

Server::Server(ServerOptions o) : opt_(std::move(o)) {
  if (opt_.max_running < 1) fail("--max-running-requests must be >= 1, got {}", opt_.max_running);
  if (opt_.max_queue < 0) fail("--max-queue must be >= 0, got {}", opt_.max_queue);
  if (opt_.prefill_chunk < 1) fail("--prefill-chunk must be >= 1, got {}", opt_.prefill_chunk);
  if (opt_.kv_page_size < 1) fail("--kv-page-size must be >= 1, got {}", opt_.kv_page_size);
  http_ = std::make_unique<httplib::Server>();
  // Each streaming request holds an HTTP thread while it waits for its turn, so the pool
  // must hold every admitted request plus a few for /health, /metrics and refusals.
  const size_t n_threads = static_cast<size_t>(opt_.max_running + opt_.max_queue + 8);
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  // Bodies are JSON conversations; 64 MiB is far past any context and bounds what one
  // request can make the server buffer (larger ones get 413).
  http_->set_payload_max_length(64u << 20);
  // httplib's default also sets SO_REUSEPORT, with which a second server binds the same
  // port and silently takes half the connections; a taken port must be an error.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = sock;
  });
  ctx_.metrics = &metrics_;
  ctx_.model_id = opt_.model_id;
  install_routes();
}

Server::~Server() { stop(); }

int Server::listen() {
  // A client that disconnects mid-stream must make send() fail, not kill the process.
  ::signal(SIGPIPE, SIG_IGN);
  int port = opt_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(opt_.host);
    if (port < 0) fail("cannot listen on {} (any port)", opt_.host);
  } else if (!http_->bind_to_port(opt_.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine?)", opt_.host, port);
  }
  // Debian's cpp-httplib 0.11 listens with a backlog of 5: 32 clients connecting at once
  // overflow it and some connections are dropped unanswered (httplib's own client reports
  // "Read"; tests/serve/server_batch_load_test). listen() again with the system's maximum.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  // httplib's stop() does nothing before its loop runs; a stop() right after listen()
  // (a model that fails to load) would then leave the loop running forever.
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void Server::set_progress(double fraction) { progress_.store(fraction); }

void Server::set_ready(ServedModel m) {
  served_ = std::move(m);
  SchedulerOptions so;
  so.max_running = opt_.max_running;
  so.max_queue = opt_.max_queue;
  so.prefill_chunk = opt_.prefill_chunk;
  so.kv_page_size = opt_.kv_page_size;
  so.warmup = opt_.warmup;
  sched_ = std::make_unique<Scheduler>(*served_.runner, served_.tok.get(), metrics_, so);
  ctx_.sched = sched_.get();
  ctx_.tok = served_.tok.get();
  ctx_.created = static_cast<int64_t>(std::time(nullptr));
  ctx_.chat_template = served_.chat_template.empty() ? kChatMlTemplate : served_.chat_template;
  ctx_.chat_format = detect_chat_format(ctx_.chat_template);
  if (ctx_.tok) {
    auto text = [&](int32_t id) { return id >= 0 ? ctx_.tok->token_text(id) : std::string(); };
    ctx_.bos_text = text(ctx_.tok->bos_id());
    ctx_.eos_text = text(ctx_.tok->eos_id());
  }
  progress_.store(1.0);
  ready_.store(true);
}

void Server::stop() {
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  // Generations end first so streaming handlers return and the HTTP pool can drain.
  if (sched_) sched_->stop();
  http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  ready_.store(false);
  sched_.reset();
  served_.runner.reset();
  served_.model.reset();
  {
    std::lock_guard<std::mutex> lk(stop_mu_);
    done_ = true;
  }
  stop_cv_.notify_all();
}

void Server::wait() {
  std::unique_lock<std::mutex> lk(stop_mu_);
  stop_cv_.wait(lk, [&] { return done_; });
}

void Server::install_routes() {
  httplib::Server& s = *http_;

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    // As llama-server: health and the model list stay public (load balancers probe them).
    if (req.path == "/health" || req.path == "/v1/health" || req.path == "/models" || req.path == "/v1/models")
      return httplib::Server::HandlerResponse::Unhandled;
    if (constant_time_equal(presented_key(req), opt_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, req.path, 401, "invalid or missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')");
    metrics_.count_request("unauthorized", 401);
    return httplib::Server::HandlerResponse::Handled;
  });

  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                   httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404) {
      send_error(res, req.path, 404, "no endpoint " + req.method + " " + req.path);
      metrics_.count_request("unknown", 404);
    } else if (res.status == 413) {
      send_error(res, req.path, 413, "the request body is larger than 64 MiB");
    } else {
      send_error(res, req.path, res.status, "the request could not be handled (HTTP " + std::to_string(res.status) + ")");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));

  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, req.path, 500, "internal error: " + what);
  });

  using Fn = void (*)(const ServerContext&, const httplib::Request&, httplib::Response&);
  auto post = [this, &s](const std::string& path, Fn fn) {
    s.Post(path, [this, path, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!ready_.load()) throw ApiError(503, "the model is still loading; retry when /health says ok");
        fn(ctx_, req, res);
      } catch (const ApiError& e) {
        send_error(res, req.path, e.status(), e.what(), e.param());
      } catch (const ft::Error& e) {
        // Engine or template errors the request provoked (e.g. a template's raise_exception).
        send_error(res, req.path, 400, e.what());
      } catch (const std::exception& e) {
        send_error(res, req.path, 500, std::string("internal error: ") + e.what());
      }
      metrics_.count_request(path, res.status);
    });
  };
  post("/completion", handle_completion);
  post("/completions", handle_completion);
  post("/tokenize", handle_tokenize);
  post("/detokenize", handle_detokenize);
  post("/v1/completions", handle_v1_completions);
  post("/v1/chat/completions", handle_chat_completions);
  post("/chat/completions", handle_chat_completions);
  post("/v1/messages", handle_messages);
  post("/v1/messages/count_tokens", handle_count_tokens);

  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.load()) {
      send_json(res, 200, {{"status", "ok"}});
    } else {
      json j = openai_error_body(503, "Loading model", "");
      j["status"] = "loading model";
      j["progress"] = progress_.load();
      send_json(res, 503, j);
    }
    metrics_.count_request("/health", res.status);
  };
  s.Get("/health", health);
  s.Get("/v1/health", health);

  auto models = [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = ready_.load();  // ctx_ is written by set_ready() until then
    json m = {{"id", opt_.model_id}, {"object", "model"}, {"created", ready ? ctx_.created : 0}, {"owned_by", "freetoken"}};
    // Anthropic's model list reads these two.
    m["type"] = "model";
    m["display_name"] = opt_.model_id;
    if (ready) m["meta"] = {{"n_ctx", sched_->n_ctx()}, {"n_vocab", sched_->n_vocab()}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
    metrics_.count_request("/v1/models", res.status);
  };
  s.Get("/v1/models", models);
  s.Get("/models", models);

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    EngineGauges g;
    if (ready_.load()) g = sched_->gauges();
    if (ready_.load() && served_.moe_gauges) served_.moe_gauges(g.moe);
    res.status = 200;
    res.set_content(metrics_.render(g), "text/plain; version=0.0.4; charset=utf-8");
    metrics_.count_request("/metrics", 200);
  });
}

}  // namespace ft::serve
