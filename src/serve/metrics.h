// Server counters and latency histograms, rendered as Prometheus text (exposition format 0.0.4)
// for GET /metrics. Every method is thread-safe: HTTP handler threads and the scheduler's
// worker update them while a scrape reads them.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ft::serve {

// A cumulative histogram with fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count lines (with HELP and TYPE) for `name`.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// The GPU expert slot cache of an offload-family MoE backend (present: false otherwise).
struct MoeCacheGauges {
  bool present = false;
  int64_t slots = 0, slots_used = 0;
  uint64_t routes = 0, hits = 0, misses_fetched = 0, misses_cpu = 0;  // decode, since load
};

// What the scheduler reports about the engine at scrape time.
struct EngineGauges {
  int64_t running = 0;       // requests admitted and not finished
  int64_t waiting = 0;       // requests queued behind them
  int64_t kv_used = 0;       // tokens held in the KV cache
  int64_t kv_capacity = 0;   // --ctx-size
  // Paged KV cache (batching engine; all 0 otherwise), in pages of kv_page_size tokens.
  int64_t kv_page_size = 0;
  int64_t kv_pages_total = 0, kv_pages_used = 0, kv_pages_shared = 0, kv_pages_free = 0,
          kv_pages_cached = 0;
  MoeCacheGauges moe;  // filled by the server from the runner, not by the scheduler
};

class Metrics {
 public:
  Metrics();

  // One HTTP request answered on `endpoint` with `status`.
  void count_request(const std::string& endpoint, int status);
  void add_prompt_tokens(int64_t n, int64_t cached);
  void add_generated_tokens(int64_t n);
  void count_cancelled();
  void count_rejected();  // 503: queue full
  void observe_ttft(double s);
  void observe_itl(double s);
  void observe_request_seconds(double s);

  std::string render(const EngineGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
  uint64_t cancelled_ = 0, rejected_ = 0;
  Histogram ttft_, itl_, request_s_;
};

}  // namespace ft::serve
