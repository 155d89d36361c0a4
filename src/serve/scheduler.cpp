#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "core/log.h"
#include "engine/batch_runner.h"
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
  if (opt_.batching) batch_ = engine::make_batch_runner(runner_, opt_.max_running, opt_.kv_page_size);
  if (opt_.warmup) batch_ ? batch_->warmup() : runner_.warmup();
  if (batch_) {
    kv_pages_ = batch_->kv_stats();
    log::info("serve: continuous batching: {}", batch_->describe());
  }
  thread_ = std::thread([this] { batch_ ? batch_worker() : worker(); });
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
    const int64_t in = static_cast<int64_t>(queue_.size()) + (active_ ? 1 : 0) + n_running_;
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
    g.running = (active_ ? 1 : 0) + n_running_;
    g.waiting = static_cast<int64_t>(queue_.size());
    if (batch_) {
      g.kv_page_size = kv_pages_.page_size;
      g.kv_pages_total = kv_pages_.total;
      g.kv_pages_used = kv_pages_.used;
      g.kv_pages_shared = kv_pages_.shared;
      g.kv_pages_free = kv_pages_.free;
      g.kv_pages_cached = kv_pages_.cached;
    }
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

void Scheduler::end_job(Job& job, Finish f, double t_first, double t_last, int64_t n_gen) {
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
}

namespace {

// A job in the batch: where its prompt is, its sampler and its timings.
struct Running {
  std::shared_ptr<Job> job;
  int64_t seq = -1;
  std::unique_ptr<engine::Sampler> sampler;
  size_t pos = 0;        // prompt tokens in the KV cache
  int32_t next = -1;     // the token fed at the next step (decoding)
  int64_t n_gen = 0;
  double t0 = 0.0, t_first = 0.0, t_prev = 0.0;
  bool argmax_only = false, need_logits = false;
  bool decoding() const { return pos == job->request().prompt.size(); }
};

}  // namespace

void Scheduler::batch_worker() {
  engine::BatchRunner& br = *batch_;
  const int64_t V = n_vocab_;
  std::vector<Running> run;
  std::vector<engine::BatchItem> items;
  std::vector<size_t> item_of;  // run index of each item
  auto publish_stats = [&] {
    const engine::KvPageStats st = br.kv_stats();
    int64_t held = 0;
    for (const Running& r : run) held += br.n_past(r.seq);
    kv_used_.store(held);
    std::lock_guard<std::mutex> lk(mu_);
    kv_pages_ = st;
    n_running_ = static_cast<int64_t>(run.size());
  };
  // Ends run[i] (its pages are free at once) and drops it from the batch. The stats are
  // published before the client hears the end, so a /metrics read right after a response
  // already counts its pages as free (ASan CI saw the old order's stale figures).
  auto retire = [&](size_t i, Finish f) {
    Running r = std::move(run[i]);
    br.remove_sequence(r.seq);
    run.erase(run.begin() + static_cast<std::ptrdiff_t>(i));
    publish_stats();
    end_job(*r.job, f, r.t_first, r.t_prev, r.n_gen);
  };
  auto halt_finish = [](const Job& j) { return j.cancelled() ? Finish::kCancelled : Finish::kLength; };

  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !run.empty(); });
      if (stopping_) break;
      while (static_cast<int64_t>(run.size() + admitted.size()) < opt_.max_running && !queue_.empty()) {
        admitted.push_back(queue_.front());
        queue_.pop_front();
      }
      n_running_ = static_cast<int64_t>(run.size() + admitted.size());
    }
    const double t_now = now_s();
    for (auto& job : admitted) {
      const GenRequest& r = job->req_;
      {
        std::lock_guard<std::mutex> lk(job->mu_);
        job->stats_.queue_s = t_now - job->t_submit_;
        job->stats_.n_prompt = static_cast<int64_t>(r.prompt.size());
      }
      if (job->halted()) {
        end_job(*job, halt_finish(*job), 0, 0, 0);
        continue;
      }
      Running x;
      x.job = job;
      int64_t n_cached = 0;
      x.seq = br.add_sequence(r.prompt.data(), static_cast<int64_t>(r.prompt.size()), r.cache_prompt, &n_cached);
      x.pos = static_cast<size_t>(n_cached);
      x.t0 = t_now;
      {
        std::lock_guard<std::mutex> lk(job->mu_);
        job->stats_.n_cached = n_cached;
      }
      metrics_.add_prompt_tokens(static_cast<int64_t>(r.prompt.size()), n_cached);
      x.sampler = std::make_unique<engine::Sampler>(r.sampling);
      for (int32_t id : r.prompt) x.sampler->accept(id);
      x.need_logits = r.logprobs;
      x.argmax_only = r.sampling.temperature <= 0.0f && r.sampling.repeat_penalty == 1.0f;
      run.push_back(std::move(x));
    }
    // Cancelled or halted jobs leave before the step.
    for (size_t i = run.size(); i-- > 0;)
      if (run[i].job->halted()) retire(i, halt_finish(*run[i].job));
    if (run.empty()) {
      publish_stats();
      continue;
    }

    // One step: the next token of every decoding job, then prompt chunks, oldest first,
    // within prefill_chunk and the runner's batch size.
    items.clear();
    item_of.clear();
    int64_t budget = br.max_step_tokens();
    for (size_t i = 0; i < run.size(); ++i)
      if (run[i].decoding()) {
        items.push_back({run[i].seq, &run[i].next, 1});
        item_of.push_back(i);
        --budget;
      }
    const auto n_decode = static_cast<int64_t>(items.size());
    int64_t chunk_left = std::max<int64_t>(1, opt_.prefill_chunk);
    for (size_t i = 0; i < run.size() && budget > 0 && chunk_left > 0; ++i) {
      Running& r = run[i];
      if (r.decoding()) continue;
      const auto& prompt = r.job->req_.prompt;
      const int64_t n = std::min({static_cast<int64_t>(prompt.size() - r.pos), budget, chunk_left});
      items.push_back({r.seq, prompt.data() + r.pos, n});
      item_of.push_back(i);
      budget -= n;
      chunk_left -= n;
    }
    const float* logits = nullptr;
    const int32_t* picked = nullptr;  // the runner's argmax per row, when every row is greedy
    bool all_greedy = true;
    for (size_t i : item_of) all_greedy = all_greedy && run[i].argmax_only && !run[i].need_logits;
    br.set_argmax_only(all_greedy);
    try {
      logits = br.step(items);
      picked = br.argmax_rows();
    } catch (const std::exception& e) {
      // A failed step leaves every sequence of it unknown: end them all with the error.
      log::error("serve: generation failed: {}", e.what());
      for (size_t i = run.size(); i-- > 0;) {
        Running& r = run[i];
        br.remove_sequence(r.seq);
        metrics_.add_generated_tokens(r.n_gen);
        metrics_.observe_request_seconds(now_s() - r.job->t_submit_);
        JobEvent ev;
        ev.done = true;
        ev.finish = Finish::kError;
        ev.error = e.what();
        r.job->push(std::move(ev));
      }
      run.clear();
      publish_stats();
      continue;
    }

    // Each item's logits row: nothing for a prompt chunk that is not the last, else pick.
    std::vector<size_t> done;  // run indices that ended, with their reason
    std::vector<Finish> why;
    for (size_t k = 0; k < items.size(); ++k) {
      Running& r = run[item_of[k]];
      const GenRequest& req = r.job->req_;
      if (!r.decoding()) {
        r.pos += static_cast<size_t>(items[k].n);
        {
          std::lock_guard<std::mutex> lk(r.job->mu_);
          ++r.job->stats_.prefill_steps;
          r.job->stats_.decoded_beside_prefill += n_decode;
        }
        if (!r.decoding()) continue;
        const double t = now_s();
        {
          std::lock_guard<std::mutex> lk(r.job->mu_);
          r.job->stats_.prompt_s = t - r.t0;
        }
        if (req.max_tokens == 0) {
          done.push_back(item_of[k]);
          why.push_back(Finish::kLength);
          continue;
        }
      }
      const float* row = logits ? logits + static_cast<int64_t>(k) * V : nullptr;
      const int32_t id = picked          ? picked[k]
                         : r.argmax_only ? engine::argmax(row, static_cast<int32_t>(V))
                                         : r.sampler->sample(row, static_cast<int32_t>(V));
      JobEvent ev;
      ev.token = id;
      if (r.need_logits) fill_logprobs(row, V, id, req.n_top_logprobs, ev);
      r.sampler->accept(id);
      const double t = now_s();
      if (r.n_gen == 0) {
        r.t_first = t;
        metrics_.observe_ttft(t - r.job->t_submit_);
      } else {
        metrics_.observe_itl(t - r.t_prev);
      }
      r.t_prev = t;
      ++r.n_gen;
      r.next = id;
      r.job->push(std::move(ev));
      Finish f = Finish::kNone;
      if (!req.ignore_eos && tok_ && tok_->is_eog(id))
        f = Finish::kEog;
      else if (req.max_tokens >= 0 && r.n_gen >= req.max_tokens)
        f = Finish::kLength;
      else if (br.n_past(r.seq) >= n_ctx_)
        f = Finish::kLength;
      else if (r.job->halted())
        f = halt_finish(*r.job);
      if (f != Finish::kNone) {
        done.push_back(item_of[k]);
        why.push_back(f);
      }
    }
    // Retire from the back so the indices stay valid.
    std::vector<size_t> order(done.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return done[a] > done[b]; });
    for (size_t i : order) retire(done[i], why[i]);
    publish_stats();
  }

  // Stopping: the running jobs end as cancelled, their pages free.
  for (size_t i = run.size(); i-- > 0;) retire(i, Finish::kCancelled);
  publish_stats();
}

void Scheduler::run_job(Job& job) {
  const GenRequest& r = job.req_;
  const double t0 = now_s();
  auto finish = [&](Finish f, double t_first, double t_last, int64_t n_gen) {
    end_job(job, f, t_first, t_last, n_gen);
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
