// A tool schema reaches the chat template in the client's key order (llama.cpp and vLLM
// render `tools | tojson` as sent; nlohmann::json would sort the keys): the prompt the
// model is fed, recorded under the runner, holds the schema as the request spelt it, through
// /v1/chat/completions and through Anthropic's /v1/messages.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "server_test_util.h"

namespace ft::test {
namespace {

// Forwards to the real runner and keeps every token it is fed since the last reset().
class RecordingRunner : public engine::Runner {
 public:
  RecordingRunner(std::unique_ptr<engine::Runner> r, std::vector<int32_t>* fed, std::mutex* mu)
      : r_(std::move(r)), fed_(fed), mu_(mu) {}
  const float* eval(const int32_t* t, int64_t n, bool all) override {
    record(t, n);
    return r_->eval(t, n, all);
  }
  int32_t eval_argmax(const int32_t* t, int64_t n) override {
    record(t, n);
    return r_->eval_argmax(t, n);
  }
  int32_t eval_sample(const int32_t* t, int64_t n, engine::Sampler& s) override {
    record(t, n);
    return r_->eval_sample(t, n, s);
  }
  void reset() override {
    std::lock_guard<std::mutex> lk(*mu_);
    fed_->clear();
    r_->reset();
  }
  int64_t n_past() const override { return r_->n_past(); }
  int64_t n_ctx() const override { return r_->n_ctx(); }
  int64_t n_vocab() const override { return r_->n_vocab(); }
  std::string describe() const override { return "recording " + r_->describe(); }

 private:
  void record(const int32_t* t, int64_t n) {
    std::lock_guard<std::mutex> lk(*mu_);
    fed_->insert(fed_->end(), t, t + n);
  }
  std::unique_ptr<engine::Runner> r_;
  std::vector<int32_t>* fed_;
  std::mutex* mu_;
};

std::string qwen3_template() {
  std::ifstream f(std::string(FT_SOURCE_DIR) + "/tests/data/templates/Qwen-Qwen3-0.6B.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The prompt a server fed its runner for one request (status 200 asserted).
std::string prompt_fed(const std::string& path, const std::string& body) {
  std::vector<int32_t> fed;
  std::mutex mu;
  const Tokenizer* tok = nullptr;
  ServeSetup setup;
  setup.chat_template = qwen3_template();
  setup.n_ctx = 1024;
  setup.max_running = 1;
  setup.wrap = [&](std::unique_ptr<engine::Runner> r, const Tokenizer& t) -> std::unique_ptr<engine::Runner> {
    tok = &t;
    return std::make_unique<RecordingRunner>(std::move(r), &fed, &mu);
  };
  TestServer s(setup);
  EXPECT_NE(tok, nullptr);
  if (tok == nullptr) return "";
  const auto r = post_json(s, path, body);
  EXPECT_EQ(r.status, 200) << r.raw;
  std::lock_guard<std::mutex> lk(mu);
  return tok->decode(fed, /*special=*/true);
}

TEST(ApiChat, ToolSchemaKeepsTheClientsKeyOrder) {
  ASSERT_FALSE(qwen3_template().empty());
  // Keys deliberately not in sorted order, at every level.
  const std::string body = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "description": "a city"}}},
      "description": "Weather of a city"}}],
    "max_tokens": 1, "temperature": 0})";
  const std::string prompt = prompt_fed("/v1/chat/completions", body);
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", )"
                        R"("required": ["city"], "properties": {"city": {"type": "string", "description": "a city"}}}, )"
                        R"("description": "Weather of a city"}})"),
            std::string::npos)
      << prompt;
  // nlohmann::json's order, which the template used to get.
  EXPECT_EQ(prompt.find(R"({"function": {"description")"), std::string::npos) << prompt;
}

// Anthropic's /v1/messages: the tool becomes {type, function: {name, description,
// parameters}} in that order, its input_schema (the parameters) in the client's order.
TEST(ApiChat, AnthropicToolSchemaKeepsTheClientsKeyOrder) {
  ASSERT_FALSE(qwen3_template().empty());
  const std::string body = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"name": "get_weather", "input_schema":
      {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "description": "a city"}}},
      "description": "Weather of a city"}],
    "max_tokens": 1, "temperature": 0})";
  const std::string prompt = prompt_fed("/v1/messages", body);
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather of a )"
                        R"(city", "parameters": {"type": "object", "required": ["city"], "properties": {"city": )"
                        R"({"type": "string", "description": "a city"}}}}})"),
            std::string::npos)
      << prompt;
  EXPECT_EQ(prompt.find(R"({"function": {"description")"), std::string::npos) << prompt;
}

}  // namespace
}  // namespace ft::test
