// ft serve: an OpenAI-, Anthropic- and llama-server-compatible HTTP server over one model
// (src/serve/server.h). The port opens first so /health can report loading progress; the
// line "ft serve: ready on http://HOST:PORT" on stderr says the endpoints answer.
// SIGINT / SIGTERM stop it cleanly.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cli/arg_checks.h"
#include "cli/commands.h"
#include "cli/runner_factory.h"
#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "model/model.h"
#include "serve/server.h"
#include "serve/server_bench.h"
#include "tokenizer/tokenizer.h"

namespace ft::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 1919;
  RunnerOptions run;  // --device, --dtype, --moe-*
  int max_running = 4;
  int max_queue = 32;
  int64_t prefill_chunk = 512;
  int64_t kv_page_size = 16;
  int64_t ctx_size = 0;
  int threads = 0;
  std::string api_key;
  std::string alias;
};

int run_serve(const ServeOptions& o) {
  if (o.ctx_size < 0) fail("--ctx-size must be >= 0, got {}", o.ctx_size);
  if (o.port < 0 || o.port > 65535) fail("--port must be in [0, 65535], got {}", o.port);
  std::string api_key = o.api_key;
  if (api_key.empty())
    if (const char* k = std::getenv("FT_API_KEY")) api_key = k;

  // Signals go to one waiting thread (blocked everywhere else, inherited by every thread
  // started after this), which stops the server.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  serve::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = api_key;
  so.model_id = o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias;
  so.max_running = o.max_running;
  so.max_queue = o.max_queue;
  so.prefill_chunk = o.prefill_chunk;
  so.kv_page_size = o.kv_page_size;
  so.warmup = o.run.warmup;
  // Shared with the signal thread, which outlives this function on error paths.
  auto server_ptr = std::make_shared<serve::Server>(so);
  serve::Server& server = *server_ptr;
  const int port = server.listen();
  log::info("ft serve: listening on http://{}:{} (loading {})", o.host, port, o.model);
  std::thread([server_ptr, sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    log::info("ft serve: signal {}, stopping", sig);
    server_ptr->stop();
  }).detach();
  // A load error stops the server (closes the port) before main prints it.
  struct StopOnExit {
    serve::Server& s;
    ~StopOnExit() { s.stop(); }
  } stop_on_exit{server};

  // Loading takes the first 90% of the progress /health reports, the runner (weight upload
  // on a GPU) the rest.
  model::LoadOptions lo;
  lo.progress = [&](uint64_t done, uint64_t total) {
    if (total) server.set_progress(0.9 * static_cast<double>(done) / static_cast<double>(total));
  };
  serve::ServedModel sm;
  sm.model = model::load_model(o.model, lo);
  try {
    sm.tok = Tokenizer::from_gguf(*sm.model->file);
  } catch (const Error& e) {
    log::warn("ft serve: {}: no tokenizer ({}); only token-id prompts will work", o.model, e.what());
  }
  sm.chat_template = sm.model->file->get_string("tokenizer.chat_template").value_or("");
  if (sm.chat_template.empty()) log::info("ft serve: the model has no tokenizer.chat_template; chat uses ChatML");
  RunnerOptions ro = o.run;
  ro.warmup = false;  // the scheduler warms what serves: the batch runner, else the runner (so.warmup)
  ro.n_ctx = o.ctx_size;
  ro.threads = o.threads;
  ro.progress = [&](uint64_t done, uint64_t total) {
    if (total) server.set_progress(0.9 + 0.1 * static_cast<double>(done) / static_cast<double>(total));
  };
  sm.runner = make_runner(*sm.model, ro);
  sm.moe_gauges = [r = sm.runner.get()](serve::MoeCacheGauges& g) { runner_moe_cache_gauges(*r, &g); };
  const std::string desc = sm.runner->describe();
  const int64_t n_ctx = sm.runner->n_ctx();
  server.set_ready(std::move(sm));
  log::info("ft serve: ready on http://{}:{} (model '{}', ctx {}, {})", o.host, port, so.model_id, n_ctx, desc);
  server.wait();
  return 0;
}

}  // namespace

Command register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* sub = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI, Anthropic and llama-server APIs)");
  sub->add_option("--model", o->model, "GGUF model file")->required();
  sub->add_option("--host", o->host, "address to listen on (default 127.0.0.1)");
  sub->add_option("--port", o->port, "port (default 1919; 0 = any free port, printed in the log)");
  add_runner_options(*sub, o->run);
  sub->add_option("--max-running-requests", o->max_running, "requests admitted at once (default 4)");
  sub->add_option("--max-queue,--max-queued-requests", o->max_queue, "requests that may wait beyond those; more get 503 (default 32)");
  sub->add_option("--prefill-chunk", o->prefill_chunk,
                  "CPU batching: prompt tokens per step beside the running requests' decode (default 512)");
  sub->add_option("--kv-page-size", o->kv_page_size, "CPU batching: tokens per KV cache page (default 16)");
  sub->add_option("--ctx-size", o->ctx_size, "KV cache size in tokens (default min(context_length, 4096))");
  sub->add_option("--threads", o->threads, "CPU threads (default: physical cores)")->check(threads_range());
  sub->add_option("--api-key", o->api_key, "require this key (Bearer or x-api-key); default $FT_API_KEY");
  sub->add_option("--alias", o->alias, "model id the API reports (default: the file name)");
  return {sub, [o] { return run_serve(*o); }};
}

// ft bench-serve: load against a running server (src/serve/server_bench.h).
Command register_bench_serve(CLI::App& app) {
  auto o = std::make_shared<serve::BenchServeOptions>();
  auto json_out = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("bench-serve", "Load a running ft serve / llama-server: throughput, TTFT, ITL");
  sub->add_option("--host", o->host, "server address (default 127.0.0.1)");
  sub->add_option("--port", o->port, "server port (default 1919)");
  sub->add_option("--api-key", o->api_key, "sent as Authorization: Bearer KEY");
  sub->add_option("--clients,-c", o->clients, "concurrent clients (default 4)");
  sub->add_option("--requests,-n", o->requests, "requests in total (default 32)");
  sub->add_option("--prompt-tokens,-p", o->prompt_tokens, "prompt length in tokens, random ids (default 128)");
  sub->add_option("--max-tokens,-m", o->max_tokens, "output tokens per request (default 64)");
  sub->add_option("--seed", o->seed, "seed of the random prompts (default 1)");
  sub->add_flag("--json", *json_out, "one JSON object instead of the table");
  return {sub, [o, json_out] {
            const auto r = serve::run_bench_serve(*o);
            if (*json_out)
              std::printf("%s\n", serve::bench_serve_json(*o, r).dump().c_str());
            else
              std::printf("%s", serve::format_bench_serve(*o, r).c_str());
            return r.failed == 0 ? 0 : 1;
          }};
}

}  // namespace ft::cli
