#include "serve/server_bench.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"

namespace ft::serve {

using nlohmann::json;

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0, clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  double s = 0;
  for (double x : v) s += x;
  p.mean = s / static_cast<double>(v.size());
  return p;
}

httplib::Headers auth(const BenchServeOptions& o) {
  if (o.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + o.api_key}};
}

struct Sample {
  bool ok = false;
  int status = 0;
  std::string error;
  int64_t tokens = 0;
  double ttft_ms = 0, e2e_ms = 0;
  std::vector<double> itl_ms;
};

Sample one_request(const BenchServeOptions& o, const std::vector<int32_t>& prompt) {
  httplib::Client c(o.host, o.port);
  c.set_read_timeout(o.timeout_s, 0);
  const json body = {{"prompt", prompt},       {"n_predict", o.max_tokens}, {"ignore_eos", true},
                     {"temperature", 0},       {"cache_prompt", false},     {"stream", true}};
  Sample s;
  std::string buf;
  const auto t0 = clock_type::now();
  auto t_prev = t0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/completion";
  req.headers = auth(o);
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    buf.append(d, n);
    // Each complete `data: {...}\n\n` frame with a token is one arrival.
    size_t end;
    while ((end = buf.find("\n\n")) != std::string::npos) {
      const std::string frame = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (frame.rfind("data: ", 0) != 0) continue;
      const json j = json::parse(frame.substr(6), nullptr, false);
      if (j.is_discarded() || j.value("stop", false)) continue;
      const auto t = clock_type::now();
      if (s.tokens == 0)
        s.ttft_ms = ms_since(t0, t);
      else
        s.itl_ms.push_back(ms_since(t_prev, t));
      t_prev = t;
      ++s.tokens;
    }
    return true;
  };
  auto res = c.send(req);
  s.e2e_ms = ms_since(t0, clock_type::now());
  if (!res) {
    s.error = httplib::to_string(res.error());
    return s;
  }
  s.status = res->status;
  s.ok = res->status == 200 && s.tokens == o.max_tokens;
  if (!s.ok) s.error = fmt::format("HTTP {}: {} tokens of {} {}", res->status, s.tokens, o.max_tokens, buf);
  return s;
}

}  // namespace

BenchServeResult run_bench_serve(const BenchServeOptions& o) {
  if (o.clients < 1 || o.requests < 1 || o.prompt_tokens < 1 || o.max_tokens < 1)
    fail("bench-serve: --clients, --requests, --prompt-tokens and --max-tokens must be >= 1");
  // The vocabulary size bounds the random prompt ids.
  httplib::Client probe(o.host, o.port);
  auto models = probe.Get("/v1/models", auth(o));
  if (!models) fail("bench-serve: no server at {}:{} ({})", o.host, o.port, httplib::to_string(models.error()));
  const json mj = json::parse(models->body, nullptr, false);
  if (models->status != 200 || mj.is_discarded() || !mj.contains("data") || mj["data"].empty() ||
      !mj["data"][0].contains("meta"))
    fail("bench-serve: {}:{} is not ready (GET /v1/models: HTTP {})", o.host, o.port, models->status);
  const int64_t n_vocab = mj["data"][0]["meta"].value("n_vocab", int64_t{0});
  if (n_vocab <= 0) fail("bench-serve: the server reports no vocabulary size");

  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.requests));
  std::mt19937_64 rng(o.seed);
  for (auto& p : prompts)
    for (int i = 0; i < o.prompt_tokens; ++i) p.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)));

  std::vector<Sample> samples(prompts.size());
  std::atomic<int> next{0};
  const auto t0 = clock_type::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < o.clients; ++c)
    ts.emplace_back([&] {
      for (int i; (i = next++) < o.requests;) samples[static_cast<size_t>(i)] = one_request(o, prompts[static_cast<size_t>(i)]);
    });
  for (auto& t : ts) t.join();

  BenchServeResult r;
  r.wall_s = ms_since(t0, clock_type::now()) / 1e3;
  std::vector<double> ttft, itl, e2e;
  for (const auto& s : samples) {
    if (s.ok) {
      ++r.ok;
      r.prompt_tokens += o.prompt_tokens;
      ttft.push_back(s.ttft_ms);
      e2e.push_back(s.e2e_ms);
      itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
    } else if (s.status == 503) {
      ++r.rejected;
    } else {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = s.error;
    }
    r.output_tokens += s.tokens;
  }
  r.output_tok_s = r.wall_s > 0 ? static_cast<double>(r.output_tokens) / r.wall_s : 0;
  r.requests_s = r.wall_s > 0 ? static_cast<double>(r.ok) / r.wall_s : 0;
  r.ttft = percentiles(ttft);
  r.itl = percentiles(itl);
  r.e2e = percentiles(e2e);
  return r;
}

std::string format_bench_serve(const BenchServeOptions& o, const BenchServeResult& r) {
  std::string s = fmt::format(
      "clients {} | requests {} ok, {} rejected (503), {} failed | prompt {} tokens, output {} tokens\n"
      "wall {:.2f} s | output {:.1f} tok/s | {:.2f} requests/s\n",
      o.clients, r.ok, r.rejected, r.failed, o.prompt_tokens, o.max_tokens, r.wall_s, r.output_tok_s, r.requests_s);
  auto row = [&](const char* name, const Percentiles& p) {
    s += fmt::format("{:<10} p50 {:9.2f} ms  p90 {:9.2f} ms  p99 {:9.2f} ms  mean {:9.2f} ms  (n {})\n", name, p.p50,
                     p.p90, p.p99, p.mean, p.n);
  };
  row("TTFT", r.ttft);
  row("ITL", r.itl);
  row("request", r.e2e);
  if (!r.first_error.empty()) s += "first error: " + r.first_error + "\n";
  return s;
}

json bench_serve_json(const BenchServeOptions& o, const BenchServeResult& r) {
  auto pj = [](const Percentiles& p) {
    return json{{"p50_ms", p.p50}, {"p90_ms", p.p90}, {"p99_ms", p.p99}, {"mean_ms", p.mean}, {"n", p.n}};
  };
  return {{"clients", o.clients},         {"prompt_tokens", o.prompt_tokens}, {"max_tokens", o.max_tokens},
          {"ok", r.ok},                   {"rejected", r.rejected},           {"failed", r.failed},
          {"wall_s", r.wall_s},           {"output_tokens", r.output_tokens}, {"output_tok_s", r.output_tok_s},
          {"requests_s", r.requests_s},   {"ttft", pj(r.ttft)},               {"itl", pj(r.itl)},
          {"request", pj(r.e2e)},         {"first_error", r.first_error}};
}

}  // namespace ft::serve
