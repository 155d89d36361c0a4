// Requests a client gets wrong: each gets the right 4xx with an OpenAI-style body (or
// Anthropic's on /v1/messages) naming the field, and the server keeps serving.
#include <gtest/gtest.h>

#include <string>

#include "server_test_util.h"

namespace ft::test {
namespace {

void expect_openai_error(const JsonReply& r, int status, const std::string& param, const std::string& words) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  const json& e = r.body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_EQ(e["code"], status);
  if (param.empty())
    EXPECT_TRUE(e["param"].is_null()) << r.raw;
  else
    EXPECT_EQ(e["param"], param) << r.raw;
  EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r.raw;
  EXPECT_NE(r.content_type.find("application/json"), std::string::npos);
}

TEST(ServerErrors, MalformedJsonAndNonObjects) {
  TestServer s;
  for (const char* path : {"/completion", "/v1/completions", "/v1/chat/completions", "/tokenize"}) {
    expect_openai_error(post_json(s, path, std::string("{\"prompt\": [1, 2")), 400, "", "not valid JSON");
    expect_openai_error(post_json(s, path, std::string("[1, 2]")), 400, "", "must be a JSON object");
  }
}

TEST(ServerErrors, WrongTypesAndRangesNameTheField) {
  TestServer s;
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", "ten"}}), 400,
                      "max_tokens", "must be an integer");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"temperature", "hot"}}), 400,
                      "temperature", "must be a number");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"top_p", 1.5}}), 400, "top_p",
                      "must be in [0, 1]");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", -3}}), 400,
                      "max_tokens", "must be in");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"stream", "yes"}}), 400, "stream",
                      "must be a boolean");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"stop", 5}}), 400, "stop",
                      "string or an array of strings");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"n", 2}}), 400, "n", "must be 1");
  expect_openai_error(post_json(s, "/v1/completions", json{{"prompt", "hi"}, {"stop", json(std::vector<std::string>(17, "x"))}}),
                      400, "stop", "at most 16");
  expect_openai_error(post_json(s, "/completion", json{{"prompt", {1, 99999}}}), 400, "prompt", "out of range");
  expect_openai_error(post_json(s, "/completion", json{{"prompt", 42}}), 400, "prompt",
                      "string or an array of token ids");
  expect_openai_error(post_json(s, "/v1/chat/completions", json{{"messages", {{{"content", "no role"}}}}}), 400,
                      "messages", "string 'role'");
  expect_openai_error(post_json(s, "/detokenize", json{{"tokens", {"a"}}}), 400, "tokens", "array of token ids");
}

TEST(ServerErrors, MissingFields) {
  TestServer s;
  expect_openai_error(post_json(s, "/completion", json::object()), 400, "prompt", "'prompt' is required");
  expect_openai_error(post_json(s, "/v1/completions", json{{"model", "tiny"}}), 400, "prompt", "is required");
  expect_openai_error(post_json(s, "/v1/chat/completions", json{{"model", "tiny"}}), 400, "messages", "is required");
  expect_openai_error(post_json(s, "/tokenize", json::object()), 400, "content", "is required");
}

TEST(ServerErrors, PromptLongerThanTheContext) {
  TestServer s;  // n_ctx 256
  json ids = json::array();
  for (int i = 0; i < 300; ++i) ids.push_back(i % 200);
  expect_openai_error(post_json(s, "/completion", json{{"prompt", ids}}), 400, "prompt", "the context holds 256");
  // A huge max_tokens is not an error: generation stops when the context is full.
  const auto r = post_json(s, "/v1/completions", json{{"prompt", {1, 2}}, {"max_tokens", 1000000}, {"temperature", 0},
                                                      {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  // 256 positions of KV; the last token is sampled from the last position's logits and
  // needs none.
  EXPECT_EQ(r.body["usage"]["total_tokens"], 257);
}

TEST(ServerErrors, UnknownModelIs404) {
  TestServer s;
  expect_openai_error(post_json(s, "/v1/chat/completions",
                                json{{"model", "gpt-9"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
                      404, "model", "'gpt-9' does not exist");
  const auto a = post_json(s, "/v1/messages", json{{"model", "claude-x"}, {"max_tokens", 4},
                                                   {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.body["type"], "error");
  EXPECT_EQ(a.body["error"]["type"], "not_found_error");
}

TEST(ServerErrors, HugeBodyIs413) {
  TestServer s;
  const auto r = post_json(s, "/completion", std::string(65u << 20, ' '));
  expect_openai_error(r, 413, "", "larger than 64 MiB");
}

TEST(ServerErrors, UnknownEndpointIs404) {
  TestServer s;
  auto c = s.client();
  auto r = c.Get("/v1/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["code"], 404);
}

TEST(ServerErrors, ApiKey) {
  ServeSetup setup;
  setup.api_key = "sekrit";
  TestServer s(setup);
  const json body = {{"prompt", {1, 2}}, {"n_predict", 2}};
  expect_openai_error(post_json(s, "/completion", body), 401, "", "API key");
  expect_openai_error(post_json(s, "/completion", body, {{"Authorization", "Bearer wrong"}}), 401, "", "API key");
  EXPECT_EQ(post_json(s, "/completion", body, {{"Authorization", "Bearer sekrit"}}).status, 200);
  EXPECT_EQ(post_json(s, "/completion", body, {{"x-api-key", "sekrit"}}).status, 200);
  // Anthropic's clients get Anthropic's error body.
  const auto a = post_json(s, "/v1/messages", json{{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}},
                           {{"x-api-key", "nope"}});
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.body["error"]["type"], "authentication_error");
  // Health and the model list stay public, as in llama-server; metrics do not.
  auto c = s.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 401);
}

TEST(ServerErrors, AnthropicRequiresMaxTokens) {
  TestServer s;
  const auto a = post_json(s, "/v1/messages", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(a.status, 400) << a.raw;
  EXPECT_EQ(a.body["type"], "error");
  EXPECT_EQ(a.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
}

// A content block's field of the wrong type is a 400 naming the block and field (it was json's type_error: a 500).
TEST(ServerErrors, AnthropicBlockFieldsOfTheWrongTypeNameTheBlock) {
  TestServer s;
  const json blocks = json::array({{{"type", "text"}, {"text", "hi"}}, {{"type", "text"}, {"text", 5}}});
  const auto a = post_json(s, "/v1/messages", json{{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", blocks}}}}});
  EXPECT_EQ(a.status, 400) << a.raw;
  EXPECT_EQ(a.body["error"]["type"], "invalid_request_error") << a.raw;
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("messages[0].content[1].text must be a string"),
            std::string::npos) << a.raw;
  const auto t = post_json(s, "/v1/messages", json{{"max_tokens", 2},
                                                   {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                   {"tools", {{{"name", "f"}, {"description", {1}}}}}});
  EXPECT_EQ(t.status, 400) << t.raw;
  EXPECT_NE(t.body["error"]["message"].get<std::string>().find("tools[0].description must be a string"),
            std::string::npos) << t.raw;
}

// A number past a double is a 400 like any invalid JSON (json's out_of_range escaped parse_body: a 500).
TEST(ServerErrors, NumberPastADoubleIs400) {
  TestServer s;
  const auto r = post_json(s, "/completion", std::string("{\"prompt\": \"hi\", \"temperature\": 1e999}"));
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("not valid JSON"), std::string::npos) << r.raw;
}

TEST(ServerErrors, ServerStillAnswersAfterBadRequests) {
  TestServer s;
  for (int i = 0; i < 20; ++i) post_json(s, "/v1/chat/completions", std::string(i % 2 ? "{" : "null"));
  const auto r = post_json(s, "/completion", json{{"prompt", {1}}, {"n_predict", 2}});
  EXPECT_EQ(r.status, 200) << r.raw;
  const std::string m = get_metrics(s);
  EXPECT_EQ(metric_value(m, "ft_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"}"), 20);
}

}  // namespace
}  // namespace ft::test
