// `ft shell --model` driven through stdin on a tiny byte-BPE model (CPU, greedy): each reply
// is what `ft generate` gives for the conversation rendered with the model's chat template
// (tokenizer.chat_template of the file) -- the first turn, the same turn again after /reset, and
// a second turn carrying the history -- and /exit, Ctrl-D and unknown commands behave.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "serve/chat_template.h"
#include "subprocess.h"
#include "testgen/model_gen.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kFt = std::string(FT_BINARY_DIR) + "/ft";

std::string dir() {
  fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "cli-shell" / std::to_string(getpid());
  fs::create_directories(d);
  return d.string();
}

ft::test::RunResult sh(const std::string& cmd) {
  static int n = 0;
  std::string sub = "(";  // (built in steps: GCC 12's -Wrestrict misfires on "(" + cmd)
  sub += cmd;
  sub += ")";
  return ft::test::run_command(sub, dir() + "/run-" + std::to_string(n++));
}

const std::string& model() {
  static std::string p;
  if (p.empty()) {
    auto spec = ft::testgen::preset("tiny", ft::testgen::Arch::kQwen3);
    spec.bpe_vocab = true;
    p = dir() + "/bpe.gguf";
    ft::testgen::generate_model(spec, p, "", "");
  }
  return p;
}

const std::string kOpts = " --temperature 0 --max-tokens 6 --threads 1 --device cpu";

// The reply ft generate gives to `messages` (rendered as the shell renders it): its tokens up
// to the first end-of-generation token, decoded as the shell streams them.
std::string expected_reply(const json& messages) {
  auto file = ft::gguf::File::open(model());
  auto tok = ft::Tokenizer::from_gguf(*file);
  auto text = [&](int32_t id) { return id >= 0 ? tok->token_text(id) : std::string(); };
  const std::string bos = text(tok->bos_id());
  const std::string tmpl = file->get_string("tokenizer.chat_template").value_or("");
  EXPECT_FALSE(tmpl.empty());
  std::string prompt = ft::serve::render_chat(tmpl, messages, json(), true, bos,
                                              text(tok->eos_id()), json::object());
  if (tok->add_bos() && !bos.empty() && prompt.rfind(bos, 0) == 0) prompt.erase(0, bos.size());
  const std::vector<int32_t> ids = tok->encode(prompt, true, true);
  std::string list;
  for (int32_t id : ids) {
    if (!list.empty()) list += ',';
    list += std::to_string(id);
  }
  const auto r = sh(kFt + " generate --model " + model() + " --json --prompt-tokens " + list + kOpts);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ft::Tokenizer::StreamDecoder dec(*tok);
  std::string out;
  for (int32_t id : j["tokens"].get<std::vector<int32_t>>()) {
    if (tok->is_eog(id)) break;
    out += dec.feed(id);
  }
  return out + dec.flush();
}

}  // namespace

TEST(Shell, LocalModelMultiTurnResetExit) {
  const std::string in = dir() + "/in.txt";
  std::ofstream(in) << "hello there\n/reset\n\nhello there\n/bogus\nand then?\n/exit\nnever read\n";
  const auto r = sh(kFt + " shell --model " + model() + kOpts + " < " + in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string r1 = expected_reply(json::array({{{"role", "user"}, {"content", "hello there"}}}));
  const std::string r3 = expected_reply(json::array({{{"role", "user"}, {"content", "hello there"}},
                                                     {{"role", "assistant"}, {"content", r1}},
                                                     {{"role", "user"}, {"content", "and then?"}}}));
  EXPECT_EQ(r.out, r1 + "\n" + r1 + "\n" + r3 + "\n");
  EXPECT_NE(r.err.find("(conversation cleared)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown command /bogus"), std::string::npos) << r.err;
}

TEST(Shell, EndOfInputQuits) {
  const auto r = sh("printf 'hi' | " + kFt + " shell --model " + model() + kOpts);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected_reply(json::array({{{"role", "user"}, {"content", "hi"}}})) + "\n");
}

TEST(Shell, BadUsageIsExit2) {
  EXPECT_EQ(sh(kFt + " shell </dev/null").exit_code, 2);
  EXPECT_EQ(sh(kFt + " shell --model " + model() + " --url http://127.0.0.1:1 </dev/null").exit_code, 2);
  const auto r = sh(kFt + " shell --url http://127.0.0.1:1 </dev/null");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot reach"), std::string::npos) << r.err;
}

// --url: the same conversation through a running `ft serve` (OpenAI chat API, streamed) gives
// the local replies (same CPU engine, same template, greedy), /reset included.
TEST(Shell, RemoteServerMatchesLocal) {
  const std::string log = dir() + "/serve.log", pid = dir() + "/serve.pid";
  ASSERT_EQ(std::system((kFt + " serve --model " + model() + " --port 0 --device cpu --threads 1 >" + log +
                         " 2>&1 & echo $! >" + pid)
                            .c_str()),
            0);
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {  // up to 30 s for the ready line
    const std::string s = ft::test::slurp(log);
    const size_t at = s.find("ready on http://127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(s.c_str() + at + 26);
    if (port == 0) usleep(100 * 1000);
  }
  const std::string server_pid = ft::test::slurp(pid);
  ASSERT_GT(port, 0) << ft::test::slurp(log);
  const std::string in = dir() + "/in-remote.txt";
  std::ofstream(in) << "hello there\n/reset\nhello there\nand then?\n";
  const auto r = sh(kFt + " shell --url http://127.0.0.1:" + std::to_string(port) +
                    " --temperature 0 --max-tokens 6 < " + in);
  const auto l = sh(kFt + " shell --model " + model() + kOpts + " < " + in);
  const int killed = std::system(("kill " + server_pid).c_str());
  EXPECT_EQ(killed, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, l.out);
  EXPECT_NE(r.err.find("(conversation cleared)"), std::string::npos) << r.err;
}
