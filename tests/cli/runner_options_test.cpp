// The commands that build a runner (generate, serve, bench, shell) take the same --device,
// --dtype, --kv-type and --moe-* options (cli/runner_factory.h add_runner_options).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "subprocess.h"

namespace {

TEST(CliRunnerOptions, EveryRunnerCommandTakesThem) {
  const std::filesystem::path dir = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "cli";
  std::filesystem::create_directories(dir);
  for (const std::string cmd : {"generate", "serve", "bench", "shell"}) {
    const auto r = ft::test::run_command(std::string(FT_BINARY_DIR) + "/ft " + cmd + " --help",
                                         (dir / ("runner-options-" + cmd + "-" + std::to_string(::getpid()))).string());
    ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    for (const char* opt : {"--device", "--dtype", "--kv-type", "--ubatch-size", "--moe-backend", "--moe-cache-size", "--moe-cache-rate",
                            "--moe-hybrid-max-fetch"})
      EXPECT_NE(r.out.find(opt), std::string::npos) << "ft " << cmd << " has no " << opt;
  }
}

}  // namespace
