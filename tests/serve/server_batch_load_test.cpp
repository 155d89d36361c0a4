// The CPU load criterion of issue 7: 2,000 requests from 32 concurrent clients against the
// continuous-batching scheduler on a tiny model, a third of them streams that hang up at a
// random point. No 5xx (503 from a full queue is deliberate and counted apart), answers to
// prompts that share a prefix are the engine's own greedy tokens, no KV page is held once the
// server is idle (read through /metrics), and a second round leaves resident memory flat.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serve/scheduler.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

// AddressSanitizer keeps freed memory in quarantine (256 MiB), so RSS is not flat there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// Prompts with a common 40-token head (a system prompt), so their first two 16-token pages
// are shared between concurrent requests, and a distinct tail.
std::vector<int32_t> shared_prompt(int k) {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back((i * 37 + 11) % 200);
  for (int i = 0; i < 3 + k % 5; ++i) p.push_back((k * 53 + i * 7) % 200);
  return p;
}

struct RoundResult {
  int done = 0, ok = 0, rejected = 0, server_errors = 0, wrong = 0, hung_up = 0;
  double seconds = 0.0;
};

constexpr int kPrompts = 8, kPredict = 6;

RoundResult load_round(const TestServer& s, int n_requests, int n_clients,
                       const std::vector<std::vector<int32_t>>& want, uint32_t seed) {
  std::atomic<int> next{0}, done{0}, ok{0}, rejected{0}, server_errors{0}, wrong{0}, hung_up{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < n_clients; ++c)
    ts.emplace_back([&, c] {
      std::mt19937 rng(seed + static_cast<uint32_t>(c));
      for (int i; (i = next++) < n_requests;) {
       // A client told 503 (the queue is full) waits a little and sends the request again.
       for (int attempt = 0;; ++attempt) {
        int status = 0;
        switch (i % 3) {
          case 0: {  // plain completion of a shared-prefix prompt: the engine's greedy tokens
            const int k = static_cast<int>(rng() % kPrompts);
            const auto r = post_json(s, "/completion",
                                     json{{"prompt", shared_prompt(k)}, {"n_predict", kPredict}, {"temperature", 0},
                                          {"ignore_eos", true}, {"return_tokens", true}});
            status = r.status;
            if (r.status == 200 && r.body["tokens"] != json(want[k])) ++wrong;
            break;
          }
          case 1: {  // streamed, read to the end
            const json prompt = {static_cast<int>(rng() % 200), static_cast<int>(rng() % 200), i % 200};
            const std::string body = post_stream(
                s, "/completion",
                json{{"prompt", prompt}, {"n_predict", 2 + static_cast<int>(rng() % 8)}, {"ignore_eos", true}, {"stream", true}},
                nullptr, &status);
            if (status == 200) {
              const auto frames = parse_sse(body);
              if (frames.empty() || json::parse(frames.back().data)["stop"] != true) ++wrong;
            }
            break;
          }
          default: {  // streamed, the client hangs up after a random number of bytes
            const size_t cut = 30 + rng() % 300;
            const json prompt = {static_cast<int>(rng() % 200), i % 200};
            post_stream(s, "/completion", json{{"prompt", prompt}, {"n_predict", 48}, {"ignore_eos", true}, {"stream", true}},
                        [&](const std::string& buf) { return buf.size() < cut; }, &status);
            ++hung_up;
          }
        }
        // A hung-up stream has no status on our side (httplib reports the cancel).
        const bool hang_up = i % 3 == 2;
        if (status == 503) {
          ++rejected;
          if (attempt < 5000) {  // (a minute at most)
            std::this_thread::sleep_for(std::chrono::milliseconds(2 + rng() % 10));
            continue;
          }
        } else if (status >= 500 || (status == 0 && !hang_up)) {
          ++server_errors;
        } else if (status == 200 || hang_up) {
          ++ok;
        }
        break;
       }
        ++done;
      }
    });
  for (auto& t : ts) t.join();
  RoundResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.done = done;
  r.ok = ok;
  r.rejected = rejected;
  r.server_errors = server_errors;
  r.wrong = wrong;
  r.hung_up = hung_up;
  return r;
}

// Waits until nothing runs (a hung-up stream ends at the server's next write).
std::string idle_metrics(const TestServer& s) {
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = get_metrics(s);
    if (metric_value(m, "ft_requests_running") == 0 && metric_value(m, "ft_requests_waiting") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return m;
}

TEST(ServerBatchLoad, TwoThousandRequestsFrom32ClientsWithDisconnects) {
  std::vector<std::vector<int32_t>> want;
  for (int k = 0; k < kPrompts; ++k) want.push_back(engine_greedy(shared_prompt(k), kPredict));
  ServeSetup setup;
  setup.max_running = 8;
  setup.max_queue = 16;
  TestServer s(setup);
  const RoundResult a = load_round(s, 2000, 32, want, 1);
  std::string m = idle_metrics(s);
  const int64_t rss1 = rss_kib();
  EXPECT_EQ(a.done, 2000);
  EXPECT_EQ(a.server_errors, 0);
  EXPECT_EQ(a.wrong, 0);
  EXPECT_EQ(a.ok, 2000);  // 32 clients against 8 running + 16 queued: 503s, retried until served
  EXPECT_EQ(metric_value(m, "ft_requests_running"), 0);
  EXPECT_EQ(metric_value(m, "ft_requests_waiting"), 0);
  EXPECT_EQ(metric_value(m, "ft_kv_pages_used"), 0) << "KV pages leaked";
  EXPECT_EQ(metric_value(m, "ft_kv_pages_free"), metric_value(m, "ft_kv_pages_total"));
  // (A hung-up stream may have left before its 503 arrived: the server counts those too.)
  EXPECT_GE(metric_value(m, "ft_requests_rejected_total"), a.rejected);
  EXPECT_GT(metric_value(m, "ft_requests_cancelled_total"), 0);
  EXPECT_GT(metric_value(m, "ft_prompt_tokens_cached_total"), 0);  // shared prefix pages were reused
  std::printf("[ load ] round 1: %d requests (%d ok, %d 503s retried, %d hung up) in %.2f s: %.0f req/s, %.0f generated tok/s\n",
              a.done, a.ok, a.rejected, a.hung_up, a.seconds, a.done / a.seconds,
              metric_value(m, "ft_generated_tokens_total") / a.seconds);

  const double gen1 = metric_value(m, "ft_generated_tokens_total");
  const RoundResult b = load_round(s, 1000, 32, want, 1000);
  m = idle_metrics(s);
  const int64_t rss2 = rss_kib();
  EXPECT_EQ(b.server_errors, 0);
  EXPECT_EQ(b.wrong, 0);
  EXPECT_EQ(metric_value(m, "ft_kv_pages_used"), 0) << "KV pages leaked";
  std::printf("[ load ] round 2: %d requests in %.2f s (%.0f generated tok/s); RSS %lld -> %lld KiB\n", b.done,
              b.seconds, (metric_value(m, "ft_generated_tokens_total") - gen1) / b.seconds,
              static_cast<long long>(rss1), static_cast<long long>(rss2));
  if (!kAsan) {
    EXPECT_LT(rss2 - rss1, 4 * 1024) << "resident memory grew over the second round";
  }
  const auto r = post_json(s, "/completion", json{{"prompt", {1, 2}}, {"n_predict", 3}, {"ignore_eos", true}});
  EXPECT_EQ(r.status, 200);
}

// The scheduler itself over a CPU session (batching on): a 200-token prompt that arrives
// while another job decodes is read 16 tokens a step, and each of those 13 steps also
// carries the running job's next token. Served in turn, the long prompt would have waited
// for the running job's end; read in one piece, it would hold the running job for its whole
// prefill (one step).
void expect_chunked_prefill(int64_t chunk, int64_t want_steps) {
  auto m = model::load_model(tiny_model_path());
  engine::SessionOptions so;
  so.n_ctx = 512;
  so.n_threads = 1;
  engine::Session sess(*m, so);
  serve::Metrics metrics;
  serve::SchedulerOptions o;
  o.max_running = 2;
  o.max_queue = 2;
  o.prefill_chunk = chunk;
  serve::Scheduler sched(sess, nullptr, metrics, o);
  serve::GenRequest a;
  a.prompt = {1, 2, 3};
  a.max_tokens = 400;
  a.ignore_eos = true;
  a.sampling.temperature = 0.0f;
  auto ja = sched.submit(a);
  serve::JobEvent ev;
  ASSERT_TRUE(ja->next(ev));  // a is decoding
  serve::GenRequest b;
  for (int i = 0; i < 200; ++i) b.prompt.push_back((i * 7 + 1) % 200);
  b.max_tokens = 1;
  b.sampling.temperature = 0.0f;
  auto jb = sched.submit(b);
  while (jb->next(ev) && !ev.done) {
  }
  EXPECT_EQ(ev.finish, serve::Finish::kLength);
  const serve::JobStats st = jb->stats();
  EXPECT_EQ(st.n_generated, 1);
  EXPECT_EQ(st.prefill_steps, want_steps);
  EXPECT_EQ(st.decoded_beside_prefill, want_steps) << "a's decode was not in every step of b's prefill";
  ja->cancel();
  while (ja->next(ev) && !ev.done) {
  }
  EXPECT_GT(ja->stats().n_generated, want_steps);
}

TEST(ServerBatchLoad, LongPromptIsPrefilledBetweenDecodeSteps) {
  expect_chunked_prefill(16, 13);
  expect_chunked_prefill(512, 1);
}

// A cancelled job leaves the batch at the next step and its pages are free at once.
TEST(ServerBatchLoad, CancelFreesPagesAtOnce) {
  auto m = model::load_model(tiny_model_path());
  engine::SessionOptions so;
  so.n_ctx = 512;
  so.n_threads = 1;
  engine::Session sess(*m, so);
  serve::Metrics metrics;
  serve::SchedulerOptions o;
  o.max_running = 2;
  serve::Scheduler sched(sess, nullptr, metrics, o);
  serve::GenRequest a;
  for (int i = 0; i < 40; ++i) a.prompt.push_back(i + 1);
  a.max_tokens = 450;
  a.ignore_eos = true;
  auto ja = sched.submit(a);
  serve::JobEvent ev;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ja->next(ev));
  EXPECT_GE(sched.gauges().kv_pages_used, 3);
  ja->cancel();
  while (ja->next(ev) && !ev.done) {
  }
  EXPECT_EQ(ev.finish, serve::Finish::kCancelled);
  for (int i = 0; i < 1000 && sched.gauges().running > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const serve::EngineGauges g = sched.gauges();
  EXPECT_EQ(g.running, 0);
  EXPECT_EQ(g.kv_pages_used, 0);
  EXPECT_EQ(g.kv_pages_free, g.kv_pages_total);
  EXPECT_EQ(g.kv_pages_total, 2 * 512 / 16);
}

}  // namespace
}  // namespace ft::test
