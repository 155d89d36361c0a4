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

// The same with insertion-ordered JSON: parse request bodies as ordered_json so a tool
// schema's keys reach the template (`tools | tojson`) in the order the client sent
// them, as Python / JS renderers keep them. nlohmann::json sorts keys.
std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra);

// What render_chat does to messages before rendering, so that templates written for
// transformers' inputs accept OpenAI-style requests: a null or missing "content"
// becomes "" (Qwen3's and Llama 3's templates apply string operations to it), and a
// tool call's "function.arguments" given as a JSON string (OpenAI's wire format)
// becomes the object (templates iterate it or print it with tojson).
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

// The variables render_chat gives the template: messages (normalized), tools (null
// when none), add_generation_prompt, bos_token, eos_token, then each key of extra.
nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                             const std::string& bos_token, const std::string& eos_token,
                                             const nlohmann::ordered_json& extra);

}  // namespace ft::serve
