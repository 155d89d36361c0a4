// A bounded load run on loopback: 16 clients send 240 requests (streamed and plain, chat and
// completion) and a third of the streams hang up at a random point. No request may get a
// 5xx, every finished request must be complete, and afterwards the server is idle (nothing
// running or waiting) and still answers.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "server_test_util.h"

namespace ft::test {
namespace {

TEST(ServerLoad, ManyClientsWithRandomDisconnects) {
  ServeSetup setup;
  setup.max_running = 4;
  setup.max_queue = 32;
  TestServer s(setup);
  constexpr int kClients = 16, kRequests = 240;
  std::atomic<int> next{0}, server_errors{0}, incomplete{0}, hung_up{0}, done{0};
  std::vector<std::thread> ts;
  for (int c = 0; c < kClients; ++c)
    ts.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(c));
      for (int i; (i = next++) < kRequests;) {
        const int n_predict = 4 + static_cast<int>(rng() % 12);
        const json prompt = {static_cast<int>(rng() % 200), static_cast<int>(rng() % 200), i % 200};
        switch (i % 3) {
          case 0: {  // plain completion
            const auto r = post_json(s, "/completion", json{{"prompt", prompt}, {"n_predict", n_predict}, {"ignore_eos", true}});
            if (r.status >= 500) ++server_errors;
            if (r.status == 200 && r.body["tokens_predicted"] != n_predict) ++incomplete;
            break;
          }
          case 1: {  // streamed chat, read to the end
            int status = 0;
            const auto frames = parse_sse(post_stream(
                s, "/v1/chat/completions",
                json{{"messages", {{{"role", "user"}, {"content", "hi " + std::to_string(i)}}}},
                     {"max_tokens", n_predict}, {"ignore_eos", true}, {"stream", true}},
                nullptr, &status));
            if (status >= 500) ++server_errors;
            if (status == 200 && (frames.empty() || frames.back().data != "[DONE]")) ++incomplete;
            break;
          }
          default: {  // streamed completion, hung up after a random number of bytes
            const size_t cut = 50 + rng() % 400;
            int status = 0;
            post_stream(s, "/completion",
                        json{{"prompt", prompt}, {"n_predict", 64}, {"ignore_eos", true}, {"stream", true}},
                        [&](const std::string& buf) { return buf.size() < cut; }, &status);
            ++hung_up;
            if (status >= 500) ++server_errors;
          }
        }
        ++done;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), kRequests);
  EXPECT_EQ(server_errors.load(), 0);
  EXPECT_EQ(incomplete.load(), 0);
  EXPECT_EQ(hung_up.load(), kRequests / 3);
  // The last hung-up stream ends when the server's next write fails, a moment after its
  // client left.
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = get_metrics(s);
    if (metric_value(m, "ft_requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(metric_value(m, "ft_requests_running"), 0);
  EXPECT_EQ(metric_value(m, "ft_requests_waiting"), 0);
  EXPECT_GT(metric_value(m, "ft_requests_cancelled_total"), 0);
  EXPECT_EQ(metric_value(m, "ft_requests_rejected_total"), 0);
  const auto r = post_json(s, "/completion", json{{"prompt", {1, 2}}, {"n_predict", 3}, {"ignore_eos", true}});
  EXPECT_EQ(r.status, 200);
}

}  // namespace
}  // namespace ft::test
