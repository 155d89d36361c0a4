// Anthropic's POST /v1/messages and /v1/messages/count_tokens
// (https://docs.anthropic.com/en/api/messages). Requests are turned into the OpenAI-style
// messages the chat templates expect; streaming uses Anthropic's named events
// (message_start, content_block_start/delta/stop, message_delta, message_stop).
#include <nlohmann/json.hpp>

#include "serve/api_chat.h"
#include "serve/api_error.h"
#include "serve/api_generation.h"
#include "serve/api_handlers.h"
#include "serve/api_params.h"
#include "serve/chat_parse.h"
#include "serve/server_http.h"

namespace ft::serve {

using nlohmann::json;
// The request as the chat template reads it: in the client's key order (json sorts keys; a
// tool schema must reach `tools | tojson` as sent, as llama.cpp and vLLM render it, and as
// /v1/chat/completions passes it).
using ojson = nlohmann::ordered_json;

namespace {

// A string field of a request object: "" when absent or null, else it must be a string -- a 400 naming where
// (`value(key, "")` would throw json's type_error on a number or an array: a 500).
std::string string_field(const ojson& o, const char* key, const char* param, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return "";
  if (!it->is_string()) bad_param(param, "{}.{} must be a string", where, key);
  return it->get<std::string>();
}

// The text of a string or of an array of {type: "text", text} blocks.
std::string text_of(const ojson& v, const char* param, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (!v.is_array()) bad_param(param, "{} must be a string or an array of content blocks", where);
  std::string s;
  for (size_t j = 0; j < v.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", where, j);
    if (v[j].is_object() && string_field(v[j], "type", param, at) == "text") s += string_field(v[j], "text", param, at);
  }
  return s;
}

ojson to_openai_messages(const ojson& body) {
  ojson out = ojson::array();
  if (auto it = body.find("system"); it != body.end() && !it->is_null())
    out.push_back({{"role", "system"}, {"content", text_of(*it, "system", "system")}});
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    bad_param("messages", "'messages' must be a non-empty array of {{role, content}} objects");
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& m = (*it)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_param("messages", "messages[{}] must be an object with a string 'role'", i);
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      bad_param("messages", "messages[{}].role must be 'user' or 'assistant', got '{}'", i, role);
    const ojson content = m.contains("content") ? m["content"] : ojson(nullptr);
    if (content.is_string()) {
      out.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) bad_param("messages", "messages[{}].content must be a string or an array of blocks", i);
    std::string text, thinking;
    ojson tool_calls = ojson::array();
    for (size_t j = 0; j < content.size(); ++j) {
      const ojson& b = content[j];
      const std::string where = fmt::format("messages[{}].content[{}]", i, j);
      const std::string type = b.is_object() ? string_field(b, "type", "messages", where) : "";
      if (type == "text") {
        text += string_field(b, "text", "messages", where);
      } else if (type == "thinking") {
        thinking += string_field(b, "thinking", "messages", where);
      } else if (type == "tool_use") {
        tool_calls.push_back({{"id", string_field(b, "id", "messages", where)},
                              {"type", "function"},
                              {"function",
                               {{"name", string_field(b, "name", "messages", where)},
                                {"arguments", b.value("input", ojson::object())}}}});
      } else if (type == "tool_result") {
        // Results come back as the tool role, one message per call, as OpenAI sends them.
        out.push_back({{"role", "tool"},
                       {"tool_call_id", string_field(b, "tool_use_id", "messages", where)},
                       {"content", text_of(b.contains("content") ? b["content"] : ojson(""), "messages", where + ".content")}});
      }
    }
    if (text.empty() && thinking.empty() && tool_calls.empty()) continue;
    ojson msg = {{"role", role}, {"content", text}};
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(msg);
  }
  return out;
}

ojson to_openai_tools(const ojson& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_array()) bad_param("tools", "'tools' must be an array of {{name, description, input_schema}}");
  ojson out = ojson::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& t = (*it)[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      bad_param("tools", "each tool must be an object with a string 'name'");
    out.push_back({{"type", "function"},
                   {"function",
                    {{"name", t["name"]},
                     {"description", string_field(t, "description", "tools", fmt::format("tools[{}]", i))},
                     {"parameters", t.value("input_schema", ojson::object())}}}});
  }
  return out;
}

ChatPrompt prompt_of(const ServerContext& c, const ojson& body) {
  ojson extra = ojson::object();
  // Extended thinking on request: templates read enable_thinking.
  if (auto it = body.find("thinking"); it != body.end() && it->is_object())
    extra["enable_thinking"] = string_field(*it, "type", "thinking", "thinking") == "enabled";
  return build_chat_prompt(c, to_openai_messages(body), to_openai_tools(body), extra);
}

const char* stop_reason(const Generation& g, bool tool_use) {
  switch (g.stop_kind()) {
    case StopKind::kWord: return "stop_sequence";
    case StopKind::kLimit: return "max_tokens";
    default: return tool_use ? "tool_use" : "end_turn";
  }
}

json tool_input(const std::string& args) {
  try {
    return json::parse(args);
  } catch (const json::exception&) {
    return json::object();
  }
}

}  // namespace

void handle_messages(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model(body, c.model_id);
  const auto max_tokens = get_int(body, "max_tokens", 1, INT32_MAX);
  if (!max_tokens) bad_param("max_tokens", "'max_tokens' is required (a positive integer)");
  const ChatPrompt cp = prompt_of(c, ojson::parse(req.body));
  GenRequest r;
  r.prompt = cp.ids;
  r.max_tokens = *max_tokens;
  read_sampling(body, r);
  // Anthropic's default temperature is 1.0 and it has no top_p / min_p cut unless asked.
  if (!body.contains("temperature")) r.sampling.temperature = 1.0f;
  if (!body.contains("top_p")) r.sampling.top_p = 1.0f;
  if (!body.contains("top_k")) r.sampling.top_k = 0;
  r.sampling.min_p = 0.0f;
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);  // llama-server's extension
  const std::vector<std::string> stops = get_stops(body, "stop_sequences");
  const bool stream = get_bool(body, "stream").value_or(false);
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const std::string id = random_id("msg_");
  const std::string model = c.model_id;
  const ChatFormat fmt = c.chat_format;
  const bool in_reasoning = cp.starts_in_reasoning;

  auto gen = std::make_shared<Generation>(c.sched->submit(std::move(r)), c.tok, stops);
  auto usage = [gen](bool final) {
    const JobStats s = gen->stats();
    json u = {{"input_tokens", s.n_prompt}, {"output_tokens", final ? gen->n_generated() : 0}};
    u["cache_read_input_tokens"] = s.n_cached;
    u["cache_creation_input_tokens"] = 0;
    return u;
  };
  auto stop_seq = [gen]() { return gen->stop_kind() == StopKind::kWord ? json(gen->stop_word()) : json(nullptr); };

  if (!stream) {
    Piece p;
    while (gen->next(p)) {
    }
    const ChatParse parsed = parse_chat_output(gen->text(), fmt, in_reasoning);
    json content = json::array();
    if (!parsed.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", parsed.reasoning}, {"signature", ""}});
    if (!parsed.content.empty() || parsed.tool_calls.empty())
      content.push_back({{"type", "text"}, {"text", parsed.content}});
    for (const auto& tc : parsed.tool_calls)
      content.push_back({{"type", "tool_use"},
                         {"id", random_id("toolu_")},
                         {"name", tc["name"]},
                         {"input", tool_input(tc["arguments"].get<std::string>())}});
    json j = {{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", content},
              {"stop_reason", stop_reason(*gen, !parsed.tool_calls.empty())},
              {"stop_sequence", stop_seq()},
              {"usage", usage(true)}};
    return send_json(res, 200, j);
  }
  send_sse(
      res,
      [=](const SseWrite& write) {
        json start = {{"id", id},         {"type", "message"},      {"role", "assistant"},
                      {"model", model},   {"content", json::array()}, {"stop_reason", nullptr},
                      {"stop_sequence", nullptr},
                      {"usage", {{"input_tokens", n_prompt}, {"output_tokens", 0}}}};
        if (!write(sse_event("message_start", {{"type", "message_start"}, {"message", start}}))) return gen->cancel();
        ChatStreamParser parser(fmt, in_reasoning);
        // One open block at a time: text or thinking deltas extend it; a change of kind
        // or a tool call closes it.
        int index = -1;
        std::string open;  // "text", "thinking" or ""
        bool any_tool = false;
        auto close = [&]() {
          if (open.empty()) return true;
          open.clear();
          return write(sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}}));
        };
        auto open_block = [&](const std::string& kind, const json& block) {
          if (!close()) return false;
          ++index;
          open = kind;
          return write(sse_event("content_block_start",
                                 {{"type", "content_block_start"}, {"index", index}, {"content_block", block}}));
        };
        auto delta = [&](const json& d) {
          return write(sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", d}}));
        };
        auto send = [&](const std::vector<ChatDelta>& ds) {
          for (const auto& d : ds) {
            bool ok = true;
            if (d.kind == ChatDelta::Kind::CONTENT) {
              if (d.text.empty()) continue;
              if (open != "text") ok = open_block("text", {{"type", "text"}, {"text", ""}});
              ok = ok && delta({{"type", "text_delta"}, {"text", d.text}});
            } else if (d.kind == ChatDelta::Kind::REASONING) {
              if (d.text.empty()) continue;
              if (open != "thinking") ok = open_block("thinking", {{"type", "thinking"}, {"thinking", ""}});
              ok = ok && delta({{"type", "thinking_delta"}, {"thinking", d.text}});
            } else {
              any_tool = true;
              ok = open_block("tool_use", {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", d.tool_name},
                                           {"input", json::object()}}) &&
                   delta({{"type", "input_json_delta"}, {"partial_json", d.tool_arguments}}) && close();
            }
            if (!ok) return false;
          }
          return true;
        };
        Piece p;
        while (gen->next(p)) {
          if (!send(parser.feed(p.text))) return gen->cancel();
          if (p.done) {
            if (!send(parser.finish()) || !close()) return;
            json md = {{"type", "message_delta"},
                       {"delta", {{"stop_reason", stop_reason(*gen, any_tool)}, {"stop_sequence", stop_seq()}}},
                       {"usage", usage(true)}};
            if (!write(sse_event("message_delta", md))) return;
            write(sse_event("message_stop", {{"type", "message_stop"}}));
            return;
          }
        }
      },
      [gen] { gen->cancel(); });
}

void handle_count_tokens(const ServerContext& c, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  check_model(body, c.model_id);
  send_json(res, 200, {{"input_tokens", prompt_of(c, ojson::parse(req.body)).ids.size()}});
}

}  // namespace ft::serve
