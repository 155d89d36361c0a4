// --kv-type and --ubatch-size (cli/runner_factory.h): a name outside auto|f32|f16|bf16 is refused by the option
// parser, a forced type on the CPU engine (whose KV cache follows --dtype) is refused naming
// the option, and auto there changes nothing. The GPU side (gemma4 auto with an f16 cache) is
// tests/cuda/gemma4_session_test.cpp's Gemma4KvType.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "subprocess.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;

namespace {

const std::string kFt = std::string(FT_BINARY_DIR) + "/ft";

std::string dir() {
  fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "cli-kv-type" / std::to_string(getpid());
  fs::create_directories(d);
  return d.string();
}

// env: assignments put before the command ("FT_LOG_LEVEL=debug ").
ft::test::RunResult ft_run(const std::string& args, const std::string& env = "") {
  static int n = 0;
  return ft::test::run_command(env + kFt + " " + args, dir() + "/run-" + std::to_string(n++));
}

const std::string& model() {
  static std::string p;
  if (p.empty()) {
    p = dir() + "/tiny.gguf";
    ft::testgen::generate_model(ft::testgen::preset("tiny", ft::testgen::Arch::kLlama), p, "", "");
  }
  return p;
}

std::string generate(const std::string& extra) {
  return "generate --model " + model() + " --device cpu --json --threads 1 --prompt-tokens 1,2,3 --max-tokens 4 " +
         "--temperature 0 --ignore-eos " + extra;
}

}  // namespace

TEST(CliKvType, UnknownTypeIsRefusedNamingTheOption) {
  const auto r = ft_run(generate("--kv-type f8"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("f8"), std::string::npos) << r.err;
}

TEST(CliKvType, ForcedTypeOnTheCpuIsRefusedNamingTheOption) {
  for (const char* t : {"f32", "f16", "bf16"}) {
    const auto r = ft_run(generate(std::string("--kv-type ") + t));
    EXPECT_EQ(r.exit_code, 2) << t << ": " << r.err;
    EXPECT_NE(r.err.find("--kv-type"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--device cuda"), std::string::npos) << r.err;
  }
}

TEST(CliKvType, AutoOnTheCpuIsTheDefault) {
  const auto a = ft_run(generate("--kv-type auto"));
  const auto b = ft_run(generate(""));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ta = nlohmann::json::parse(a.out)["tokens"], tb = nlohmann::json::parse(b.out)["tokens"];
  EXPECT_EQ(ta.size(), 4u);
  EXPECT_EQ(ta, tb);
}

// --ubatch-size (same runner options): a 7-token prompt takes 4 forward passes of up to 2 tokens
// with --ubatch-size 2 and one pass by default (the CPU engine's debug line, engine/session.cpp),
// and the micro-batches give the tokens of one pass; a negative size is refused naming the option.
TEST(CliUbatch, MicroBatchesGiveTheTokensOfOnePass) {
  const std::string cmd = "generate --model " + model() +
                          " --device cpu --json --threads 1 --prompt-tokens 1,2,3,4,5,6,7 --max-tokens 4 "
                          "--temperature 0 --ignore-eos ";
  const auto a = ft_run(cmd + "--ubatch-size 2", "FT_LOG_LEVEL=debug ");
  const auto b = ft_run(cmd, "FT_LOG_LEVEL=debug ");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(a.err.find("cpu eval: 7 tokens, micro-batch 2, forward passes 4"), std::string::npos) << a.err;
  // One pass by default (the micro-batch there is min(512, the context: 256 on the tiny model)).
  EXPECT_NE(b.err.find("cpu eval: 7 tokens, micro-batch 256, forward passes 1"), std::string::npos) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
}

TEST(CliUbatch, NegativeSizeIsRefusedNamingTheOption) {
  const auto r = ft_run(generate("--ubatch-size -5"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--ubatch-size"), std::string::npos) << r.err;
}
