// Output parsing: reasoning / content / tool calls for the Qwen (JSON and Qwen3.5's
// XML) and Gemma 4 formats, complete and streamed in random chunkings, and round
// trips through the real templates (what a template prints for an assistant tool
// call parses back to the same call).
#include <gtest/gtest.h>

#include "serve/chat_parse.h"
#include "serve/chat_template.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace {

using ft::serve::ChatFormat;
using ft::serve::ChatParse;
using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::filesystem::path(FT_SOURCE_DIR) / "tests/data/templates" / name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Feeds text in the given chunk sizes and folds the deltas into a ChatParse.
ChatParse parse_streamed(const std::string& text, ChatFormat f, bool in_reasoning, const std::vector<size_t>& cuts) {
  ft::serve::ChatStreamParser p(f, in_reasoning);
  std::vector<ft::serve::ChatDelta> all;
  size_t pos = 0;
  for (size_t c : cuts) {
    for (auto& d : p.feed(text.substr(pos, c))) all.push_back(std::move(d));
    pos += c;
  }
  for (auto& d : p.feed(text.substr(pos))) all.push_back(std::move(d));
  for (auto& d : p.finish()) all.push_back(std::move(d));
  ChatParse r;
  int expected_index = 0;
  for (const auto& d : all) {
    if (d.kind == ft::serve::ChatDelta::Kind::CONTENT) r.content += d.text;
    if (d.kind == ft::serve::ChatDelta::Kind::REASONING) r.reasoning += d.text;
    if (d.kind == ft::serve::ChatDelta::Kind::TOOL_CALL) {
      EXPECT_EQ(d.tool_index, expected_index++);
      r.tool_calls.push_back({{"name", d.tool_name}, {"arguments", d.tool_arguments}});
    }
    EXPECT_TRUE(d.kind == ft::serve::ChatDelta::Kind::TOOL_CALL || !d.text.empty()) << "empty text delta";
  }
  return r;
}

// Chunk sizes covering n bytes, each below `below` (0 included: an empty delta).
std::vector<size_t> random_cuts(size_t n, size_t below, std::mt19937& rng) {
  std::vector<size_t> cuts;
  for (size_t left = n; left > 0;) {
    const size_t c = std::min(left, size_t(rng() % below));
    cuts.push_back(c);
    left -= c;
  }
  return cuts;
}

void expect_same(const ChatParse& a, const ChatParse& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  // Names are the model's bytes: dumped as the server sends them (invalid UTF-8 as U+FFFD).
  const auto dump = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  EXPECT_EQ(dump(a.tool_calls), dump(b.tool_calls)) << what;
}

TEST(ChatParse, DetectsFormatsOfRealTemplates) {
  EXPECT_EQ(ft::serve::detect_chat_format(read_template("Qwen-Qwen3-0.6B.jinja")), ChatFormat::QWEN);
  EXPECT_EQ(ft::serve::detect_chat_format(read_template("Qwen3.5-4B.jinja")), ChatFormat::QWEN);
  EXPECT_EQ(ft::serve::detect_chat_format(read_template("google-gemma-4-31B-it.jinja")), ChatFormat::GEMMA4);
  EXPECT_EQ(ft::serve::detect_chat_format(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ChatFormat::CONTENT_ONLY);
}

TEST(ChatParse, QwenReasoningContentAndJsonToolCalls) {
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
  const ChatParse r = ft::serve::parse_chat_output(text, ChatFormat::QWEN);
  EXPECT_EQ(r.reasoning, "The user wants weather.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0]["name"], "get_weather");
  EXPECT_EQ(r.tool_calls[0]["arguments"], "{\"city\":\"Paris\",\"days\":2}");  // key order kept
  EXPECT_EQ(r.tool_calls[1]["name"], "noop");
  EXPECT_EQ(r.tool_calls[1]["arguments"], "{}");
}

TEST(ChatParse, QwenXmlToolCallsOfQwen35) {
  const std::string text =
      "<tool_call>\n<function=search>\n<parameter=query>\nLyon population\n</parameter>\n"
      "<parameter=limit>\n3\n</parameter>\n<parameter=filters>\n{\"lang\": [\"fr\"]}\n</parameter>\n"
      "<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>";
  const ChatParse r = ft::serve::parse_chat_output(text, ChatFormat::QWEN);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0]["name"], "search");
  EXPECT_EQ(r.tool_calls[0]["arguments"],
            "{\"query\":\"Lyon population\",\"limit\":3,\"filters\":{\"lang\":[\"fr\"]},\"note\":\"two\\nlines\"}");
}

TEST(ChatParse, GenerationThatStartsInsideReasoning) {
  const std::string prompt = "<|im_start|>assistant\n<think>\n";
  EXPECT_TRUE(ft::serve::prompt_opens_reasoning(prompt, ChatFormat::QWEN));
  EXPECT_FALSE(ft::serve::prompt_opens_reasoning(prompt + "\n</think>\n\n", ChatFormat::QWEN));
  const ChatParse r = ft::serve::parse_chat_output("Hmm, 2+2.\n</think>\n\n4", ChatFormat::QWEN, true);
  EXPECT_EQ(r.reasoning, "Hmm, 2+2.");
  EXPECT_EQ(r.content, "4");
  // Cut off before </think>: everything so far is reasoning.
  const ChatParse cut = ft::serve::parse_chat_output("still thinking ", ChatFormat::QWEN, true);
  EXPECT_EQ(cut.reasoning, "still thinking");
  EXPECT_EQ(cut.content, "");
}

TEST(ChatParse, Gemma4ThoughtsAndToolCalls) {
  const std::string text =
      "<|channel>thought\nNeed the weather tool.<channel|>Sure."
      "<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:2,opts:{metric:true,tags:[<|\"|>a<|\"|>,1.5]},"
      "none:null}<tool_call|>";
  const ChatParse r = ft::serve::parse_chat_output(text, ChatFormat::GEMMA4);
  EXPECT_EQ(r.reasoning, "Need the weather tool.");
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0]["name"], "get_weather");
  EXPECT_EQ(r.tool_calls[0]["arguments"],
            "{\"city\":\"Paris, \\\"FR\\\"\",\"days\":2,\"opts\":{\"metric\":true,\"tags\":[\"a\",1.5]},\"none\":null}");
}

TEST(ChatParse, MalformedOrUnfinishedCallsStayContent) {
  ChatParse r = ft::serve::parse_chat_output("A <tool_call>not json</tool_call> B", ChatFormat::QWEN);
  EXPECT_EQ(r.content, "A <tool_call>not json</tool_call> B");
  EXPECT_TRUE(r.tool_calls.empty());
  r = ft::serve::parse_chat_output("A <tool_call>{\"name\": \"f\", \"argu", ChatFormat::QWEN);
  EXPECT_EQ(r.content, "A <tool_call>{\"name\": \"f\", \"argu");
  r = ft::serve::parse_chat_output("x <|tool_call>call:f{a:}<tool_call|>", ChatFormat::GEMMA4);
  EXPECT_EQ(r.content, "x <|tool_call>call:f{a:}<tool_call|>");
  // Tags of another format and lone '<' are plain text.
  r = ft::serve::parse_chat_output("a < b, <thin <tool_call>", ChatFormat::CONTENT_ONLY);
  EXPECT_EQ(r.content, "a < b, <thin <tool_call>");
}

TEST(ChatParse, StreamingInRandomChunksMatchesCompleteParse) {
  const std::vector<std::pair<std::string, ChatFormat>> texts = {
      {"<think>\nr1\n\n</think>\n\nHello  world\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"<tool_call>\"}}\n"
       "</tool_call>\n\n<tool_call>{\"name\": \"g\", \"arguments\": \"{}\"}</tool_call> tail \n",
       ChatFormat::QWEN},
      {"plain <b>html</b> and < 3 > 2 </think>", ChatFormat::QWEN},
      {"<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>", ChatFormat::QWEN},
      {"<|channel>thought\nplan <channel|>ok<|tool_call>call:f{a:<|\"|>x<tool_call|><|\"|>}<tool_call|>  \n",
       ChatFormat::GEMMA4},
      {"<think>only reasoning, cut", ChatFormat::CONTENT_ONLY},
      {"Gr\xc3\xbc\xc3\x9f" "e \xf0\x9f\x99\x82 <tool_call>{bad}</tool_call>", ChatFormat::QWEN},
  };
  std::mt19937 rng(1234);
  for (const auto& [text, fmt] : texts) {
    for (bool in_reasoning : {false, true}) {
      const ChatParse whole = ft::serve::parse_chat_output(text, fmt, in_reasoning);
      std::vector<size_t> bytes(text.size(), 1);
      expect_same(parse_streamed(text, fmt, in_reasoning, bytes), whole, "byte by byte: " + text);
      for (int trial = 0; trial < 100; ++trial)
        expect_same(parse_streamed(text, fmt, in_reasoning, random_cuts(text.size(), 9, rng)), whole,
                    "random chunks: " + text);
    }
  }
}

// A model's bytes need not be UTF-8 (a byte-fallback token, a character cut short): a call's arguments come back as
// JSON text with U+FFFD there, not an exception out of the parser (a 500 for the request).
TEST(ChatParse, InvalidUtf8InCallArgumentsBecomesReplacementChars) {
  const ChatParse q = ft::serve::parse_chat_output(
      "<tool_call>\n<function=f>\n<parameter=a>\nx\xc3\n</parameter>\n</function>\n</tool_call>", ChatFormat::QWEN);
  ASSERT_EQ(q.tool_calls.size(), 1u);
  EXPECT_EQ(q.tool_calls[0]["arguments"], "{\"a\":\"x\xef\xbf\xbd\"}");
  const ChatParse g =
      ft::serve::parse_chat_output("<|tool_call>call:f{a:<|\"|>\xff<|\"|>}<tool_call|>", ChatFormat::GEMMA4);
  ASSERT_EQ(g.tool_calls.size(), 1u);
  EXPECT_EQ(g.tool_calls[0]["arguments"], "{\"a\":\"\xef\xbf\xbd\"}");
}

// Texts made of the formats' tags and the bytes around them, in random orders: whatever a model prints, the stream
// (byte by byte, and in random chunks) must give what the complete parse gives, and no delta may be empty.
TEST(ChatParse, TagSoupStreamedMatchesCompleteParse) {
  const char* pieces[] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
                          "{\"name\": \"g\"", "}", "{", "\"", "<function=f>", "<parameter=a>", "</parameter>",
                          "</function>", "<|channel>thought\n", "<channel|>", "<|tool_call>", "call:f{", "a:", "<|\"|>",
                          "<tool_call|>", "<", ">", "/", "<|", "|>", " ", "  ", "\n", "\n\n", "x", "ok", "\xf0\x9f\x99\x82",
                          "\xc3"};
  std::mt19937 rng(99);
  for (ChatFormat fmt : {ChatFormat::QWEN, ChatFormat::GEMMA4, ChatFormat::CONTENT_ONLY}) {
    for (int n = 0; n < 2000; ++n) {
      std::string text;
      const int len = 1 + static_cast<int>(rng() % 14);
      for (int i = 0; i < len; ++i) text += pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
      const bool in_reasoning = (n & 1) != 0;
      const ChatParse whole = ft::serve::parse_chat_output(text, fmt, in_reasoning);
      expect_same(parse_streamed(text, fmt, in_reasoning, std::vector<size_t>(text.size(), 1)), whole,
                  "byte by byte: " + text);
      expect_same(parse_streamed(text, fmt, in_reasoning, random_cuts(text.size(), 7, rng)), whole,
                  "random chunks: " + text);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// What a template prints for an assistant's tool call is what the model is trained
// to produce: parsing it back must give the same call.
TEST(ChatParse, TemplatePrintedToolCallsParseBack) {
  const ojson messages = ojson::parse(R"json([
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "metric": true}}},
      {"id": "2", "type": "function", "function": {"name": "search", "arguments": {"query": "a \"b\"", "filters": {"lang": ["fr", "en"]}}}}]}
  ])json");
  const ojson tools = ojson::array();
  struct T {
    const char* file;
    const char* turn_start;  // the last assistant turn begins after this
    const char* turn_end;
  };
  for (const T t : {T{"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
                    T{"Qwen3.5-4B.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
                    T{"google-gemma-4-31B-it.jinja", "<|turn>model\n", "<|tool_response>"}}) {
    const std::string tmpl = read_template(t.file);
    const std::string prompt = ft::serve::render_chat(tmpl, messages, tools, false, "", "", ojson::object());
    const size_t start = prompt.rfind(t.turn_start);
    ASSERT_NE(start, std::string::npos) << t.file << "\n" << prompt;
    std::string turn = prompt.substr(start + std::string(t.turn_start).size());
    turn = turn.substr(0, turn.find(t.turn_end));
    const ChatParse r = ft::serve::parse_chat_output(turn, ft::serve::detect_chat_format(tmpl));
    ASSERT_EQ(r.tool_calls.size(), 2u) << t.file << ": " << turn;
    EXPECT_EQ(r.tool_calls[0]["name"], "get_weather") << t.file;
    // Compared as unordered objects: Gemma's template prints arguments sorted.
    auto args_of = [](const ojson& j) { return nlohmann::json::parse(j.dump()); };
    EXPECT_EQ(nlohmann::json::parse(r.tool_calls[0]["arguments"].get<std::string>()),
              args_of(messages[1]["tool_calls"][0]["function"]["arguments"]))
        << t.file;
    EXPECT_EQ(r.tool_calls[1]["name"], "search") << t.file;
    EXPECT_EQ(nlohmann::json::parse(r.tool_calls[1]["arguments"].get<std::string>()),
              args_of(messages[1]["tool_calls"][1]["function"]["arguments"]))
        << t.file << ": " << turn;
    EXPECT_EQ(r.content, "") << t.file;
  }
}

}  // namespace
