#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "core/log.h"
#include "engine/runner.h"
#include "serve/api_error.h"
#include "tokenizer/tokenizer.h"

namespace ft::serve {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// log-softmax of the chosen token and the n best alternatives.
void fill_logprobs(const float* logits, int64_t n_vocab, int32_t chosen, int n_top, JobEvent& ev) {
  float mx = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const double lse = static_cast<double>(mx) + std::log(sum);
  ev.logprob = static_cast<float>(logits[chosen] - lse);
  if (n_top <= 0) return;
  const int64_t k = std::min<int64_t>(n_top, n_vocab);
  std::vector<int32_t> idx(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) idx[i] = static_cast<int32_t>(i);
  // Ties keep the lower id first, as argmax does.
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < k; ++i)
    ev.top.push_back({idx[i], static_cast<float>(logits[idx[i]] - lse)});
}

}  // namespace

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::kNone: return "none";
    case Finish::kEog: return "eog";
    case Finish::kLength: return "length";
    case Finish::kCancelled: return "cancelled";
    case Finish::kError: return "error";
  }
  return "?";
}

bool Job::next(JobEvent& ev) {
  std::unique_lock<std::mutex> lk(mu_);
  if (returned_done_) return false;
  cv_.wait(lk, [&] { return !events_.empty(); });
  ev = std::move(events_.front());
  events_.pop_front();
  if (ev.done) returned_done_ = true;
  return true;
}

void Job::push(JobEvent ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ended_) return;
    if (ev.done) ended_ = true;
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

JobStats Job::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

Scheduler::Scheduler(engine::Runner& runner, const Tokenizer* tok, Metrics& metrics,
                     const SchedulerOptions& o)
    : runner_(runner), tok_(tok), metrics_(metrics), opt_(o), n_ctx_(runner.n_ctx()),
      n_vocab_(runner.n_vocab()) {
  runner_.reset();
  thread_ = std::thread([this] { worker(); });
}

Scheduler::~Scheduler() { stop(); }

std::shared_ptr<Job> Scheduler::submit(GenRequest r) {
  if (r.prompt.empty()) bad_param("prompt", "the prompt is empty (it must give at least one token)");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= n_vocab_)
      bad_param("prompt", "token id {} is out of range [0, {})", id, n_vocab_);
  // One position must stay free for the first generated token's KV.
  if (static_cast<int64_t>(r.prompt.size()) >= n_ctx_)
    bad_param("prompt", "the prompt has {} tokens; the context holds {} (--ctx-size), including the reply",
              r.prompt.size(), n_ctx_);
  auto job = std::make_shared<Job>(std::move(r));
  job->t_submit_ = now_s();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    const int64_t in = static_cast<int64_t>(queue_.size()) + (active_ ? 1 : 0);
    if (in >= static_cast<int64_t>(opt_.max_running) + opt_.max_queue) {
      metrics_.count_rejected();
      throw ApiError(503, fmt::format("the server is full ({} requests running or queued); retry later", in));
    }
    queue_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& j : queue_) j->cancel();
    if (active_) active_->cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Jobs still queued end as cancelled so no handler waits forever.
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& j : queue_) {
    JobEvent ev;
    ev.done = true;
    ev.finish = Finish::kCancelled;
    j->push(std::move(ev));
  }
  queue_.clear();
}

EngineGauges Scheduler::gauges() const {
  EngineGauges g;
  {
    std::lock_guard<std::mutex> lk(mu_);
    g.running = active_ ? 1 : 0;
    g.waiting = static_cast<int64_t>(queue_.size());
  }
  g.kv_used = kv_used_.load();
  g.kv_capacity = n_ctx_;
  return g;
}

void Scheduler::worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      active_ = job;
    }
    try {
      run_job(*job);
    } catch (const std::exception& e) {
      // The runner's state is unknown after a failed eval: start the next job from scratch.
      log::error("serve: generation failed: {}", e.what());
      runner_.reset();
      cached_.clear();
      kv_used_.store(0);
      JobEvent ev;
      ev.done = true;
      ev.finish = Finish::kError;
      ev.error = e.what();
      job->push(std::move(ev));
    }
    std::lock_guard<std::mutex> lk(mu_);
    active_.reset();
  }
}

void Scheduler::run_job(Job& job) {
  const GenRequest& r = job.req_;
  const double t0 = now_s();
  auto finish = [&](Finish f, double t_first, double t_last, int64_t n_gen) {
    {
      std::lock_guard<std::mutex> lk(job.mu_);
      job.stats_.n_generated = n_gen;
      job.stats_.decode_s = n_gen > 0 ? t_last - t_first : 0.0;
    }
    metrics_.add_generated_tokens(n_gen);
    if (f == Finish::kCancelled) metrics_.count_cancelled();
    metrics_.observe_request_seconds(now_s() - job.t_submit_);
    JobEvent ev;
    ev.done = true;
    ev.finish = f;
    job.push(std::move(ev));
  };
  {
    std::lock_guard<std::mutex> lk(job.mu_);
    job.stats_.queue_s = t0 - job.t_submit_;
    job.stats_.n_prompt = static_cast<int64_t>(r.prompt.size());
  }
  if (job.halted()) return finish(job.cancelled() ? Finish::kCancelled : Finish::kLength, 0, 0, 0);

  // Prefix reuse: the runner holds cached_; keep it when the prompt extends it (at least one
  // new token is needed to get logits).
  const std::vector<int32_t>& prompt = r.prompt;
  size_t reuse = 0;
  if (r.cache_prompt && !cached_.empty() && cached_.size() < prompt.size() &&
      runner_.n_past() == static_cast<int64_t>(cached_.size()) &&
      std::equal(cached_.begin(), cached_.end(), prompt.begin()))
    reuse = cached_.size();
  if (reuse == 0) {
    runner_.reset();
    cached_.clear();
  }
  {
    std::lock_guard<std::mutex> lk(job.mu_);
    job.stats_.n_cached = static_cast<int64_t>(reuse);
  }
  metrics_.add_prompt_tokens(static_cast<int64_t>(prompt.size()), static_cast<int64_t>(reuse));

  engine::Sampler sampler(r.sampling);
  for (int32_t id : prompt) sampler.accept(id);
  // As ft generate: greedy without penalties needs only the argmax, other sampling only the
  // sampler (both computed where the logits are); logprobs need the logits themselves.
  const bool need_logits = r.logprobs;
  const bool argmax_only = !need_logits && r.sampling.temperature <= 0.0f && r.sampling.repeat_penalty == 1.0f;
  const float* logits = nullptr;
  int32_t next = -1;
  auto eval = [&](const int32_t* ids, int64_t n, bool last) {
    if (!last)
      runner_.eval(ids, n);  // a prefill chunk: no pick (a sample would consume a draw)
    else if (argmax_only)
      next = runner_.eval_argmax(ids, n);
    else if (!need_logits)
      next = runner_.eval_sample(ids, n, sampler);
    else
      logits = runner_.eval(ids, n);
    cached_.insert(cached_.end(), ids, ids + n);
    kv_used_.store(runner_.n_past());
  };

  // Prefill in chunks so a cancelled job stops between them.
  size_t pos = reuse;
  while (pos < prompt.size()) {
    const size_t n = std::min(prompt.size() - pos, static_cast<size_t>(std::max<int64_t>(1, opt_.prefill_chunk)));
    eval(prompt.data() + pos, static_cast<int64_t>(n), pos + n == prompt.size());
    pos += n;
    if (pos < prompt.size() && job.halted())
      return finish(job.cancelled() ? Finish::kCancelled : Finish::kLength, 0, 0, 0);
  }
  const double t_prompt = now_s();
  {
    std::lock_guard<std::mutex> lk(job.mu_);
    job.stats_.prompt_s = t_prompt - t0;
  }
  if (r.max_tokens == 0) return finish(Finish::kLength, 0, 0, 0);

  double t_first = 0.0, t_prev = 0.0;
  int64_t n_gen = 0;
  for (;;) {
    int32_t id;
    if (!need_logits)
      id = next;
    else if (r.sampling.temperature <= 0.0f && r.sampling.repeat_penalty == 1.0f)
      id = engine::argmax(logits, static_cast<int32_t>(n_vocab_));
    else
      id = sampler.sample(logits, static_cast<int32_t>(n_vocab_));
    JobEvent ev;
    ev.token = id;
    if (need_logits) fill_logprobs(logits, n_vocab_, id, r.n_top_logprobs, ev);
    sampler.accept(id);
    const double t = now_s();
    if (n_gen == 0) {
      t_first = t;
      metrics_.observe_ttft(t - job.t_submit_);
    } else {
      metrics_.observe_itl(t - t_prev);
    }
    t_prev = t;
    ++n_gen;
    job.push(std::move(ev));

    if (!r.ignore_eos && tok_ && tok_->is_eog(id)) return finish(Finish::kEog, t_first, t, n_gen);
    if (r.max_tokens >= 0 && n_gen >= r.max_tokens) return finish(Finish::kLength, t_first, t, n_gen);
    if (runner_.n_past() >= n_ctx_) return finish(Finish::kLength, t_first, t, n_gen);
    if (job.halted()) return finish(job.cancelled() ? Finish::kCancelled : Finish::kLength, t_first, t, n_gen);
    eval(&id, 1, true);
  }
}

}  // namespace ft::serve
