// Chat requests -> prompt tokens: messages rendered with the model's template
// (render_chat), then tokenized as llama-server does (BOS from the tokenizer, not twice).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "serve/server_context.h"

namespace ft::serve {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> ids;
  bool starts_in_reasoning = false;  // the template opened a <think> block for the model
};

// messages: OpenAI-style array (checked: objects with a string role). tools: array or null.
// Insertion-ordered JSON: a tool schema's keys reach the template in the client's order (as
// llama.cpp and vLLM render them) when the caller parsed the body as ordered_json; a
// nlohmann::json argument converts, in its sorted order.
ChatPrompt build_chat_prompt(const ServerContext& c, const nlohmann::ordered_json& messages,
                             const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra);

// "<prefix><24 random hex digits>" for response and tool-call ids.
std::string random_id(const char* prefix);

}  // namespace ft::serve
