// Robustness of the HTTP API against what a client may send: a valid request of every POST endpoint, each field
// it reads set, mutated -- a node replaced by an edge value of another type, removed, wrapped in an array or an
// object, an array element repeated -- must get a 2xx or a 4xx with an error body that is JSON (an event stream for
// a streamed 2xx), never a 500, a dropped connection or a hang, and the server keeps answering. Deterministic
// seeds; FT_SERVE_MUTANTS=N raises the mutants an endpoint (default 60) for a long run.
//
// The cases ServerErrors names one by one (tests/serve/server_errors_test.cpp) say which 4xx a client gets;
// this one says that nothing a client sends reaches the "internal error" path.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "../json_mutate.h"
#include "../mutants.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

using ojson = nlohmann::ordered_json;

struct Seed {
  const char* path;
  ojson body;
};

// Every POST endpoint with the fields its handler reads (api_*.cpp), small generation lengths.
std::vector<Seed> seeds() {
  const ojson tools = ojson::array({{{"type", "function"},
                                     {"function",
                                      {{"name", "get_weather"},
                                       {"description", "weather of a city"},
                                       {"parameters",
                                        {{"type", "object"},
                                         {"properties", {{"city", {{"type", "string"}}}}},
                                         {"required", {"city"}}}}}}}});
  const ojson chat_messages = ojson::array(
      {{{"role", "system"}, {"content", "Be brief."}},
       {{"role", "user"}, {"content", ojson::array({{{"type", "text"}, {"text", "And God said"}}})}},
       {{"role", "assistant"},
        {"content", ""},
        {"reasoning_content", "think"},
        {"tool_calls", ojson::array({{{"id", "call_1"},
                                      {"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Ur\"}"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}},
       {{"role", "user"}, {"content", "and then?"}}});
  const ojson anthropic_messages = ojson::array(
      {{{"role", "user"}, {"content", "And God said"}},
       {{"role", "assistant"},
        {"content", ojson::array({{{"type", "thinking"}, {"thinking", "hm"}, {"signature", "s"}},
                                  {{"type", "text"}, {"text", "Let me look."}},
                                  {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"},
                                   {"input", {{"city", "Ur"}}}}})}},
       {{"role", "user"},
        {"content", ojson::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
                                  {{"type", "text"}, {"text", "and then?"}}})}}});
  const ojson anthropic_tools = ojson::array(
      {{{"name", "get_weather"},
        {"description", "weather of a city"},
        {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}});
  std::vector<Seed> s;
  s.push_back({"/completion",
               {{"prompt", "And God said"}, {"n_predict", 3}, {"temperature", 0}, {"top_k", 5}, {"top_p", 0.9},
                {"min_p", 0.1}, {"seed", 7}, {"repeat_penalty", 1.1}, {"stop", {"\n"}}, {"stream", false},
                {"n_probs", 2}, {"cache_prompt", true}, {"ignore_eos", true}, {"return_tokens", true},
                {"id_slot", -1}}});
  s.push_back({"/v1/completions",
               {{"model", "tiny"}, {"prompt", {"And God said"}}, {"max_tokens", 3}, {"temperature", 0.5},
                {"logprobs", 2}, {"echo", false}, {"stop", "\n"}, {"seed", 1}, {"n", 1}, {"stream", false},
                {"stream_options", {{"include_usage", true}}}}});
  s.push_back({"/v1/chat/completions",
               {{"model", "tiny"}, {"messages", chat_messages}, {"tools", tools}, {"tool_choice", "auto"},
                {"max_tokens", 3}, {"max_completion_tokens", 3}, {"temperature", 0}, {"logprobs", true},
                {"top_logprobs", 2}, {"stop", {"\n\n"}}, {"stream", false},
                {"stream_options", {{"include_usage", true}}},
                {"chat_template_kwargs", {{"enable_thinking", false}}}}});
  s.push_back({"/v1/messages",
               {{"model", "tiny"}, {"max_tokens", 3}, {"system", ojson::array({{{"type", "text"}, {"text", "Be brief."}}})},
                {"messages", anthropic_messages}, {"tools", anthropic_tools}, {"temperature", 0},
                {"stop_sequences", {"\n"}}, {"thinking", {{"type", "enabled"}}}, {"stream", false}}});
  s.push_back({"/v1/messages/count_tokens",
               {{"model", "tiny"}, {"system", "Be brief."}, {"messages", anthropic_messages}, {"tools", anthropic_tools}}});
  s.push_back({"/tokenize", {{"content", "And God said"}, {"add_special", true}, {"parse_special", true},
                             {"with_pieces", true}}});
  s.push_back({"/detokenize", {{"tokens", {1, 2, 3}}}});
  return s;
}

// Values that mean something to the handlers, beside json_mutate's edges of each type.
const std::vector<ojson>& request_values() {
  static const std::vector<ojson> v = {"<tool_call>", "</think>", "<|im_start|>", "{{ raise_exception('x') }}",
                                       "system", "user", "assistant", "tool", "function", "text", "tool_use",
                                       "tool_result", "enabled", "auto", "none",
                                       ojson::object({{"role", "user"}, {"content", "hi"}})};
  return v;
}

// A reply a client may get: a response at all, no 5xx, JSON errors, no "internal error" even inside a stream.
void expect_clean(const JsonReply& r, const std::string& path, const std::string& body) {
  const std::string what = "POST " + path + " " + body.substr(0, 600);
  ASSERT_NE(r.status, 0) << "no response: " << what;
  EXPECT_LT(r.status, 500) << what << "\n-> " << r.raw.substr(0, 400);
  EXPECT_EQ(r.raw.find("internal error"), std::string::npos) << what << "\n-> " << r.raw.substr(0, 400);
  const bool stream = r.content_type.find("text/event-stream") != std::string::npos;
  if (r.status >= 400) {
    EXPECT_FALSE(stream) << what;
    EXPECT_TRUE(r.body.is_object() && (r.body.contains("error") || r.body.contains("type"))) << what << "\n-> "
                                                                                          << r.raw.substr(0, 400);
  } else if (!stream) {
    EXPECT_TRUE(r.body.is_object()) << what << "\n-> " << r.raw.substr(0, 400);
  }
}

TEST(ServerFuzz, MutatedRequestsGetA2xxOrA4xx) {
  ServeSetup setup;
  setup.n_ctx = 512;
  TestServer s(setup);
  const int n = mutant_count("FT_SERVE_MUTANTS", 60);
  int n2xx = 0, n4xx = 0;
  for (const Seed& seed : seeds()) {
    // The seed itself is a valid request.
    const JsonReply base = post_json(s, seed.path, seed.body.dump());
    EXPECT_EQ(base.status, 200) << seed.path << " " << base.raw.substr(0, 400);
    std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(seed.path)));
    for (int i = 0; i < n; ++i) {
      ojson body = seed.body;
      const int k = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int m = 0; m < k; ++m) json_mutate(body, rng, request_values());
      // Half the generating requests streamed: the SSE paths parse the same fields.
      if (body.is_object() && body.contains("stream") && (i & 1)) body["stream"] = true;
      const std::string text = body.dump(-1, ' ', false, ojson::error_handler_t::replace);
      const JsonReply r = post_json(s, seed.path, text);
      expect_clean(r, seed.path, text);
      if (::testing::Test::HasFatalFailure()) return;
      (r.status < 300 ? n2xx : n4xx) += 1;
    }
  }
  std::printf("mutants: %d answered 2xx, %d 4xx\n", n2xx, n4xx);
  EXPECT_GT(n2xx, 0);
  EXPECT_GT(n4xx, 0);
  EXPECT_EQ(post_json(s, "/completion", ojson{{"prompt", "And God said"}, {"n_predict", 2}}.dump()).status, 200);
}

// Bodies that are not what any handler expects: bytes, truncations and nesting, on every endpoint.
TEST(ServerFuzz, RawBodiesGet4xx) {
  TestServer s;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::string> bodies = {"",
                                           "\xff\xfe",
                                           "{\"prompt\": \"\xc3\"}",
                                           "{\"prompt\": \"\\ud800\"}",
                                           "{\"messages\": [{\"role\": \"user\", \"content\": \"\\udfff\"}]}",
                                           "{\"prompt\": 1e999}",
                                           "{\"a\": 1, \"a\": 2}",
                                           "null",
                                           "\"text\"",
                                           deep,
                                           "{\"x\": " + deep + "}"};
  for (const Seed& seed : seeds())
    for (const std::string& b : bodies) {
      const JsonReply r = post_json(s, seed.path, b);
      ASSERT_NE(r.status, 0) << seed.path;
      EXPECT_LT(r.status, 500) << seed.path << " " << b.substr(0, 80) << " -> " << r.raw.substr(0, 300);
      EXPECT_EQ(r.raw.find("internal error"), std::string::npos) << seed.path << " " << r.raw.substr(0, 300);
    }
  EXPECT_EQ(post_json(s, "/completion", ojson{{"prompt", "And God said"}, {"n_predict", 2}}.dump()).status, 200);
}

}  // namespace
}  // namespace ft::test
