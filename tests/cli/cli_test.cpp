// The `ft` binary's contract for people: --help works, bad input gives exit code 2 and
// one line naming the file/tensor/option, never a signal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf_writer.h"
#include "subprocess.h"

namespace fs = std::filesystem;
using ft::test::run_command;

namespace {

const std::string kFt = std::string(FT_BINARY_DIR) + "/ft";

std::string tmp_dir() {
  fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "cli";
  fs::create_directories(d);
  return d.string();
}

ft::test::RunResult ft_run(const std::string& args) {
  // ctest runs tests in parallel processes: keep their capture files apart.
  static int n = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string tag = std::string(info ? info->name() : "x") + "-" + std::to_string(getpid()) +
                          "-" + std::to_string(n++);
  return run_command(kFt + " " + args, tmp_dir() + "/run-" + tag);
}

void expect_user_error(const ft::test::RunResult& r, const std::string& must_mention) {
  EXPECT_EQ(r.signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos)
      << "stderr does not mention '" << must_mention << "': " << r.err;
  // one line of error (a usage hint may follow for option errors)
  EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
}

}  // namespace

TEST(Cli, HelpWorks) {
  for (std::string sub : {"", "inspect ", "generate "}) {
    auto r = ft_run(sub + "--help");
    EXPECT_EQ(r.exit_code, 0) << sub << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
}

TEST(Cli, UnknownOptionIsExit2) {
  auto r = ft_run("inspect --no-such-option x.gguf");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
}

TEST(Cli, MissingFile) { expect_user_error(ft_run("inspect /nonexistent/m.gguf"), "/nonexistent/m.gguf"); }

TEST(Cli, GenerateMissingModel) {
  expect_user_error(ft_run("generate --model /nonexistent/m.gguf --prompt-tokens 1,2"),
                    "/nonexistent/m.gguf");
}

// Every committed broken file: exit code 2, the file named, never a crash.
TEST(Cli, BrokenFilesCorpus) {
  const fs::path dir = fs::path(FT_SOURCE_DIR) / "tests" / "data" / "bad";
  ASSERT_TRUE(fs::exists(dir)) << dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    ++n;
    const auto r = ft_run("inspect " + e.path().string());
    SCOPED_TRACE(e.path().filename().string());
    expect_user_error(r, e.path().filename().string());
  }
  EXPECT_GE(n, 5);
}

// Scale-rule violations, built here with the writer: each refused by name.
namespace {

std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }
std::vector<uint8_t> f32s(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string write_model(const std::string& name, const std::function<void(ft::gguf::Writer&)>& add) {
  ft::gguf::Writer w;
  w.set_string("general.architecture", "qwen3moe");
  add(w);
  const std::string path = tmp_dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

}  // namespace

TEST(Cli, ScaleRuleViolations) {
  using ft::GgmlType;
  struct Case {
    std::string name, must_mention;
    std::function<void(ft::gguf::Writer&)> add;
  };
  const int64_t nv = 64 / 64 * 36;  // bytes of one NVFP4 row of 64
  std::vector<Case> cases = {
      {"scale-next-to-bf16", "blk.0.attn_q.scale",
       [](ft::gguf::Writer& w) {
         w.add_tensor("blk.0.attn_q.weight", GgmlType::BF16, {64, 2}, zeros(64 * 2 * 2));
         w.add_tensor("blk.0.attn_q.scale", GgmlType::F32, {1}, f32s({0.01f}));
       }},
      {"scale-without-weight", "blk.0.ffn_up.scale",
       [](ft::gguf::Writer& w) { w.add_tensor("blk.0.ffn_up.scale", GgmlType::F32, {1}, f32s({0.5f})); }},
      {"merged-gate-up-scale", "ffn_gate_up_exps.scale",
       [nv](ft::gguf::Writer& w) {
         w.add_tensor("blk.0.ffn_gate_up_exps.weight", GgmlType::NVFP4, {64, 2, 2}, zeros(nv * 4));
         w.add_tensor("blk.0.ffn_gate_up_exps.scale", GgmlType::F32, {2}, f32s({0.5f, 0.25f}));
       }},
      {"expert-scale-wrong-shape", "blk.0.ffn_down_exps.scale",
       [nv](ft::gguf::Writer& w) {
         w.add_tensor("blk.0.ffn_down_exps.weight", GgmlType::NVFP4, {64, 2, 4}, zeros(nv * 8));
         w.add_tensor("blk.0.ffn_down_exps.scale", GgmlType::F32, {1}, f32s({0.5f}));
       }},
      {"scale-f16", "blk.0.attn_k.scale",
       [nv](ft::gguf::Writer& w) {
         w.add_tensor("blk.0.attn_k.weight", GgmlType::NVFP4, {64, 2}, zeros(nv * 2));
         w.add_tensor("blk.0.attn_k.scale", GgmlType::F16, {1}, zeros(2));
       }},
      {"router-scale-non-gemma", "blk.0.ffn_gate_inp.scale",
       [](ft::gguf::Writer& w) {
         w.add_tensor("blk.0.ffn_gate_inp.weight", GgmlType::F32, {64, 4}, zeros(64 * 4 * 4));
         w.add_tensor("blk.0.ffn_gate_inp.scale", GgmlType::F32, {64}, zeros(64 * 4));
       }},
      {"tied-output-scale", "output.scale",
       [nv](ft::gguf::Writer& w) {
         w.add_tensor("token_embd.weight", GgmlType::NVFP4, {64, 8}, zeros(nv * 8));
         w.add_tensor("output.scale", GgmlType::F32, {1}, f32s({0.5f}));
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = write_model(c.name, c.add);
    expect_user_error(ft_run("inspect " + path), c.must_mention);
  }
  // And the accepted case: NVFP4 + scale + input_scale, per-expert bank.
  const auto ok = write_model("scales-ok", [nv](ft::gguf::Writer& w) {
    w.add_tensor("blk.0.attn_q.weight", GgmlType::NVFP4, {64, 2}, zeros(nv * 2));
    w.add_tensor("blk.0.attn_q.scale", GgmlType::F32, {1}, f32s({0.01f}));
    w.add_tensor("blk.0.attn_q.input_scale", GgmlType::F32, {1}, f32s({0.02f}));
    w.add_tensor("blk.0.ffn_up_exps.weight", GgmlType::NVFP4, {64, 2, 3}, zeros(nv * 6));
    w.add_tensor("blk.0.ffn_up_exps.scale", GgmlType::F32, {3}, f32s({0.1f, 0.001f, 1e-4f}));
  });
  auto r = ft_run("inspect " + ok);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("check_scales: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.01"), std::string::npos) << r.out;
}

// A file's strings need not be UTF-8 nor printable: `ft inspect` prints them (control bytes escaped) and
// `--json` writes valid JSON (invalid bytes as U+FFFD) -- it was an "internal error" (json's type_error), exit 3.
TEST(Cli, InspectPrintsStringsThatAreNotUtf8) {
  ft::gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "bad\xff\xc3name");
  w.set_string("general.description", std::string("nul\0inside", 10));
  w.add_tensor("t", ft::GgmlType::F32, {4}, std::vector<uint8_t>(16, 0));
  const std::string path = tmp_dir() + "/not_utf8_" + std::to_string(getpid()) + ".gguf";
  w.write(path);
  auto r = ft_run("inspect --json " + path);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bad\xef\xbf\xbd\xef\xbf\xbdname"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nul\\\\x00inside"), std::string::npos) << r.out;
  r = ft_run("inspect " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nul\\x00inside"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\0'), std::string::npos);
  fs::remove(path);
}
