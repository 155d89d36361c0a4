// ft shell: chat in the terminal, against a running server (--url: OpenAI chat API,
// streamed) or a local model (--model: the engine of ft generate, the model's chat
// template). One line of stdin is one user message; the reply streams to stdout followed by
// a newline; the prompt, banner and errors go to stderr (so stdout is the conversation's
// replies only). /reset forgets the conversation, /exit or Ctrl-D (end of input) quits.
//
// Local model: each turn renders the whole conversation with the chat template (as
// ft serve's /v1/chat/completions does) and evaluates only the tokens past what the runner
// already holds when they extend it (the usual case: the reply's tokens plus the next user
// turn), else starts over.
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/arg_checks.h"
#include "cli/commands.h"
#include "cli/runner_factory.h"
#include "core/error.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "serve/chat_template.h"
#include "serve/server.h"
#include "tokenizer/tokenizer.h"

namespace ft::cli {
namespace {

using nlohmann::json;
using OnText = std::function<void(const std::string&)>;

struct ShellOptions {
  std::string url, model, system, api_key;
  int max_tokens = 512;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  uint64_t seed = 0;
  RunnerOptions run;  // --device, --dtype, --moe-*
  int64_t ctx_size = 0;
  int threads = 0;
};

class Chat {
 public:
  virtual ~Chat() = default;
  // Streams the assistant's reply to `messages` through on_text and returns all of it.
  virtual std::string reply(const json& messages, const OnText& on_text) = 0;
  virtual void reset() {}
  virtual std::string describe() const = 0;
};

class LocalChat : public Chat {
 public:
  explicit LocalChat(const ShellOptions& o) : o_(o) {
    m_ = model::load_model(o.model);
    tok_ = Tokenizer::from_gguf(*m_->file);
    if (!tok_->can_encode()) fail("{}: the model's tokenizer cannot encode text; ft shell needs one", o.model);
    tmpl_ = m_->file->get_string("tokenizer.chat_template").value_or("");
    if (tmpl_.empty()) tmpl_ = serve::kChatMlTemplate;
    auto text = [&](int32_t id) { return id >= 0 ? tok_->token_text(id) : std::string(); };
    bos_ = text(tok_->bos_id());
    eos_ = text(tok_->eos_id());
    RunnerOptions ro = o.run;
    ro.n_ctx = o.ctx_size;
    ro.threads = o.threads;
    runner_ = make_runner(*m_, ro);
  }

  std::string reply(const json& messages, const OnText& on_text) override {
    std::string text = serve::render_chat(tmpl_, messages, json(), /*add_generation_prompt=*/true, bos_, eos_,
                                          json::object());
    // A template that prints bos_token would get a second BOS from the tokenizer.
    std::string_view tv = text;
    if (tok_->add_bos() && !bos_.empty() && tv.substr(0, bos_.size()) == bos_) tv.remove_prefix(bos_.size());
    const std::vector<int32_t> ids = tok_->encode(tv, /*add_special=*/true, /*parse_special=*/true);
    engine::Runner& r = *runner_;
    if (static_cast<int64_t>(ids.size()) >= r.n_ctx())
      fail("the conversation has {} tokens; the context holds {} (--ctx-size): /reset to start over", ids.size(),
           r.n_ctx());
    // Evaluate only what extends the tokens the runner holds.
    size_t keep = 0;
    while (keep < held_.size() && keep < ids.size() && held_[keep] == ids[keep]) ++keep;
    if (keep < held_.size() || keep == ids.size()) {
      r.reset();
      held_.clear();
      keep = 0;
    }
    engine::SamplerParams sp;
    sp.temperature = o_.temperature;
    sp.top_k = o_.top_k;
    sp.top_p = o_.top_p;
    sp.min_p = o_.min_p;
    sp.seed = o_.seed + turn_++;
    engine::Sampler sampler(sp);
    for (int32_t id : ids) sampler.accept(id);
    held_ = ids;
    held_.resize(keep);  // until the eval below succeeds
    const float* logits = r.eval(ids.data() + keep, static_cast<int64_t>(ids.size() - keep));
    held_ = ids;
    Tokenizer::StreamDecoder dec(*tok_);
    std::string out;
    const auto V = static_cast<int32_t>(r.n_vocab());
    for (int i = 0; i < o_.max_tokens; ++i) {
      const int32_t id = sampler.sample(logits, V);
      sampler.accept(id);
      if (tok_->is_eog(id)) break;
      const std::string piece = dec.feed(id);
      out += piece;
      on_text(piece);
      if (i + 1 == o_.max_tokens || r.n_past() >= r.n_ctx()) break;
      logits = r.eval(&id, 1);
      held_.push_back(id);
    }
    const std::string rest = dec.flush();
    out += rest;
    on_text(rest);
    return out;
  }

  void reset() override {
    runner_->reset();
    held_.clear();
  }
  std::string describe() const override { return fmt::format("{} on {}", o_.model, runner_->describe()); }

 private:
  ShellOptions o_;
  std::unique_ptr<model::Model> m_;
  std::unique_ptr<Tokenizer> tok_;
  std::string tmpl_, bos_, eos_;
  std::unique_ptr<engine::Runner> runner_;
  std::vector<int32_t> held_;  // the tokens whose KV the runner holds
  uint64_t turn_ = 0;
};

class RemoteChat : public Chat {
 public:
  explicit RemoteChat(const ShellOptions& o) : o_(o), url_(o.url) {
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    if (url_.rfind("http://", 0) != 0 && url_.rfind("https://", 0) != 0) url_ = "http://" + url_;
    // A base URL may end in /v1 (as OpenAI clients take it): the paths below add it.
    if (url_.size() > 3 && url_.compare(url_.size() - 3, 3, "/v1") == 0) url_.resize(url_.size() - 3);
    cli_ = std::make_unique<httplib::Client>(url_);
    cli_->set_read_timeout(600, 0);
    auto res = cli_->Get("/v1/models", headers());
    if (!res) fail("--url {}: cannot reach the server ({})", o.url, httplib::to_string(res.error()));
    if (res->status != 200) fail("--url {}: GET /v1/models answered HTTP {}: {}", o.url, res->status, res->body);
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
      fail("--url {}: GET /v1/models did not list a model", o.url);
    model_ = j["data"][0].value("id", std::string("default"));
  }

  std::string reply(const json& messages, const OnText& on_text) override {
    json body = {{"model", model_},          {"messages", messages},   {"stream", true},
                 {"max_tokens", o_.max_tokens}, {"temperature", o_.temperature}, {"top_p", o_.top_p},
                 {"top_k", o_.top_k}};
    if (o_.seed != 0) body["seed"] = o_.seed;
    std::string buf, out, error;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.headers = headers();
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);  // typed text need not be UTF-8
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      buf.append(d, n);
      size_t end;
      while ((end = buf.find("\n\n")) != std::string::npos) {
        const std::string frame = buf.substr(0, end);
        buf.erase(0, end + 2);
        if (frame.rfind("data: ", 0) != 0 || frame == "data: [DONE]") continue;
        const json j = json::parse(frame.substr(6), nullptr, false);
        if (j.is_discarded()) continue;
        if (j.contains("error")) {
          error = j["error"].is_object() ? j["error"].value("message", j["error"].dump()) : j["error"].dump();
          continue;
        }
        if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
        const json& delta = j["choices"][0].value("delta", json::object());
        if (delta.contains("content") && delta["content"].is_string()) {
          const std::string piece = delta["content"].get<std::string>();
          out += piece;
          on_text(piece);
        }
      }
      return true;
    };
    auto res = cli_->send(req);
    if (!res) fail("{}: the request failed ({})", url_, httplib::to_string(res.error()));
    if (res->status != 200) {
      const json j = json::parse(buf.empty() ? res->body : buf, nullptr, false);
      const std::string msg = !j.is_discarded() && j.contains("error") && j["error"].is_object()
                                  ? j["error"].value("message", std::string())
                                  : (buf.empty() ? res->body : buf);
      fail("{}: HTTP {}: {}", url_, res->status, msg);
    }
    if (!error.empty()) fail("{}: {}", url_, error);
    return out;
  }

  std::string describe() const override { return fmt::format("{} at {}", model_, url_); }

 private:
  httplib::Headers headers() const {
    httplib::Headers h;
    if (!o_.api_key.empty()) h.emplace("Authorization", "Bearer " + o_.api_key);
    return h;
  }

  ShellOptions o_;
  std::string url_, model_;
  std::unique_ptr<httplib::Client> cli_;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

int run_shell(const ShellOptions& o) {
  if (o.url.empty() == o.model.empty()) fail("ft shell needs exactly one of --url (a running server) and --model (a GGUF file)");
  if (o.max_tokens < 1) fail("--max-tokens must be >= 1, got {}", o.max_tokens);
  std::unique_ptr<Chat> chat;
  if (!o.model.empty())
    chat = std::make_unique<LocalChat>(o);
  else
    chat = std::make_unique<RemoteChat>(o);
  json messages = json::array();
  auto start = [&] {
    messages = json::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  };
  start();
  std::fprintf(stderr, "ft shell: %s\n/reset forgets the conversation, /exit or Ctrl-D quits.\n",
               chat->describe().c_str());
  std::string line;
  for (;;) {
    std::fputs("> ", stderr);
    std::fflush(stderr);
    if (!std::getline(std::cin, line)) {
      std::fputc('\n', stderr);
      break;
    }
    const std::string msg = trim(line);
    if (msg.empty()) continue;
    if (msg == "/exit" || msg == "/quit") break;
    if (msg == "/reset") {
      start();
      chat->reset();
      std::fputs("(conversation cleared)\n", stderr);
      continue;
    }
    if (msg[0] == '/') {
      std::fprintf(stderr, "unknown command %s (commands: /reset, /exit)\n", msg.c_str());
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", msg}});
    std::string reply;
    try {
      reply = chat->reply(messages, [](const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
    } catch (const Error& e) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
      std::fprintf(stderr, "error: %s\n", e.what());
      messages.erase(messages.end() - 1);
      continue;
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace

Command register_shell(CLI::App& app) {
  auto o = std::make_shared<ShellOptions>();
  auto* sub = app.add_subcommand("shell", "Chat in the terminal with a running server (--url) or a model (--model)");
  sub->add_option("--url", o->url, "server base URL (OpenAI chat API, e.g. http://127.0.0.1:1919)");
  sub->add_option("--model", o->model, "GGUF model file (runs locally, as ft generate)");
  sub->add_option("--system", o->system, "system prompt");
  sub->add_option("--api-key", o->api_key, "--url: sent as Authorization: Bearer KEY (default $FT_API_KEY)");
  sub->add_option("--max-tokens", o->max_tokens, "tokens per reply at most (default 512)");
  sub->add_option("--temperature", o->temperature, "sampling temperature (default 0.8; 0 = greedy)")
      ->check(temperature_range());
  sub->add_option("--top-k", o->top_k, "top-k (default 40)")->check(count_range());
  sub->add_option("--top-p", o->top_p, "top-p (default 0.95)")->check(probability_range());
  sub->add_option("--min-p", o->min_p, "--model: min-p (default 0.05)")->check(probability_range());
  sub->add_option("--seed", o->seed, "sampling seed (default 0)");
  add_runner_options(*sub, o->run, "--model: ");
  sub->add_option("--ctx-size", o->ctx_size, "--model: context in tokens (default min(context_length, 4096))");
  sub->add_option("--threads", o->threads, "--model: CPU threads (default: physical cores)")->check(threads_range());
  return {sub, [o] {
            if (o->api_key.empty())
              if (const char* k = std::getenv("FT_API_KEY")) o->api_key = k;
            return run_shell(*o);
          }};
}

}  // namespace ft::cli
