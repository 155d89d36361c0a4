// ft bench-serve's load generator against an in-process server: every request completes
// with the asked number of tokens, the percentiles are ordered, and a server that cannot
// take the load answers 503s that the report counts apart from failures.
#include <gtest/gtest.h>

#include "serve/server_bench.h"
#include "server_test_util.h"

namespace ft::test {
namespace {

TEST(ServerBench, CountsTokensAndLatencies) {
  TestServer s;
  serve::BenchServeOptions o;
  o.port = s.port();
  o.clients = 3;
  o.requests = 6;
  o.prompt_tokens = 8;
  o.max_tokens = 5;
  const auto r = serve::run_bench_serve(o);
  EXPECT_EQ(r.ok, 6) << r.first_error;
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.output_tokens, 30);
  EXPECT_EQ(r.ttft.n, 6);
  EXPECT_EQ(r.itl.n, 6 * 4);
  EXPECT_LE(r.ttft.p50, r.ttft.p90);
  EXPECT_LE(r.ttft.p90, r.ttft.p99);
  EXPECT_GT(r.output_tok_s, 0);
  EXPECT_NE(serve::format_bench_serve(o, r).find("TTFT"), std::string::npos);
  EXPECT_EQ(metric_value(get_metrics(s), "ft_generated_tokens_total"), 30);
}

TEST(ServerBench, OverloadIsCountedAsRejected) {
  ServeSetup setup;
  setup.sleep_ms = 3;
  setup.max_running = 1;
  setup.max_queue = 0;
  TestServer s(setup);
  serve::BenchServeOptions o;
  o.port = s.port();
  o.clients = 4;
  o.requests = 8;
  o.prompt_tokens = 4;
  o.max_tokens = 20;
  const auto r = serve::run_bench_serve(o);
  EXPECT_EQ(r.failed, 0) << r.first_error;
  EXPECT_EQ(r.ok + r.rejected, 8);
  EXPECT_GT(r.rejected, 0);
  EXPECT_GT(r.ok, 0);
}

TEST(ServerBench, NoServerIsAnError) {
  serve::BenchServeOptions o;
  o.port = 1;  // nothing listens on port 1
  EXPECT_THROW(serve::run_bench_serve(o), ft::Error);
}

}  // namespace
}  // namespace ft::test
