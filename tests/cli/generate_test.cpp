// `ft generate` success paths and its JSON contract, on tiny generated models.
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
  // ctest runs each test in its own process, in parallel: keep their files apart.
  fs::path d = fs::path(FT_BINARY_DIR) / "test-tmp" / "cli-generate" / std::to_string(getpid());
  fs::create_directories(d);
  return d.string();
}

ft::test::RunResult ft_run(const std::string& args) {
  static int n = 0;
  return ft::test::run_command(kFt + " " + args,
                               dir() + "/run-" + std::to_string(getpid()) + "-" + std::to_string(n++));
}

// A tiny qwen3moe with NVFP4 experts and scales, and one with a byte-BPE vocab.
const std::string& model(bool bpe) {
  static std::string paths[2];
  std::string& p = paths[bpe ? 1 : 0];
  if (p.empty()) {
    auto spec = ft::testgen::preset("tiny", ft::testgen::Arch::kQwen3Moe);
    spec.bpe_vocab = bpe;
    spec.set_type(ft::testgen::Role::kExperts, ft::GgmlType::NVFP4);
    p = dir() + (bpe ? "/bpe.gguf" : "/plain.gguf");
    ft::testgen::generate_model(spec, p, "", "");
  }
  return p;
}

nlohmann::json run_json(const std::string& args) {
  const auto r = ft_run("generate --model " + model(false) + " --json --threads 1 " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST(Generate, JsonContract) {
  const auto j = run_json("--prompt-tokens 1,2,3 --max-tokens 7 --temperature 0 --ignore-eos");
  ASSERT_TRUE(j.contains("tokens"));
  EXPECT_EQ(j["tokens"].size(), 7u);
  EXPECT_EQ(j["prompt_tokens"], nlohmann::json::array({1, 2, 3}));
  for (const char* k : {"prefill_tok_s", "decode_tok_s", "decode_first_ms", "prefill_tokens", "decode_tokens"})
    EXPECT_TRUE(j["timings"].contains(k)) << k;
  // 7 tokens: the prompt's argmax and 6 decode steps, the first timed apart.
  EXPECT_EQ(j["timings"]["decode_tokens"], 6);
  EXPECT_GT(j["timings"]["decode_first_ms"].get<double>(), 0.0);
  EXPECT_GT(j["timings"]["decode_tok_s"].get<double>(), 0.0);
  EXPECT_TRUE(j.contains("text"));
}

TEST(Generate, GreedyIsDeterministicAndSeedsMatter) {
  const std::string base = "--prompt-tokens 5,6,7 --max-tokens 12 --ignore-eos ";
  EXPECT_EQ(run_json(base + "--temperature 0")["tokens"], run_json(base + "--temperature 0")["tokens"]);
  const auto a = run_json(base + "--temperature 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 1")["tokens"];
  const auto b = run_json(base + "--temperature 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 1")["tokens"];
  const auto c = run_json(base + "--temperature 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 2")["tokens"];
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Generate, TeacherForcingAndLogitsOut) {
  const std::string lf = dir() + "/logits.json";
  const auto free = run_json("--prompt-tokens 1,2,3 --max-tokens 6 --temperature 0 --ignore-eos");
  // Forcing the model's own greedy continuation reproduces it as tf_tokens.
  std::string forced;
  for (const auto& t : free["tokens"]) {
    if (!forced.empty()) forced.push_back(',');
    forced.append(std::to_string(t.get<int>()));
  }
  const auto tf = run_json("--prompt-tokens 1,2,3 --temperature 0 --force-tokens " + forced +
                           " --logits-out " + lf);
  EXPECT_EQ(tf["tf_tokens"], free["tokens"]);
  const auto logits = nlohmann::json::parse(ft::test::slurp(lf));
  ASSERT_EQ(logits.size(), 256u);
  // argmax of the written logits is the first greedy token
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i].get<double>() > logits[best].get<double>()) best = i;
  EXPECT_EQ(static_cast<int>(best), free["tokens"][0].get<int>());
}

TEST(Generate, TextPromptAndStreaming) {
  const auto r = ft_run("generate --model " + model(true) +
                        " --prompt 'Hello world' --max-tokens 8 --temperature 0 --ignore-eos --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto rj = ft_run("generate --model " + model(true) +
                         " --prompt 'Hello world' --max-tokens 8 --temperature 0 --ignore-eos --threads 1 --json");
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  const auto j = nlohmann::json::parse(rj.out);
  EXPECT_GT(j["prompt_tokens"].size(), 1u);
  // A random-weight model may emit byte tokens that are not valid UTF-8: the stream writes
  // them as they are, JSON replaces them with U+FFFD; with valid text both agree.
  std::string streamed = r.out;
  while (!streamed.empty() && streamed.back() == '\n') streamed.pop_back();
  EXPECT_FALSE(streamed.empty());
  const std::string text = j["text"].get<std::string>();
  if (text.find("\xEF\xBF\xBD") == std::string::npos) {
    EXPECT_EQ(streamed, text);
  }
}

TEST(Generate, DtypesRun) {
  for (const char* dt : {"float32", "bfloat16", "float16"}) {
    const auto j = run_json(std::string("--prompt-tokens 1,2 --max-tokens 3 --temperature 0 --dtype ") + dt);
    EXPECT_EQ(j["tokens"].size(), 3u) << dt;
  }
}

TEST(Generate, BadInputIsExit2) {
  const std::string m = " --model " + model(false);
  struct Case {
    std::string args, mention;
  };
  for (const auto& c : std::vector<Case>{
           {"generate" + m + " --prompt-tokens 1,99999", "99999"},
           {"generate" + m + " --prompt-tokens 1,x", "x"},
           {"generate" + m + " --prompt-tokens 1 --dtype float8", "float8"},
           {"generate" + m + " --prompt-tokens 1 --prompt hi", "prompt"},
           {"generate" + m, "prompt"},
           {"generate" + m + " --prompt hello", "vocab"},  // model without a vocabulary
           {"generate" + m + " --prompt-tokens 1 --device tpu", "tpu"},
           // Sampling options take the server's ranges, NaN refused (CLI::Range let it through).
           {"generate" + m + " --prompt-tokens 1 --temperature nan", "--temperature: nan is not in [0, 100]"},
           {"generate" + m + " --prompt-tokens 1 --top-p 2", "--top-p: 2 is not in [0, 1]"},
           {"generate" + m + " --prompt-tokens 1 --min-p -0.5", "--min-p"},
           {"generate" + m + " --prompt-tokens 1 --top-k -3", "--top-k: -3"},
           {"generate" + m + " --prompt-tokens 1 --repeat-penalty inf", "--repeat-penalty"},
           // Threads bounded (100,000 spawned threads until the run was killed).
           {"generate" + m + " --prompt-tokens 1 --threads 100000", "--threads: 100000 is not in [0, 1024]"},
           {"bench -m " + model(false) + " -t 5000 -p 0 -n 1", "--threads: 5000"},
           // A context past the machine's memory is refused before allocating (was a bare "out of memory").
           {"generate" + m + " --prompt-tokens 1 --ctx-size 99999999999", "the KV cache would take"},
       }) {
    const auto r = ft_run(c.args);
    SCOPED_TRACE(c.args);
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.mention), std::string::npos) << r.err;
  }
}
