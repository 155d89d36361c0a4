#include "serve/metrics.h"

#include <fmt/format.h>

namespace ft::serve {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cum);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

namespace {
// TTFT spans a tiny model's milliseconds to a long prompt's seconds; inter-token latency
// is shorter (decode steps), so its buckets start lower.
std::vector<double> ttft_bounds() { return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}; }
std::vector<double> itl_bounds() { return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}; }
std::vector<double> request_bounds() { return {0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300}; }

void counter(std::string& out, const char* name, const char* help, uint64_t v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
}
void gauge(std::string& out, const char* name, const char* help, int64_t v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
}
}  // namespace

Metrics::Metrics() : ttft_(ttft_bounds()), itl_(itl_bounds()), request_s_(request_bounds()) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
}
void Metrics::add_prompt_tokens(int64_t n, int64_t cached) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n);
  cached_tokens_ += static_cast<uint64_t>(cached);
}
void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  generated_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::count_cancelled() {
  std::lock_guard<std::mutex> lk(mu_);
  ++cancelled_;
}
void Metrics::count_rejected() {
  std::lock_guard<std::mutex> lk(mu_);
  ++rejected_;
}
void Metrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  ttft_.observe(s);
}
void Metrics::observe_itl(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  itl_.observe(s);
}
void Metrics::observe_request_seconds(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  request_s_.observe(s);
}

std::string Metrics::render(const EngineGauges& g) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  out += "# HELP ft_requests_total HTTP requests answered, by endpoint and status code\n"
         "# TYPE ft_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += fmt::format("ft_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  counter(out, "ft_prompt_tokens_total", "prompt tokens of admitted generations", prompt_tokens_);
  counter(out, "ft_prompt_tokens_cached_total", "prompt tokens reused from the KV cache", cached_tokens_);
  counter(out, "ft_generated_tokens_total", "tokens generated", generated_tokens_);
  counter(out, "ft_requests_cancelled_total", "generations stopped because the client went away", cancelled_);
  counter(out, "ft_requests_rejected_total", "requests refused with 503 because the queue was full", rejected_);
  gauge(out, "ft_requests_running", "generations admitted and not finished", g.running);
  gauge(out, "ft_requests_waiting", "generations queued", g.waiting);
  gauge(out, "ft_kv_cache_tokens_used", "tokens held in the KV cache", g.kv_used);
  gauge(out, "ft_kv_cache_tokens_capacity", "KV cache size in tokens", g.kv_capacity);
  gauge(out, "ft_kv_page_size_tokens", "token positions per KV page (0: no paged cache)", g.kv_page_size);
  gauge(out, "ft_kv_pages_total", "KV pages in the pool", g.kv_pages_total);
  gauge(out, "ft_kv_pages_used", "KV pages held by running requests", g.kv_pages_used);
  gauge(out, "ft_kv_pages_shared", "KV pages held by two or more requests (a shared prompt prefix)", g.kv_pages_shared);
  gauge(out, "ft_kv_pages_free", "KV pages not held by any request", g.kv_pages_free);
  gauge(out, "ft_kv_pages_cached", "free KV pages still holding a reusable prompt prefix", g.kv_pages_cached);
  if (g.moe.present) {
    const double hit = g.moe.routes ? static_cast<double>(g.moe.hits) / static_cast<double>(g.moe.routes) : 0.0;
    gauge(out, "ft_moe_cache_slots", "GPU expert slots of the MoE cache", g.moe.slots);
    gauge(out, "ft_moe_cache_slots_used", "GPU expert slots holding an expert", g.moe.slots_used);
    counter(out, "ft_moe_cache_routes_total", "decode token-expert routes served by the MoE cache", g.moe.routes);
    counter(out, "ft_moe_cache_hits_total", "decode routes whose expert was already in a GPU slot", g.moe.hits);
    counter(out, "ft_moe_cache_misses_fetched_total", "experts copied from host memory into a GPU slot",
            g.moe.misses_fetched);
    counter(out, "ft_moe_cache_misses_cpu_total", "decode routes computed on the CPU (cpu / hybrid backends)",
            g.moe.misses_cpu);
    out += fmt::format("# HELP ft_moe_cache_hit_ratio decode routes that hit, over all routes since load\n"
                       "# TYPE ft_moe_cache_hit_ratio gauge\nft_moe_cache_hit_ratio {:.6f}\n",
                       hit);
  }
  ttft_.render("ft_time_to_first_token_seconds", "time from admission to the first generated token", out);
  itl_.render("ft_inter_token_latency_seconds", "time between consecutive generated tokens", out);
  request_s_.render("ft_request_duration_seconds", "time from admission to the end of a generation", out);
  return out;
}

}  // namespace ft::serve
