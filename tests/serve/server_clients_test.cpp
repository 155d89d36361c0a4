// The official OpenAI and Anthropic npm clients against the server (server_clients_test.mjs):
// models, chat, streaming chat, completions, errors, messages (plain, streamed, counted) and
// tool-call round trips through the Qwen3 template. Needs node and scripts/setup-clients.sh.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "../cli/subprocess.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;

const fs::path kModules = fs::path(FT_SOURCE_DIR) / ".deps/clients/node_modules";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ServerClients, OpenAiAndAnthropicSdks) {
  if (!fs::exists(kModules / "openai") || !fs::exists(kModules / "@anthropic-ai/sdk"))
    GTEST_SKIP() << "the npm clients are missing: run scripts/setup-clients.sh";
  TestServer random_model;
  ServeSetup setup;
  setup.chat_template = read_text(std::string(FT_SOURCE_DIR) + "/tests/data/templates/Qwen-Qwen3-0.6B.jinja");
  ASSERT_FALSE(setup.chat_template.empty());
  setup.n_ctx = 1024;
  setup.wrap = [](std::unique_ptr<engine::Runner> r, const Tokenizer& tok) -> std::unique_ptr<engine::Runner> {
    std::vector<int32_t> script = tok.encode(
        "<think>\nCall the tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}\n</tool_call>",
        false, false);
    script.push_back(tok.eos_id() >= 0 ? tok.eos_id() : script.back());
    return std::make_unique<ScriptedRunner>(std::move(r), std::move(script));
  };
  TestServer scripted(setup);
  const std::string cmd = "timeout 120 node " + std::string(FT_SOURCE_DIR) + "/tests/serve/server_clients_test.mjs " +
                          kModules.string() + " " + std::to_string(random_model.port()) + " " +
                          std::to_string(scripted.port());
  const auto r = run_command(cmd, serve_tmp_dir() + "/clients");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("clients ok"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace ft::test
