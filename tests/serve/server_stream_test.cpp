// OpenAI and Anthropic endpoints, plain and streamed: response shapes, SSE framing
// (`data:` frames, [DONE], the usage chunk; Anthropic's event sequence), and that the
// streamed pieces add up to the non-streamed answer.
#include <gtest/gtest.h>

#include <string>

#include "server_test_util.h"

namespace ft::test {
namespace {

const json kChat = {{"model", "tiny"},
                    {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi there"}}}},
                    {"temperature", 0},
                    {"max_tokens", 8},
                    {"ignore_eos", true}};

TEST(ServerStream, ChatCompletionShape) {
  TestServer s;
  const auto r = post_json(s, "/v1/chat/completions", kChat);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["model"], "tiny");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& ch = r.body["choices"][0];
  EXPECT_EQ(ch["index"], 0);
  EXPECT_EQ(ch["message"]["role"], "assistant");
  EXPECT_TRUE(ch["message"]["content"].is_string());
  EXPECT_EQ(ch["finish_reason"], "length");
  const json& u = r.body["usage"];
  EXPECT_EQ(u["completion_tokens"], 8);
  EXPECT_EQ(u["total_tokens"].get<int>(), u["prompt_tokens"].get<int>() + 8);
  EXPECT_TRUE(u["prompt_tokens_details"]["cached_tokens"].is_number());
  // The prompt is the ChatML rendering (the tiny model has no template), with the
  // assistant turn opened.
  const auto t = post_json(s, "/tokenize", json{{"content",
                                                 "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi "
                                                 "there<|im_end|>\n<|im_start|>assistant\n"},
                                                {"add_special", true}});
  EXPECT_EQ(u["prompt_tokens"], t.body["tokens"].size());
}

TEST(ServerStream, ChatStreamFramingAndUsageChunk) {
  TestServer s;
  const auto plain = post_json(s, "/v1/chat/completions", kChat);
  json req = kChat;
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  const std::string body = post_stream(s, "/v1/chat/completions", req);
  const auto frames = parse_sse(body);
  ASSERT_GE(frames.size(), 4u) << body;
  EXPECT_EQ(frames.back().data, "[DONE]");
  const json first = json::parse(frames[0].data);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string id = first["id"];
  for (size_t i = 0; i + 2 < frames.size(); ++i) {
    const json c = json::parse(frames[i].data);
    EXPECT_EQ(c["id"], id);
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (i + 3 < frames.size()) {
      EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    }
  }
  // The chunk before the usage chunk carries finish_reason; the usage chunk has no choices.
  const json fin = json::parse(frames[frames.size() - 3].data);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(frames[frames.size() - 2].data);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 8);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], plain.body["usage"]["prompt_tokens"]);
  EXPECT_EQ(text, plain.body["choices"][0]["message"]["content"]);

  // Without include_usage there is no usage chunk.
  req.erase("stream_options");
  const auto frames2 = parse_sse(post_stream(s, "/v1/chat/completions", req));
  for (const auto& f : frames2)
    if (f.data != "[DONE]") {
      EXPECT_FALSE(json::parse(f.data).contains("usage"));
    }
}

TEST(ServerStream, CompletionsPlainAndStreamed) {
  TestServer s;
  const json req = {{"model", "tiny"}, {"prompt", "Once upon"}, {"max_tokens", 6}, {"temperature", 0},
                    {"ignore_eos", true}, {"logprobs", 2}};
  const auto r = post_json(s, "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "text_completion");
  const json& ch = r.body["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "length");
  EXPECT_EQ(ch["logprobs"]["tokens"].size(), 6u);
  // Legacy logprobs key the alternatives by token text (two byte tokens that are not
  // UTF-8 on their own may share one), so up to 2; greedy chose the best of them.
  for (size_t i = 0; i < 6; ++i) {
    const json& top = ch["logprobs"]["top_logprobs"][i];
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 2u);
    double best = -1e30;
    for (const auto& [k, v] : top.items()) best = std::max(best, v.get<double>());
    EXPECT_DOUBLE_EQ(best, ch["logprobs"]["token_logprobs"][i].get<double>());
  }
  json sreq = req;
  sreq["stream"] = true;
  const auto frames = parse_sse(post_stream(s, "/v1/completions", sreq));
  ASSERT_GE(frames.size(), 2u);
  EXPECT_EQ(frames.back().data, "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < frames.size(); ++i) text += json::parse(frames[i].data)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, ch["text"]);
  EXPECT_EQ(json::parse(frames[frames.size() - 2].data)["choices"][0]["finish_reason"], "length");
}

TEST(ServerStream, ChatLogprobs) {
  TestServer s;
  json req = kChat;
  req["logprobs"] = true;
  req["top_logprobs"] = 3;
  const auto r = post_json(s, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& lp = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 8u);
  for (const auto& e : lp) {
    EXPECT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);  // greedy picks the best
    EXPECT_TRUE(e["bytes"].is_array());
  }
}

TEST(ServerStream, ModelsList) {
  TestServer s;
  auto c = s.client();
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["meta"]["n_ctx"], 256);
}

const json kMessages = {{"model", "tiny"},
                        {"system", "Be brief."},
                        {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi there"}}}}}}},
                        {"max_tokens", 6},
                        {"temperature", 0},
                        {"ignore_eos", true}};

TEST(ServerStream, AnthropicMessages) {
  TestServer s;
  const auto r = post_json(s, "/v1/messages", kMessages);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["type"], "message");
  EXPECT_EQ(r.body["role"], "assistant");
  EXPECT_EQ(r.body["stop_reason"], "max_tokens");
  EXPECT_EQ(r.body["usage"]["output_tokens"], 6);
  ASSERT_EQ(r.body["content"].size(), 1u);
  EXPECT_EQ(r.body["content"][0]["type"], "text");
  // The system prompt and the text blocks render as the OpenAI form does.
  const auto o = post_json(s, "/v1/chat/completions", kChat);
  EXPECT_EQ(r.body["usage"]["input_tokens"], o.body["usage"]["prompt_tokens"]);
  const auto n = post_json(s, "/v1/messages/count_tokens", json{{"model", "tiny"}, {"system", "Be brief."},
                                                                {"messages", kMessages["messages"]}});
  EXPECT_EQ(n.body["input_tokens"], r.body["usage"]["input_tokens"]);
}

TEST(ServerStream, AnthropicEventSequence) {
  TestServer s;
  const auto plain = post_json(s, "/v1/messages", kMessages);
  json req = kMessages;
  req["stream"] = true;
  const auto frames = parse_sse(post_stream(s, "/v1/messages", req));
  ASSERT_GE(frames.size(), 5u);
  std::vector<std::string> kinds;
  std::string text;
  for (const auto& f : frames) {
    const json d = json::parse(f.data);
    EXPECT_EQ(d["type"], f.event);  // the event name repeats the data's type
    kinds.push_back(f.event);
    if (f.event == "content_block_delta") text += d["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(kinds.front(), "message_start");
  EXPECT_EQ(kinds[1], "content_block_start");
  EXPECT_EQ(kinds[kinds.size() - 3], "content_block_stop");
  EXPECT_EQ(kinds[kinds.size() - 2], "message_delta");
  EXPECT_EQ(kinds.back(), "message_stop");
  const json md = json::parse(frames[frames.size() - 2].data);
  EXPECT_EQ(md["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(md["usage"]["output_tokens"], 6);
  EXPECT_EQ(text, plain.body["content"][0]["text"]);
}

TEST(ServerStream, AnthropicStopSequence) {
  TestServer s;
  json req = kMessages;
  req["max_tokens"] = 20;
  const auto full = post_json(s, "/v1/messages", req);
  const std::string text = full.body["content"][0]["text"];
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(3, 2);
  req["stop_sequences"] = {stop};
  const auto cut = post_json(s, "/v1/messages", req);
  EXPECT_EQ(cut.body["stop_reason"], "stop_sequence");
  EXPECT_EQ(cut.body["stop_sequence"], stop);
  EXPECT_EQ(cut.body["content"][0]["text"], text.substr(0, text.find(stop)));
}

}  // namespace
}  // namespace ft::test
