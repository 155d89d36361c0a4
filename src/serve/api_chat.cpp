#include "serve/api_chat.h"

#include <random>

#include "serve/api_error.h"
#include "serve/chat_parse.h"
#include "serve/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {

using ojson = nlohmann::ordered_json;

ChatPrompt build_chat_prompt(const ServerContext& c, const ojson& messages, const ojson& tools, const ojson& extra) {
  if (!messages.is_array() || messages.empty())
    bad_param("messages", "'messages' must be a non-empty array of {{role, content}} objects");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ojson& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_param("messages", "messages[{}] must be an object with a string 'role'", i);
  }
  if (!tools.is_null() && !tools.is_array()) bad_param("tools", "'tools' must be an array of tool definitions");
  const Tokenizer& tok = c.need_tok("messages");
  ChatPrompt p;
  p.text = render_chat(c.chat_template, messages, tools, /*add_generation_prompt=*/true, c.bos_text, c.eos_text,
                       extra.is_object() ? extra : ojson::object());
  std::string_view text = p.text;
  // Templates that print bos_token would get a second BOS from the tokenizer.
  if (tok.add_bos() && !c.bos_text.empty() && text.substr(0, c.bos_text.size()) == c.bos_text)
    text.remove_prefix(c.bos_text.size());
  p.ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  // A prompt that ends inside an opened thinking block makes the reply begin with reasoning.
  p.starts_in_reasoning = prompt_opens_reasoning(p.text, c.chat_format);
  return p;
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rng() & 15];
  return s;
}

}  // namespace ft::serve
