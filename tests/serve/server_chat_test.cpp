// Chat through the real Qwen3 template (tests/data/templates) on a scripted model output:
// reasoning goes to reasoning_content / thinking blocks, a <tool_call> becomes OpenAI
// tool_calls and an Anthropic tool_use block (plain and streamed), and the tool result
// renders back into the next prompt (a tool-call round trip).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "serve/chat_template.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

std::string qwen3_template() {
  std::ifstream f(std::string(FT_SOURCE_DIR) + "/tests/data/templates/Qwen-Qwen3-0.6B.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kToolReply =
    "<think>\nThe user wants the weather; call the tool.\n</think>\n\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

const json kTools = json::array({{{"type", "function"},
                                  {"function",
                                   {{"name", "get_weather"},
                                    {"description", "Weather of a city"},
                                    {"parameters",
                                     {{"type", "object"},
                                      {"properties", {{"city", {{"type", "string"}}}}},
                                      {"required", {"city"}}}}}}}});

// A server whose model answers `reply` and then its end-of-generation token.
std::unique_ptr<TestServer> scripted_server(const std::string& reply) {
  ServeSetup setup;
  setup.chat_template = qwen3_template();
  setup.n_ctx = 1024;  // the template and tool schema take ~450 byte-level tokens
  setup.wrap = [reply](std::unique_ptr<engine::Runner> r, const Tokenizer& tok) -> std::unique_ptr<engine::Runner> {
    std::vector<int32_t> script = tok.encode(reply, false, false);
    script.push_back(tok.eos_id() >= 0 ? tok.eos_id() : script.back());
    return std::make_unique<ScriptedRunner>(std::move(r), std::move(script));
  };
  return std::make_unique<TestServer>(setup);
}

json user_asks() { return json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}}); }

TEST(ServerChat, ToolCallAndReasoning) {
  ASSERT_FALSE(qwen3_template().empty());
  auto s = scripted_server(kToolReply);
  const auto r = post_json(*s, "/v1/chat/completions",
                           json{{"messages", user_asks()}, {"tools", kTools}, {"max_tokens", 200}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& ch = r.body["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  const json& msg = ch["message"];
  EXPECT_EQ(msg["reasoning_content"], "The user wants the weather; call the tool.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << r.raw;
  const json& tc = msg["tool_calls"][0];
  EXPECT_EQ(tc["type"], "function");
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_FALSE(tc["id"].get<std::string>().empty());
  // The prompt is the template's rendering of the conversation and the tools.
  const std::string prompt =
      serve::render_chat(qwen3_template(), user_asks(), kTools, true, "", "<|im_end|>", json::object());
  EXPECT_NE(prompt.find("get_weather"), std::string::npos);
  const auto t = post_json(*s, "/tokenize", json{{"content", prompt}, {"add_special", true}});
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], t.body["tokens"].size());
}

TEST(ServerChat, ToolResultRoundTrip) {
  auto s = scripted_server("It is 18 degrees in Paris.");
  json messages = user_asks();
  messages.push_back({{"role", "assistant"},
                      {"content", ""},
                      {"tool_calls",
                       {{{"id", "call_1"},
                         {"type", "function"},
                         {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18C"}});
  const auto r = post_json(*s, "/v1/chat/completions",
                           json{{"messages", messages}, {"tools", kTools}, {"max_tokens", 200}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r.body["choices"][0]["message"]["content"], "It is 18 degrees in Paris.");
  const std::string prompt = serve::render_chat(qwen3_template(), messages, kTools, true, "", "<|im_end|>", json::object());
  EXPECT_NE(prompt.find("<tool_response>\n18C\n</tool_response>"), std::string::npos) << prompt;
  const auto t = post_json(*s, "/tokenize", json{{"content", prompt}, {"add_special", true}});
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], t.body["tokens"].size());
}

TEST(ServerChat, StreamedToolCall) {
  auto s = scripted_server(kToolReply);
  const auto frames = parse_sse(post_stream(
      *s, "/v1/chat/completions",
      json{{"messages", user_asks()}, {"tools", kTools}, {"max_tokens", 200}, {"temperature", 0}, {"stream", true}}));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.back().data, "[DONE]");
  std::string reasoning, content;
  json calls = json::array();
  std::string finish;
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    const json c = json::parse(frames[i].data);
    const json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const auto& tc : d["tool_calls"]) calls.push_back(tc);
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(reasoning, "The user wants the weather; call the tool.");
  EXPECT_EQ(content, "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ServerChat, AnthropicToolUse) {
  auto s = scripted_server(kToolReply);
  const json tools = json::array({{{"name", "get_weather"},
                                   {"description", "Weather of a city"},
                                   {"input_schema", kTools[0]["function"]["parameters"]}}});
  const json req = {{"messages", user_asks()}, {"tools", tools}, {"max_tokens", 200}, {"temperature", 0}};
  const auto r = post_json(*s, "/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["stop_reason"], "tool_use");
  const json& content = r.body["content"];
  ASSERT_EQ(content.size(), 2u) << r.raw;
  EXPECT_EQ(content[0]["type"], "thinking");
  EXPECT_EQ(content[0]["thinking"], "The user wants the weather; call the tool.");
  EXPECT_EQ(content[1]["type"], "tool_use");
  EXPECT_EQ(content[1]["name"], "get_weather");
  EXPECT_EQ(content[1]["input"], json({{"city", "Paris"}}));

  json sreq = req;
  sreq["stream"] = true;
  const auto frames = parse_sse(post_stream(*s, "/v1/messages", sreq));
  std::vector<std::string> blocks;
  std::string thinking, partial_json, stop_reason;
  for (const auto& f : frames) {
    const json d = json::parse(f.data);
    if (f.event == "content_block_start") blocks.push_back(d["content_block"]["type"]);
    if (f.event == "content_block_delta" && d["delta"]["type"] == "thinking_delta") thinking += d["delta"]["thinking"].get<std::string>();
    if (f.event == "content_block_delta" && d["delta"]["type"] == "input_json_delta")
      partial_json += d["delta"]["partial_json"].get<std::string>();
    if (f.event == "message_delta") stop_reason = d["delta"]["stop_reason"];
  }
  EXPECT_EQ(blocks, (std::vector<std::string>{"thinking", "tool_use"}));
  EXPECT_EQ(thinking, "The user wants the weather; call the tool.");
  EXPECT_EQ(json::parse(partial_json), json({{"city", "Paris"}}));
  EXPECT_EQ(stop_reason, "tool_use");
}

}  // namespace
}  // namespace ft::test
