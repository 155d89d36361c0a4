// The scheduler seen through HTTP: a client that hangs up mid-stream stops its generation
// at once, a full queue answers 503, concurrent clients all get complete and correct
// answers, /health reports loading, /metrics is well-formed Prometheus text.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server_test_util.h"

namespace ft::test {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Polls `cond` for up to 10 s.
bool eventually(const std::function<bool()>& cond) {
  for (int i = 0; i < 1000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ServerScheduler, DisconnectCancelsTheGeneration) {
  ServeSetup setup;
  setup.sleep_ms = 5;  // 1000 tokens would take 5 s
  setup.n_ctx = 1100;
  TestServer s(setup);
  int frames_seen = 0;
  post_stream(s, "/completion",
              json{{"prompt", {1, 2, 3}}, {"n_predict", 1000}, {"ignore_eos", true}, {"temperature", 0}, {"stream", true}},
              [&](const std::string& buf) {
                frames_seen = static_cast<int>(parse_sse(buf.substr(0, buf.rfind("\n\n") + 2)).size());
                return frames_seen < 3;  // hang up after three tokens
              });
  EXPECT_GE(frames_seen, 3);
  // The next request is served as soon as the worker notices: well before the 5 s the
  // abandoned generation would have taken (the bound leaves room for a loaded CI machine).
  const auto t0 = clock_type::now();
  const auto r = post_json(s, "/completion", json{{"prompt", {7, 8}}, {"n_predict", 2}, {"ignore_eos", true}});
  const double waited = seconds_since(t0);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(waited, 1.5);
  const std::string m = get_metrics(s);
  EXPECT_EQ(metric_value(m, "ft_requests_cancelled_total"), 1);
  // 2 tokens for the second request; the first stopped within a few tokens of the hang-up.
  EXPECT_LT(metric_value(m, "ft_generated_tokens_total"), 2 + 20);
}

TEST(ServerScheduler, FullQueueAnswers503) {
  ServeSetup setup;
  setup.sleep_ms = 5;
  setup.max_running = 1;
  setup.max_queue = 1;
  setup.n_ctx = 1100;  // the first request runs until hung up
  TestServer s(setup);
  std::atomic<bool> hang_up{false};
  std::atomic<int> a_frames{0};
  std::thread a([&] {
    post_stream(s, "/completion",
                json{{"prompt", {1, 2}}, {"n_predict", 1000}, {"ignore_eos", true}, {"stream", true}},
                [&](const std::string&) {
                  ++a_frames;
                  return !hang_up.load();
                });
  });
  ASSERT_TRUE(eventually([&] { return a_frames.load() > 0; }));
  JsonReply b;
  std::thread tb([&] { b = post_json(s, "/completion", json{{"prompt", {3, 4}}, {"n_predict", 2}}); });
  ASSERT_TRUE(eventually([&] { return metric_value(get_metrics(s), "ft_requests_waiting") == 1; }));
  // One running, one waiting: the third is refused with a clear 503.
  const auto c = post_json(s, "/completion", json{{"prompt", {5, 6}}, {"n_predict", 2}});
  EXPECT_EQ(c.status, 503) << c.raw;
  EXPECT_NE(c.body["error"]["message"].get<std::string>().find("full"), std::string::npos) << c.raw;
  EXPECT_EQ(metric_value(get_metrics(s), "ft_requests_rejected_total"), 1);
  hang_up = true;
  a.join();
  tb.join();
  EXPECT_EQ(b.status, 200) << b.raw;
  EXPECT_EQ(b.body["tokens_predicted"], 2);
}

TEST(ServerScheduler, ConcurrentClientsGetCorrectAnswers) {
  ServeSetup setup;
  setup.max_running = 2;
  setup.max_queue = 8;
  TestServer s(setup);
  constexpr int kClients = 8;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kClients; ++i) prompts.push_back({10 + i, 20 + 2 * i, 30 + 3 * i});
  std::vector<json> got(kClients);
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i)
    ts.emplace_back([&, i] {
      const json req = {{"prompt", prompts[i]}, {"n_predict", 8}, {"temperature", 0},
                        {"ignore_eos", true}, {"return_tokens", true}};
      if (i % 2 == 0) {
        got[i] = post_json(s, "/completion", req).body["tokens"];
      } else {
        // Streamed: the tokens of the frames, in order.
        json sreq = req;
        sreq["stream"] = true;
        json toks = json::array();
        for (const auto& f : parse_sse(post_stream(s, "/completion", sreq))) {
          const json d = json::parse(f.data);
          if (d["stop"] == false) toks.push_back(d["tokens"][0]);
        }
        got[i] = toks;
      }
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i], json(engine_greedy(prompts[i], 8))) << "client " << i;
}

TEST(ServerScheduler, HealthReportsLoadingThenOk) {
  ServeSetup setup;
  setup.ready = false;
  TestServer s(setup);
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body)["status"], "loading model");
  s.server().set_progress(0.5);
  EXPECT_DOUBLE_EQ(json::parse(c.Get("/health")->body)["progress"].get<double>(), 0.5);
  // Generation endpoints wait for the model too.
  const auto r = post_json(s, "/completion", json{{"prompt", {1}}});
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("loading"), std::string::npos);
  s.make_ready();
  h = c.Get("/health");
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  EXPECT_EQ(post_json(s, "/completion", json{{"prompt", {1}}, {"n_predict", 1}}).status, 200);
}

TEST(ServerScheduler, MetricsAreWellFormedPrometheusText) {
  TestServer s;
  for (int i = 0; i < 3; ++i)
    post_json(s, "/completion", json{{"prompt", {1, 2, 3 + i}}, {"n_predict", 5}, {"ignore_eos", true}});
  post_json(s, "/completion", std::string("{"));
  auto c = s.client();
  auto res = c.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const std::string text = res->body;

  // Parsed by hand (std::regex trips GCC 12's maybe-uninitialized warning under ASan).
  auto is_name_char = [](char ch, bool first) {
    return std::isalpha(static_cast<unsigned char>(ch)) || ch == '_' || ch == ':' ||
           (!first && std::isdigit(static_cast<unsigned char>(ch)));
  };
  auto read_name = [&](const std::string& line, size_t at) {
    size_t e = at;
    while (e < line.size() && is_name_char(line[e], e == at)) ++e;
    return line.substr(at, e - at);
  };
  std::map<std::string, std::string> types;
  std::map<std::string, std::vector<double>> buckets;
  size_t pos = 0;
  int n_samples = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    ASSERT_NE(end, std::string::npos) << "the text must end with a newline";
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = read_name(line, 7);
      EXPECT_FALSE(name.empty()) << line;
      EXPECT_GT(line.size(), 7 + name.size() + 1) << "HELP without text: " << line;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = read_name(line, 7);
      const std::string type = line.substr(std::min(line.size(), 7 + name.size() + 1));
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      types[name] = type;
      continue;
    }
    // name{label="value",...} number
    const std::string full = read_name(line, 0);
    ASSERT_FALSE(full.empty()) << "not a sample line: " << line;
    size_t at = full.size();
    if (at < line.size() && line[at] == '{') {
      const size_t close = line.find('}', at);
      ASSERT_NE(close, std::string::npos) << line;
      for (size_t q = at + 1; q < close;) {  // label="value"(,label="value")*
        const std::string label = read_name(line, q);
        ASSERT_FALSE(label.empty()) << line;
        q += label.size();
        ASSERT_EQ(line.compare(q, 2, "=\""), 0) << line;
        const size_t vend = line.find('"', q + 2);
        ASSERT_LT(vend, close) << line;
        q = vend + 1;
        if (q < close) {
          ASSERT_EQ(line[q], ',') << line;
          ++q;
        }
      }
      at = close + 1;
    }
    ASSERT_LT(at, line.size()) << line;
    ASSERT_EQ(line[at], ' ') << line;
    const std::string value = line.substr(at + 1);
    char* vend = nullptr;
    const double v = value == "+Inf" ? INFINITY : std::strtod(value.c_str(), &vend);
    if (value != "+Inf") {
      ASSERT_TRUE(!value.empty() && *vend == '\0') << "bad value: " << line;
    }
    ++n_samples;
    std::string name = full;
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!types.count(name) && name.size() > strlen(suffix) &&
          name.compare(name.size() - strlen(suffix), strlen(suffix), suffix) == 0)
        name = name.substr(0, name.size() - strlen(suffix));
    EXPECT_TRUE(types.count(name)) << "no TYPE before " << line;
    if (full.size() > 7 && full.compare(full.size() - 7, 7, "_bucket") == 0) buckets[name].push_back(v);
  }
  EXPECT_GT(n_samples, 20);
  for (const char* h : {"ft_time_to_first_token_seconds", "ft_inter_token_latency_seconds"}) {
    ASSERT_EQ(types[h], "histogram") << h;
    const auto& b = buckets[h];
    ASSERT_FALSE(b.empty());
    for (size_t i = 1; i < b.size(); ++i) EXPECT_LE(b[i - 1], b[i]) << h << ": buckets are cumulative";
    EXPECT_EQ(b.back(), metric_value(text, std::string(h) + "_count"));
  }
  EXPECT_EQ(metric_value(text, "ft_time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(metric_value(text, "ft_inter_token_latency_seconds_count"), 3 * 4);
  EXPECT_EQ(metric_value(text, "ft_generated_tokens_total"), 15);
  EXPECT_EQ(metric_value(text, "ft_requests_total{endpoint=\"/completion\",status=\"200\"}"), 3);
  EXPECT_EQ(metric_value(text, "ft_requests_total{endpoint=\"/completion\",status=\"400\"}"), 1);
  EXPECT_EQ(metric_value(text, "ft_kv_cache_tokens_capacity"), 256);
  // Continuous batching: a finished request's KV pages are free at once (tokens used counts
  // the running requests' only); 4 sequences x 256 / 16 pages in the pool.
  EXPECT_EQ(metric_value(text, "ft_kv_cache_tokens_used"), 0);
  EXPECT_EQ(metric_value(text, "ft_kv_pages_total"), 4 * 256 / 16);
  EXPECT_EQ(metric_value(text, "ft_kv_pages_used"), 0);
  EXPECT_EQ(metric_value(text, "ft_kv_pages_free"), 4 * 256 / 16);
}

}  // namespace
}  // namespace ft::test
