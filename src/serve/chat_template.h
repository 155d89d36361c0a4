// Renders a model's chat template (GGUF `tokenizer.chat_template`, Jinja) for a
// conversation, the way Hugging Face's transformers / @huggingface/jinja do, so the
// prompt the server builds is the one the model was trained on.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ft::serve {

// messages: array of {role, content (string, array of parts, or null), tool_calls,
// tool_call_id, name, reasoning_content, ...} passed to the template as given.
// tools: array of OpenAI tool definitions, or null when there are none.
// extra: object of further template variables (enable_thinking, ...); each key is
// visible to the template as a top-level name.
// Throws ft::Error naming the template line and column on a template error (syntax,
// raise_exception, runaway loop or recursion).
std::string render_chat(const std::string& tmpl, const nlohmann::json& messages,
                        const nlohmann::json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::json& extra);

}  // namespace ft::serve
