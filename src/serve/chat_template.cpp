#include "serve/chat_template.h"

#include "core/error.h"
#include "serve/jinja/template.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace ft::serve {

namespace {

// Parsing Gemma 4's 16 KB template takes ~1 ms, as long as rendering a short chat;
// a server renders with one template, so keep the parsed ones.
std::shared_ptr<const jinja::Template> compiled(const std::string& tmpl) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const jinja::Template>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(tmpl);
    if (it != cache.end()) return it->second;
  }
  auto t = std::make_shared<const jinja::Template>(tmpl);  // throws on a syntax error: not cached
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 8) cache.clear();
  cache.emplace(tmpl, t);
  return t;
}

}  // namespace

nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array()) fail("chat messages must be an array, got {}", messages.type_name());
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object()) fail("each chat message must be an object, got {}", m.type_name());
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      auto& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) fn["arguments"] = std::move(parsed);
    }
  }
  return out;
}

nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                             const std::string& bos_token, const std::string& eos_token,
                                             const nlohmann::ordered_json& extra) {
  if (!tools.is_null() && !tools.is_array()) fail("tools must be an array or null, got {}", tools.type_name());
  if (!extra.is_null() && !extra.is_object()) fail("chat template variables must be an object, got {}", extra.type_name());
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = normalize_chat_messages(messages);
  ctx["tools"] = tools;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) ctx[k] = v;
  return ctx;
}

std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra) {
  return compiled(tmpl)->render(
      chat_template_context(messages, tools, add_generation_prompt, bos_token, eos_token, extra));
}

std::string render_chat(const std::string& tmpl, const nlohmann::json& messages, const nlohmann::json& tools,
                        bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::json& extra) {
  return render_chat(tmpl, nlohmann::ordered_json(messages), nlohmann::ordered_json(tools), add_generation_prompt,
                     bos_token, eos_token, nlohmann::ordered_json(extra));
}

}  // namespace ft::serve
