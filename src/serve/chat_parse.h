// Splits a model's generated text into what the API returns: visible content, the
// reasoning (thinking) text, and tool calls. Both for a finished text and
// incrementally for streaming, where text arrives in arbitrary deltas (a tag such as
// "<tool_call>" may be cut anywhere).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace ft::serve {

enum class ChatFormat {
  CONTENT_ONLY,  // no tool-call syntax known: all text is content (reasoning still split on <think>)
  QWEN,          // Qwen / Hermes: <think>...</think>, <tool_call>{"name":..,"arguments":{..}}</tool_call>
  GEMMA4,        // Gemma 4: <|channel>thought\n...<channel|>, <|tool_call>call:NAME{k:v,..}<tool_call|>
};

// Picks the format from the template text (markers the template emits).
ChatFormat detect_chat_format(const std::string& tmpl);

struct ChatParse {
  std::string content;
  std::string reasoning;
  // Array of {"name": string, "arguments": string (JSON text of an object)}.
  nlohmann::json tool_calls = nlohmann::json::array();
};

// Did the rendered prompt leave a reasoning block open for the model (Qwen3.5's
// template ends with "<think>\n" when thinking is on)? Then the generation starts
// inside the reasoning: pass the answer as starts_in_reasoning below.
bool prompt_opens_reasoning(const std::string& prompt, ChatFormat f);

// Parses a complete generation (the same state machine as the stream, fed at once).
// Whitespace right inside a reasoning block, after its end and between tool calls is
// dropped. A tool call that does not parse stays in the content as written. When the prompt ended inside a thinking block
// (a template that opens "<think>\n" for the model), pass starts_in_reasoning = true.
ChatParse parse_chat_output(const std::string& text, ChatFormat f, bool starts_in_reasoning = false);

// One streamed piece. Exactly one of the fields is set per delta kind:
// content / reasoning text, or a finished tool call (index counts calls from 0).
struct ChatDelta {
  enum class Kind { CONTENT, REASONING, TOOL_CALL } kind = Kind::CONTENT;
  std::string text;          // CONTENT, REASONING
  int tool_index = -1;       // TOOL_CALL
  std::string tool_name;     // TOOL_CALL
  std::string tool_arguments;  // TOOL_CALL: JSON text of an object
};

// Incremental parser: feed() text deltas as they are generated, finish() at the end.
// Text that might be the start of a tag is held back until it is decided. A tool call
// is emitted whole once its closing tag arrives. Concatenating the deltas gives the
// same content / reasoning / tool calls as parse_chat_output on the whole text.
class ChatStreamParser {
 public:
  explicit ChatStreamParser(ChatFormat f, bool starts_in_reasoning = false);
  std::vector<ChatDelta> feed(const std::string& delta);
  std::vector<ChatDelta> finish();

 private:
  enum class State { CONTENT, REASONING, TOOL_CALL };
  void step(std::vector<ChatDelta>& out, bool at_end);
  void emit_text(std::vector<ChatDelta>& out, std::string text, bool at_segment_end);

  ChatFormat format_;
  State state_;
  std::string pending_;  // text not yet decided (may hold a partial tag)
  std::string held_ws_;  // trailing whitespace of the segment, emitted only if text follows
  bool skip_ws_ = false; // drop whitespace at the start of the segment
  std::string ws_before_tool_;  // whitespace before an open tool call, restored if it fails to parse
  int n_tool_calls_ = 0;
};

}  // namespace ft::serve
