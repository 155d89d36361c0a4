// The committed default model (models/default.gguf, trained on the King James Bible;
// train/README.md) continues a prompt with recognisable text of its domain. The expected
// greedy continuation in exact fp32 was recorded from this build and matches the NVFP4
// checkpoint's PyTorch greedy text on the H200 (train/README.md); a random or broken model
// cannot produce it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "subprocess.h"

namespace fs = std::filesystem;

namespace {

const std::string kFt = std::string(FT_BINARY_DIR) + "/ft";
const std::string kModel = std::string(FT_SOURCE_DIR) + "/models/default.gguf";

ft::test::RunResult ft_run(const std::string& args) {
  fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "cli-default" / std::to_string(getpid());
  fs::create_directories(d);
  return ft::test::run_command(kFt + " " + args, (d / "run").string());
}

}  // namespace

TEST(DefaultModel, ContinuesInItsDomain) {
  ASSERT_TRUE(fs::exists(kModel)) << kModel;
  const auto r = ft_run("generate --model " + kModel +
                        " --prompt \"And God said\" --temperature 0 --max-tokens 24 --dtype float32"
                        " --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string text = j["text"];
  EXPECT_EQ(text, " unto him, Thou shalt not eat bread, nor drink water.\nAnd he said, I will go down with thee:");
}

TEST(DefaultModel, QuantisedActivationsStillWriteText) {
  // The default numerics (Q8 matmul inputs, as llama.cpp's CPU backend) may pick other
  // near-tie tokens, but the text stays in the domain.
  const auto r = ft_run("generate --model " + kModel +
                        " --prompt \"In the beginning\" --temperature 0 --max-tokens 32 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = nlohmann::json::parse(r.out)["text"];
  int hits = 0;
  for (const char* w : {" the ", " of ", " and ", " king", " unto ", " LORD", " thee", " shalt", " said"})
    hits += text.find(w) != std::string::npos;
  EXPECT_GE(hits, 3) << text;
}
