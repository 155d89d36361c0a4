// llama-server's /completion, /tokenize and /detokenize on a tiny model: the greedy tokens
// are ft generate's, stop strings cut the text, prefix reuse is reported and changes no
// token.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "../cli/subprocess.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

TEST(ServerCompletion, GreedyTokenIdsEqualFtGenerate) {
  const std::string ft = std::string(FT_BINARY_DIR) + "/ft";
  ASSERT_TRUE(std::filesystem::exists(ft)) << "build the ft target first: " << ft;
  const auto gen = run_command(ft + " generate --model " + tiny_model_path() +
                                   " --prompt-tokens 5,17,42,7 --max-tokens 12 --temperature 0 --ignore-eos"
                                   " --threads 1 --json",
                               serve_tmp_dir() + "/gen");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const json want = json::parse(gen.out)["tokens"];
  ASSERT_EQ(want.size(), 12u);

  TestServer s;
  // The seed's request body: prompt ids, temperature 0, top_k 1, n_predict.
  const auto r = post_json(s, "/completion",
                           json{{"prompt", {5, 17, 42, 7}}, {"temperature", 0}, {"top_k", 1}, {"n_predict", 12},
                                {"ignore_eos", true}, {"return_tokens", true}, {"cache_prompt", false}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["tokens"], want);
  EXPECT_EQ(r.body["tokens_predicted"], 12);
  EXPECT_EQ(r.body["tokens_evaluated"], 4);
  EXPECT_EQ(r.body["stop_type"], "limit");
  EXPECT_EQ(r.body["stop"], true);
  // The text is the decoded tokens.
  EXPECT_EQ(r.body["content"], json::parse(gen.out)["text"]);
}

TEST(ServerCompletion, TextPromptIsTokenizedWithBos) {
  TestServer s;
  const auto t = post_json(s, "/tokenize", json{{"content", "hello world"}, {"add_special", true}});
  ASSERT_EQ(t.status, 200) << t.raw;
  const json ids = t.body["tokens"];
  ASSERT_FALSE(ids.empty());
  const auto a = post_json(s, "/completion", json{{"prompt", "hello world"}, {"temperature", 0}, {"n_predict", 6},
                                                  {"ignore_eos", true}, {"return_tokens", true}});
  const auto b = post_json(s, "/completion", json{{"prompt", ids}, {"temperature", 0}, {"n_predict", 6},
                                                  {"ignore_eos", true}, {"return_tokens", true}, {"cache_prompt", false}});
  ASSERT_EQ(a.status, 200) << a.raw;
  EXPECT_EQ(a.body["tokens_evaluated"], ids.size());
  EXPECT_EQ(a.body["tokens"], b.body["tokens"]);
}

TEST(ServerCompletion, TokenizeDetokenizeRoundTrip) {
  TestServer s;
  const std::string text = "The quick brown fox, 12 apples.";
  const auto t = post_json(s, "/tokenize", json{{"content", text}});
  ASSERT_EQ(t.status, 200) << t.raw;
  const auto d = post_json(s, "/detokenize", json{{"tokens", t.body["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["content"], text);
  const auto p = post_json(s, "/tokenize", json{{"content", text}, {"with_pieces", true}});
  std::string joined;
  for (const auto& e : p.body["tokens"]) joined += e["piece"].get<std::string>();
  EXPECT_EQ(joined, text);
}

TEST(ServerCompletion, StopStringCutsTheText) {
  TestServer s;
  const auto full = post_json(s, "/completion", json{{"prompt", {1, 2, 3}}, {"temperature", 0}, {"n_predict", 24},
                                                     {"ignore_eos", true}});
  ASSERT_EQ(full.status, 200) << full.raw;
  const std::string text = full.body["content"];
  ASSERT_GE(text.size(), 8u) << text;
  // A stop string from the middle of the greedy text: the reply ends right before it.
  const std::string stop = text.substr(5, 3);
  const size_t at = text.find(stop);
  const auto cut = post_json(s, "/completion", json{{"prompt", {1, 2, 3}}, {"temperature", 0}, {"n_predict", 24},
                                                    {"ignore_eos", true}, {"stop", {stop}}});
  ASSERT_EQ(cut.status, 200) << cut.raw;
  EXPECT_EQ(cut.body["content"], text.substr(0, at));
  EXPECT_EQ(cut.body["stop_type"], "word");
  EXPECT_EQ(cut.body["stopping_word"], stop);
  EXPECT_LT(cut.body["tokens_predicted"].get<int>(), 24);

  // Streaming: the pieces concatenate to the same cut text, and no piece shows the stop.
  const std::string sse = post_stream(s, "/completion", json{{"prompt", {1, 2, 3}}, {"temperature", 0},
                                                            {"n_predict", 24}, {"ignore_eos", true},
                                                            {"stop", {stop}}, {"stream", true}});
  std::string streamed;
  const auto frames = parse_sse(sse);
  ASSERT_FALSE(frames.empty());
  for (const auto& f : frames) streamed += json::parse(f.data)["content"].get<std::string>();
  EXPECT_EQ(streamed, text.substr(0, at));
  EXPECT_EQ(json::parse(frames.back().data)["stop"], true);
  EXPECT_EQ(json::parse(frames.back().data)["stop_type"], "word");
}

TEST(ServerCompletion, PrefixReuseKeepsTheTokens) {
  TestServer s;
  const json base = {{"temperature", 0}, {"n_predict", 4}, {"ignore_eos", true}, {"return_tokens", true}};
  json a = base;
  a["prompt"] = {3, 1, 4, 1, 5};
  const auto r1 = post_json(s, "/completion", a);
  ASSERT_EQ(r1.status, 200) << r1.raw;
  // The next prompt extends the first prompt and its generated tokens (all but the last,
  // which was never fed): the KV of those is reused.
  json ext = json::array({3, 1, 4, 1, 5});
  for (size_t i = 0; i + 1 < r1.body["tokens"].size(); ++i) ext.push_back(r1.body["tokens"][i]);
  ext.push_back(9);
  ext.push_back(2);
  json b = base;
  b["prompt"] = ext;
  const auto r2 = post_json(s, "/completion", b);
  ASSERT_EQ(r2.status, 200) << r2.raw;
  EXPECT_EQ(r2.body["timings"]["cache_n"], 8);  // 5 prompt + 3 fed generated tokens
  b["cache_prompt"] = false;
  const auto r3 = post_json(s, "/completion", b);
  EXPECT_EQ(r3.body["timings"]["cache_n"], 0);
  EXPECT_EQ(r2.body["tokens"], r3.body["tokens"]);
  EXPECT_EQ(r3.body["tokens"], json(engine_greedy(ext.get<std::vector<int32_t>>(), 4)));
  const std::string m = get_metrics(s);
  EXPECT_EQ(metric_value(m, "ft_prompt_tokens_cached_total"), 8);
}

TEST(ServerCompletion, LogprobsAreNormalisedAndRanked) {
  TestServer s;
  const auto r = post_json(s, "/completion", json{{"prompt", {1, 2, 3}}, {"temperature", 0}, {"n_predict", 3},
                                                  {"n_probs", 5}, {"ignore_eos", true}, {"return_tokens", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& probs = r.body["completion_probabilities"];
  ASSERT_EQ(probs.size(), 3u);
  for (size_t i = 0; i < probs.size(); ++i) {
    const json& top = probs[i]["top_logprobs"];
    ASSERT_EQ(top.size(), 5u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(probs[i]["id"], r.body["tokens"][i]);
    EXPECT_EQ(top[0]["id"], probs[i]["id"]);
    EXPECT_FLOAT_EQ(top[0]["logprob"].get<float>(), probs[i]["logprob"].get<float>());
    for (size_t k = 1; k < top.size(); ++k) EXPECT_LE(top[k]["logprob"].get<double>(), top[k - 1]["logprob"].get<double>());
    EXPECT_LT(probs[i]["logprob"].get<double>(), 0.0);
  }
}

TEST(ServerCompletion, SeededSamplingIsReproducible) {
  TestServer s;
  json req = {{"prompt", {4, 5, 6}}, {"temperature", 1.5}, {"top_k", 0}, {"top_p", 1}, {"min_p", 0},
              {"n_predict", 10}, {"ignore_eos", true}, {"return_tokens", true}, {"cache_prompt", false}};
  req["seed"] = 7;
  const auto a = post_json(s, "/completion", req);
  const auto b = post_json(s, "/completion", req);
  req["seed"] = 8;
  const auto c = post_json(s, "/completion", req);
  EXPECT_EQ(a.body["tokens"], b.body["tokens"]);
  EXPECT_NE(a.body["tokens"], c.body["tokens"]);
}

}  // namespace
}  // namespace ft::test
