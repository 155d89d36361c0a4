// `ft serve`: an HTTP server (cpp-httplib) speaking OpenAI's, Anthropic's and
// llama-server's APIs over one loaded model.
//
// Life cycle: listen() binds the port at once, so /health can report loading progress
// (set_progress) while the caller loads the model; set_ready() hands over the model and
// starts the scheduler, after which the generation endpoints answer. stop() ends both.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/runner.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/server_context.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}
namespace ft::model {
struct Model;
}

namespace ft::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 1919;          // 0: any free port (listen() returns it)
  std::string api_key;      // empty: no authentication
  std::string model_id;     // the name /v1/models lists
  int max_running = 4;
  int max_queue = 32;
  int64_t prefill_chunk = 512;  // SchedulerOptions
  int64_t kv_page_size = 16;
  bool warmup = true;  // SchedulerOptions
};

// What set_ready() takes over: the model, the runner over it and its tokenizer (may be
// null for a vocabulary-less model). The runner must not outlive the model; the server
// destroys them in the right order.
struct ServedModel {
  std::unique_ptr<model::Model> model;  // may be null when the caller keeps the model alive
  std::unique_ptr<engine::Runner> runner;
  std::unique_ptr<Tokenizer> tok;
  std::string chat_template;  // empty: ChatML
  // Fills /metrics' MoE expert-cache lines (unset: none); called from HTTP threads.
  std::function<void(MoeCacheGauges&)> moe_gauges;
};

class Server {
 public:
  explicit Server(ServerOptions o);
  ~Server();

  // Binds host:port and starts answering (/health says "loading"). Returns the port.
  // Throws ft::Error when the address cannot be bound.
  int listen();
  // Loading progress in [0, 1] for /health.
  void set_progress(double fraction);
  void set_ready(ServedModel m);
  bool ready() const { return ready_.load(); }
  // Stops answering, cancels running generations, joins the threads.
  void stop();
  // Blocks until stop() (from another thread or a signal handler's thread).
  void wait();

  const ServerContext& context() const { return ctx_; }

 private:
  void install_routes();

  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_;
  std::atomic<bool> ready_{false};
  std::atomic<double> progress_{0.0};
  Metrics metrics_;
  ServedModel served_;
  std::unique_ptr<Scheduler> sched_;
  ServerContext ctx_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;  // stop() began
  bool done_ = false;     // stop() finished
  int listen_fd_ = -1;    // the listening socket (set while binding)
};

// The template used when the GGUF has no tokenizer.chat_template (llama-server's fallback).
extern const char* const kChatMlTemplate;

}  // namespace ft::serve
