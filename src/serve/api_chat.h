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
ChatPrompt build_chat_prompt(const ServerContext& c, const nlohmann::json& messages, const nlohmann::json& tools,
                             const nlohmann::json& extra);

// "<prefix><24 random hex digits>" for response and tool-call ids.
std::string random_id(const char* prefix);

}  // namespace ft::serve
