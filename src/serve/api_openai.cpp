// OpenAI's POST /v1/completions and /v1/chat/completions (https://platform.openai.com/docs/api-reference),
// streaming as `data: {chunk}` frames closed by `data: [DONE]`.
#include <nlohmann/json.hpp>

#include <ctime>

#include "serve/api_chat.h"
#include "serve/api_error.h"
#include "serve/api_generation.h"
#include "serve/api_handlers.h"
#include "serve/api_params.h"
#include "serve/api_prompt.h"
#include "serve/chat_parse.h"
#include "serve/server_http.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {

using nlohmann::json;

namespace {

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

json usage_json(const Generation& g) {
  const JobStats s = g.stats();
  return {{"prompt_tokens", s.n_prompt},
          {"completion_tokens", g.n_generated()},
          {"total_tokens", s.n_prompt + g.n_generated()},
          {"prompt_tokens_details", {{"cached_tokens", s.n_cached}}}};
}

// Fields both endpoints read the same way. `max_keys` in order of preference.
struct Common {
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stops;
};

Common read_common(const json& body, GenRequest& r, std::initializer_list<const char*> max_keys) {
  Common c;
  if (const auto n = get_int(body, "n", 1, 128); n && *n != 1)
    bad_param("n", "'n' must be 1 (this server returns one choice per request), got {}", *n);
  for (const char* k : max_keys)
    if (const auto m = get_int(body, k, 0, INT32_MAX)) {
      r.max_tokens = *m;
      break;
    }
  read_sampling(body, r);
  c.stream = get_bool(body, "stream").value_or(false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) bad_param("stream_options", "'stream_options' must be an object");
    c.include_usage = get_bool(*it, "include_usage").value_or(false);
  }
  c.stops = get_stops(body, "stop");
  r.cache_prompt = get_bool(body, "cache_prompt").value_or(true);
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);  // llama-server's extension
  return c;
}

std::string piece_text(const Tokenizer* tok, int32_t id) { return tok ? tok->token_to_piece(id, true) : ""; }
// Legacy logprobs use token texts as JSON keys, which must be valid UTF-8 to stay apart.
std::string key_text(const Tokenizer* tok, int32_t id) { return valid_utf8(piece_text(tok, id)); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// Chat logprobs entry: {token, logprob, bytes, top_logprobs: [...]}.
json chat_logprob(const Tokenizer* tok, const Piece& p) {
  const std::string t = piece_text(tok, p.token);
  json top = json::array();
  for (const auto& a : p.top) {
    const std::string at = piece_text(tok, a.id);
    top.push_back({{"token", at}, {"logprob", a.logprob}, {"bytes", bytes_of(at)}});
  }
  return {{"token", t}, {"logprob", p.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}};
}

json tool_call_json(int index, const std::string& name, const std::string& args, bool with_index) {
  json tc = {{"id", random_id("call_")}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
  if (with_index) tc["index"] = index;
  return tc;
}

}  // namespace

void handle_v1_completions(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model(body, c.model_id);
  GenRequest r;
  r.prompt = read_prompt(c, body, "prompt");
  const Common cm = read_common(body, r, {"max_tokens"});
  const int64_t n_logprobs = get_int(body, "logprobs", 0, 20).value_or(-1);
  if (get_bool(body, "echo").value_or(false)) bad_param("echo", "'echo' is not supported");
  r.logprobs = n_logprobs >= 0;
  r.n_top_logprobs = static_cast<int>(std::max<int64_t>(0, n_logprobs));
  const std::string id = random_id("cmpl-");
  const int64_t created = unix_now();
  const std::string model = c.model_id;
  const Tokenizer* tok = c.tok;

  auto gen = std::make_shared<Generation>(c.sched->submit(std::move(r)), c.tok, cm.stops);
  // Legacy completions logprobs: parallel arrays.
  auto logprobs_json = [tok](const std::vector<Piece>& ps) {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    for (const auto& p : ps) {
      tokens.push_back(piece_text(tok, p.token));
      lps.push_back(p.logprob);
      json t = json::object();
      // Keyed by text: of two tokens with one text (e.g. lone UTF-8 bytes) the likelier,
      // listed first, stays.
      for (const auto& a : p.top)
        if (!t.contains(key_text(tok, a.id))) t[key_text(tok, a.id)] = a.logprob;
      tops.push_back(t);
      offs.push_back(0);
    }
    return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
  };
  auto chunk = [=](const std::string& text, const json& logprobs, const json& finish) {
    return json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"text", text}, {"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  };

  if (!cm.stream) {
    Piece p;
    std::vector<Piece> pieces;
    while (gen->next(p))
      if (!p.done && n_logprobs >= 0) pieces.push_back(p);
    json j = chunk(gen->text(), n_logprobs >= 0 ? logprobs_json(pieces) : json(nullptr), gen->finish_reason());
    j["usage"] = usage_json(*gen);
    return send_json(res, 200, j);
  }
  const bool include_usage = cm.include_usage;
  send_sse(
      res,
      [=](const SseWrite& write) {
        Piece p;
        while (gen->next(p)) {
          const json lp = n_logprobs >= 0 && !p.done ? logprobs_json({p}) : json(nullptr);
          if (!p.text.empty() || !lp.is_null())
            if (!write(sse_data(chunk(p.text, lp, nullptr)))) return gen->cancel();
          if (p.done) {
            if (!write(sse_data(chunk("", nullptr, gen->finish_reason())))) return;
            if (include_usage) {
              json u = chunk("", nullptr, nullptr);
              u["choices"] = json::array();
              u["usage"] = usage_json(*gen);
              if (!write(sse_data(u))) return;
            }
            write(sse_done());
            return;
          }
        }
      },
      [gen] { gen->cancel(); });
}

void handle_chat_completions(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model(body, c.model_id);
  GenRequest r;
  // What the template renders, read again in the client's key order (json sorts keys; a
  // tool schema must reach `tools | tojson` as sent, as llama.cpp and vLLM render it).
  const auto ordered = nlohmann::ordered_json::parse(req.body);
  const auto tools = ordered.contains("tools") ? ordered["tools"] : nlohmann::ordered_json(nullptr);
  auto extra = nlohmann::ordered_json::object();
  if (auto it = ordered.find("chat_template_kwargs"); it != ordered.end() && !it->is_null()) {
    if (!it->is_object()) bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    extra = *it;
  }
  if (!body.contains("messages")) bad_param("messages", "'messages' is required");
  const ChatPrompt cp = build_chat_prompt(c, ordered["messages"], tools, extra);
  r.prompt = cp.ids;
  const Common cm = read_common(body, r, {"max_completion_tokens", "max_tokens"});
  const bool logprobs = get_bool(body, "logprobs").value_or(false);
  const int64_t top = get_int(body, "top_logprobs", 0, 20).value_or(0);
  if (top > 0 && !logprobs) bad_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  r.logprobs = logprobs;
  r.n_top_logprobs = static_cast<int>(top);
  const std::string id = random_id("chatcmpl-");
  const int64_t created = unix_now();
  const std::string model = c.model_id;
  const Tokenizer* tok = c.tok;
  const ChatFormat fmt = c.chat_format;
  const bool in_reasoning = cp.starts_in_reasoning;

  auto gen = std::make_shared<Generation>(c.sched->submit(std::move(r)), c.tok, cm.stops);
  auto chunk = [=](const json& delta, const json& lp, const json& finish) {
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish}}})}};
  };

  if (!cm.stream) {
    Piece p;
    json lps = json::array();
    while (gen->next(p))
      if (!p.done && logprobs) lps.push_back(chat_logprob(tok, p));
    const ChatParse parsed = parse_chat_output(gen->text(), fmt, in_reasoning);
    json msg = {{"role", "assistant"}};
    msg["content"] = parsed.content.empty() && !parsed.tool_calls.empty() ? json(nullptr) : json(parsed.content);
    if (!parsed.reasoning.empty()) msg["reasoning_content"] = parsed.reasoning;
    std::string finish = gen->finish_reason();
    if (!parsed.tool_calls.empty()) {
      json tcs = json::array();
      for (const auto& tc : parsed.tool_calls)
        tcs.push_back(tool_call_json(0, tc["name"].get<std::string>(), tc["arguments"].get<std::string>(), false));
      msg["tool_calls"] = tcs;
      if (finish == "stop") finish = "tool_calls";
    }
    json j = {{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({{{"index", 0},
                                        {"message", msg},
                                        {"logprobs", logprobs ? json{{"content", lps}} : json(nullptr)},
                                        {"finish_reason", finish}}})},
              {"usage", usage_json(*gen)}};
    return send_json(res, 200, j);
  }
  const bool include_usage = cm.include_usage;
  send_sse(
      res,
      [=](const SseWrite& write) {
        if (!write(sse_data(chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)))) return gen->cancel();
        ChatStreamParser parser(fmt, in_reasoning);
        bool any_tool = false;
        auto send_deltas = [&](const std::vector<ChatDelta>& ds, const json& lp) {
          bool sent_lp = lp.is_null();
          for (const auto& d : ds) {
            json delta;
            if (d.kind == ChatDelta::Kind::CONTENT) {
              delta = {{"content", d.text}};
            } else if (d.kind == ChatDelta::Kind::REASONING) {
              delta = {{"reasoning_content", d.text}};
            } else {
              any_tool = true;
              delta = {{"tool_calls", json::array({tool_call_json(d.tool_index, d.tool_name, d.tool_arguments, true)})}};
            }
            if (!write(sse_data(chunk(delta, sent_lp ? json(nullptr) : lp, nullptr)))) return false;
            sent_lp = true;
          }
          // Logprobs of a token whose text is held back still go out, with an empty delta.
          if (!sent_lp && !write(sse_data(chunk(json::object(), lp, nullptr)))) return false;
          return true;
        };
        Piece p;
        while (gen->next(p)) {
          const json lp = logprobs && !p.done ? json{{"content", json::array({chat_logprob(tok, p)})}} : json(nullptr);
          if (!send_deltas(parser.feed(p.text), lp)) return gen->cancel();
          if (p.done) {
            if (!send_deltas(parser.finish(), nullptr)) return;
            std::string finish = gen->finish_reason();
            if (any_tool && finish == "stop") finish = "tool_calls";
            if (!write(sse_data(chunk(json::object(), nullptr, finish)))) return;
            if (include_usage) {
              json u = chunk(json::object(), nullptr, nullptr);
              u["choices"] = json::array();
              u["usage"] = usage_json(*gen);
              if (!write(sse_data(u))) return;
            }
            write(sse_done());
            return;
          }
        }
      },
      [gen] { gen->cancel(); });
}

}  // namespace ft::serve
