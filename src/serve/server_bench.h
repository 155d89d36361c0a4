// A load generator for a running server (`ft bench-serve`): N concurrent clients send
// streamed llama-server /completion requests with random token-id prompts of a fixed
// length and a fixed number of output tokens (ignore_eos), and it reports throughput,
// time to first token and inter-token latency percentiles as the clients saw them.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace ft::serve {

struct BenchServeOptions {
  std::string host = "127.0.0.1";
  int port = 1919;
  std::string api_key;
  int clients = 4;         // concurrent connections
  int requests = 32;       // in total
  int prompt_tokens = 128;
  int max_tokens = 64;
  uint64_t seed = 1;       // prompts are random ids from this seed
  int timeout_s = 600;     // per request
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;  // milliseconds
  int64_t n = 0;
};

struct BenchServeResult {
  int ok = 0, rejected = 0, failed = 0;  // rejected: 503
  double wall_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  double output_tok_s = 0;  // output tokens / wall time, all clients together
  double requests_s = 0;
  Percentiles ttft, itl, e2e;
  std::string first_error;
};

// Throws ft::Error when the server cannot be reached or is not ready.
BenchServeResult run_bench_serve(const BenchServeOptions& o);
std::string format_bench_serve(const BenchServeOptions& o, const BenchServeResult& r);
nlohmann::json bench_serve_json(const BenchServeOptions& o, const BenchServeResult& r);

}  // namespace ft::serve
