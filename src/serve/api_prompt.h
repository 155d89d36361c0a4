// Prompts as the completion endpoints accept them: text (tokenized with BOS and special
// tokens, as llama-server does), an array of token ids, or an array holding one of those
// (OpenAI's batch form with a single prompt; n > 1 prompts are refused).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "serve/server_context.h"

namespace ft::serve {

std::vector<int32_t> read_prompt(const ServerContext& c, const nlohmann::json& body, const char* key);

}  // namespace ft::serve
