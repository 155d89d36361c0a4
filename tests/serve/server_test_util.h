// Helpers for the server tests: a tiny generated model served in-process on an ephemeral
// port (optionally behind a runner that sleeps per eval, so cancellation and queueing can
// be observed), an httplib client, SSE and Prometheus parsing.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/session.h"
#include "format/gguf.h"
#include "model/model.h"
#include "serve/server.h"
#include "testgen/model_gen.h"
#include "tokenizer/tokenizer.h"

namespace ft::test {

using nlohmann::json;

inline std::string serve_tmp_dir() {
  // ctest runs each test in its own process, in parallel: keep their files apart.
  const auto d = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "serve" / std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return d.string();
}

// A tiny qwen3moe with a byte-BPE vocab (so text prompts work), written once per process.
inline const std::string& tiny_model_path() {
  static std::string p;
  if (p.empty()) {
    auto spec = testgen::preset("tiny", testgen::Arch::kQwen3Moe);
    spec.bpe_vocab = true;
    p = serve_tmp_dir() + "/tiny-bpe.gguf";
    testgen::generate_model(spec, p);
  }
  return p;
}

// Wraps a runner and sleeps before each eval: a tiny model decodes thousands of tokens a
// second, too fast to watch a disconnect or a queue.
class SlowRunner : public engine::Runner {
 public:
  SlowRunner(std::unique_ptr<engine::Runner> r, int sleep_ms) : r_(std::move(r)), ms_(sleep_ms) {}
  const float* eval(const int32_t* t, int64_t n, bool all) override {
    nap();
    return r_->eval(t, n, all);
  }
  int32_t eval_argmax(const int32_t* t, int64_t n) override {
    nap();
    return r_->eval_argmax(t, n);
  }
  int32_t eval_sample(const int32_t* t, int64_t n, engine::Sampler& s) override {
    nap();
    return r_->eval_sample(t, n, s);
  }
  void reset() override { r_->reset(); }
  int64_t n_past() const override { return r_->n_past(); }
  int64_t n_ctx() const override { return r_->n_ctx(); }
  int64_t n_vocab() const override { return r_->n_vocab(); }
  std::string describe() const override { return "slow " + r_->describe(); }

 private:
  void nap() const { std::this_thread::sleep_for(std::chrono::milliseconds(ms_)); }
  std::unique_ptr<engine::Runner> r_;
  int ms_;
};

struct ServeSetup {
  int sleep_ms = 0;  // > 0: SlowRunner
  int64_t n_ctx = 256;
  int max_running = 4;
  int max_queue = 8;
  std::string api_key;
  std::string chat_template;  // empty: the model's (none: ChatML)
  std::string model_path;     // empty: tiny_model_path()
  bool ready = true;          // false: listen only (the model "is loading")
  // Replaces the engine runner (e.g. by a ScriptedRunner); gets the real one.
  std::function<std::unique_ptr<engine::Runner>(std::unique_ptr<engine::Runner>, const Tokenizer&)> wrap;
};

// A runner that "generates" a fixed token script whatever the prompt: the server's chat
// parsing (reasoning, tool calls) sees a known output. The script restarts on reset().
class ScriptedRunner : public engine::Runner {
 public:
  ScriptedRunner(std::unique_ptr<engine::Runner> r, std::vector<int32_t> script)
      : r_(std::move(r)), script_(std::move(script)), logits_(static_cast<size_t>(r_->n_vocab()), -10.0f) {}
  // eval() is also the scheduler's call for a prefill chunk that is not the last, so it
  // does not advance the script (logprob requests would see one token over and over).
  const float* eval(const int32_t* t, int64_t n, bool) override {
    const int32_t id = script_[std::min(i_, script_.size() - 1)];
    std::fill(logits_.begin(), logits_.end(), -10.0f);
    logits_[static_cast<size_t>(id)] = 10.0f;
    r_->eval(t, n);  // keeps n_past and the context checks real
    return logits_.data();
  }
  int32_t eval_argmax(const int32_t* t, int64_t n) override {
    r_->eval(t, n);
    return script_[std::min(i_++, script_.size() - 1)];
  }
  int32_t eval_sample(const int32_t* t, int64_t n, engine::Sampler&) override { return eval_argmax(t, n); }
  void reset() override {
    r_->reset();
    i_ = 0;
  }
  int64_t n_past() const override { return r_->n_past(); }
  int64_t n_ctx() const override { return r_->n_ctx(); }
  int64_t n_vocab() const override { return r_->n_vocab(); }
  std::string describe() const override { return "scripted"; }

 private:
  std::unique_ptr<engine::Runner> r_;
  std::vector<int32_t> script_;
  size_t i_ = 0;
  std::vector<float> logits_;
};

// A server in this process on a free port.
class TestServer {
 public:
  explicit TestServer(const ServeSetup& s = {}) : setup_(s) {
    serve::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.api_key = s.api_key;
    o.model_id = "tiny";
    o.max_running = s.max_running;
    o.max_queue = s.max_queue;
    server_ = std::make_unique<serve::Server>(o);
    port_ = server_->listen();
    if (s.ready) make_ready();
  }
  ~TestServer() { server_->stop(); }

  void make_ready() {
    serve::ServedModel sm;
    sm.model = model::load_model(setup_.model_path.empty() ? tiny_model_path() : setup_.model_path);
    sm.tok = Tokenizer::from_gguf(*sm.model->file);
    engine::SessionOptions so;
    so.n_ctx = setup_.n_ctx;
    so.n_threads = 1;
    so.act_quant = quant::ActQuant::kQ8;  // ft generate's default numerics (--dtype auto)
    std::unique_ptr<engine::Runner> r = std::make_unique<engine::Session>(*sm.model, so);
    if (setup_.sleep_ms > 0) r = std::make_unique<SlowRunner>(std::move(r), setup_.sleep_ms);
    if (setup_.wrap) r = setup_.wrap(std::move(r), *sm.tok);
    sm.runner = std::move(r);
    sm.chat_template = !setup_.chat_template.empty()
                           ? setup_.chat_template
                           : sm.model->file->get_string("tokenizer.chat_template").value_or("");
    server_->set_ready(std::move(sm));
  }

  int port() const { return port_; }
  serve::Server& server() { return *server_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  ServeSetup setup_;
  std::unique_ptr<serve::Server> server_;
  int port_ = 0;
};

// POST a JSON body; the response body parsed (null when it is not JSON).
struct JsonReply {
  int status = 0;
  json body;
  std::string raw;
  std::string content_type;
};

inline JsonReply post_json(const TestServer& s, const std::string& path, const std::string& body,
                           const httplib::Headers& headers = {}) {
  auto c = s.client();
  auto res = c.Post(path.c_str(), headers, body, "application/json");
  JsonReply r;
  if (!res) {
    ADD_FAILURE() << "POST " << path << ": no response (" << httplib::to_string(res.error()) << ")";
    return r;
  }
  r.status = res->status;
  r.raw = res->body;
  r.content_type = res->get_header_value("Content-Type");
  r.body = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  return r;
}
inline JsonReply post_json(const TestServer& s, const std::string& path, const json& body,
                           const httplib::Headers& headers = {}) {
  return post_json(s, path, body.dump(), headers);
}

struct SseFrame {
  std::string event;  // empty without an event: line
  std::string data;
};

// Splits an SSE body into frames; each frame must end with a blank line.
inline std::vector<SseFrame> parse_sse(const std::string& body) {
  std::vector<SseFrame> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "SSE body does not end with a blank line: " << body.substr(pos);
      break;
    }
    SseFrame f;
    const std::string block = body.substr(pos, end - pos);
    size_t lp = 0;
    while (lp <= block.size()) {
      const size_t le = std::min(block.find('\n', lp), block.size());
      const std::string line = block.substr(lp, le - lp);
      if (line.rfind("event: ", 0) == 0)
        f.event = line.substr(7);
      else if (line.rfind("data: ", 0) == 0)
        f.data = line.substr(6);
      else if (!line.empty())
        ADD_FAILURE() << "unexpected SSE line: " << line;
      lp = le + 1;
    }
    out.push_back(f);
    pos = end + 2;
  }
  return out;
}

// Streams a POST; `keep` sees the bytes so far and returns false to hang up.
inline std::string post_stream(const TestServer& s, const std::string& path, const json& body,
                               const std::function<bool(const std::string&)>& keep = nullptr,
                               int* status = nullptr) {
  auto c = s.client();
  std::string buf;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    buf.append(d, n);
    return keep ? keep(buf) : true;
  };
  auto res = c.send(req);
  if (status) *status = res ? res->status : 0;
  return buf;
}

// One sample line of Prometheus text: name{labels} value.
inline double metric_value(const std::string& text, const std::string& name_and_labels) {
  size_t pos = 0;
  while ((pos = text.find(name_and_labels + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      const size_t v = pos + name_and_labels.size() + 1;
      return std::stod(text.substr(v, text.find('\n', v) - v));
    }
    pos += 1;
  }
  return -1.0;
}

inline std::string get_metrics(const TestServer& s) {
  auto c = s.client();
  auto res = c.Get("/metrics");
  return res ? res->body : "";
}

// Greedy tokens of the tiny model straight from the engine (the reference for the server).
inline std::vector<int32_t> engine_greedy(const std::vector<int32_t>& prompt, int n) {
  auto m = model::load_model(tiny_model_path());
  engine::SessionOptions so;
  so.n_ctx = 256;
  so.n_threads = 1;
  so.act_quant = quant::ActQuant::kQ8;
  engine::Session s(*m, so);
  std::vector<int32_t> out;
  int32_t next = s.eval_argmax(prompt.data(), static_cast<int64_t>(prompt.size()));
  for (int i = 0; i < n; ++i) {
    out.push_back(next);
    if (i + 1 < n) next = s.eval_argmax(&next, 1);
  }
  return out;
}

}  // namespace ft::test
