// The scheduler in front of the engine: a bounded queue of generation jobs and one worker
// thread that owns the engine and runs them.
//
// Admission: at most max_running + max_queue jobs are in the scheduler at once; submit()
// past that throws a 503 ApiError (backpressure, never an unbounded queue).
//
// Continuous batching (a CPU engine::Session: engine::BatchRunner over it, paged KV cache):
// up to max_running jobs run at once. Each worker step is one forward over the next token of
// every decoding job plus prefill chunks of the jobs still reading their prompts (at most
// prefill_chunk prompt tokens per step, oldest job first), so a long prompt delays the
// others' next tokens by one chunk, not by its whole length. A job that ends or is cancelled
// leaves the batch before the next step and its KV pages are free at once. Prefix reuse
// (cache_prompt): the pages of a prompt prefix another request computed (whole pages,
// matched by token ids), or the whole text of the last finished request when the prompt
// extends it (engine/batch_runner.h).
//
// Any other runner (the GPU session, test wrappers) is served in turn, oldest first, as
// before: the worker remembers the tokens whose KV the runner holds and evaluates only the
// new ones when a prompt extends them.
//
// Cancellation: Job::cancel() (the client went away) and Job::halt() (a stop string
// matched) are checked before each step; the job ends at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/kv_pages.h"
#include "engine/sampler.h"
#include "serve/metrics.h"

namespace ft {
class Tokenizer;
}
namespace ft::engine {
class Runner;
class BatchRunner;
}

namespace ft::serve {

struct GenRequest {
  std::vector<int32_t> prompt;  // non-empty, ids < n_vocab, size < n_ctx (checked by submit)
  int64_t max_tokens = -1;      // < 0: until the context is full
  engine::SamplerParams sampling;
  int n_top_logprobs = 0;       // with logprobs: alternatives reported per token
  bool logprobs = false;        // report the log-probability of each chosen token
  bool cache_prompt = true;     // reuse the KV of the previous job when this prompt extends it
  bool ignore_eos = false;
};

enum class Finish { kNone, kEog, kLength, kCancelled, kError };

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;
};

struct JobEvent {
  bool done = false;               // the last event of a job
  int32_t token = -1;              // !done: the generated token
  float logprob = 0.0f;            // with GenRequest::logprobs
  std::vector<TokenLogprob> top;   // with n_top_logprobs, best first
  Finish finish = Finish::kNone;   // done: why it ended
  std::string error;               // finish == kError
};

// Summary a handler reads after the done event.
struct JobStats {
  int64_t n_prompt = 0;
  int64_t n_cached = 0;     // prompt tokens whose KV was reused
  int64_t n_generated = 0;
  double queue_s = 0.0;     // waiting for the engine
  double prompt_s = 0.0;    // prefill
  double decode_s = 0.0;    // from the first token to the last
  // Continuous batching: the steps that read part of the prompt, and the tokens other jobs
  // generated in those steps (chunked prefill interleaved with their decode).
  int64_t prefill_steps = 0;
  int64_t decoded_beside_prefill = 0;
};

class Job {
 public:
  explicit Job(GenRequest r) : req_(std::move(r)) {}

  // Handler side: blocks until the next event. Returns false after the done event was
  // returned once (then nothing more comes).
  bool next(JobEvent& ev);
  // The client went away: the worker stops this job at once (skips it if still queued)
  // and counts it as cancelled.
  void cancel() {
    cancelled_.store(true);
    halt_.store(true);
  }
  // The reply is complete (a stop string matched): the worker stops generating.
  void halt() { halt_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  bool halted() const { return halt_.load(); }
  JobStats stats() const;
  const GenRequest& request() const { return req_; }

 private:
  friend class Scheduler;
  void push(JobEvent ev);

  GenRequest req_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> halt_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  bool ended_ = false;     // done event pushed
  bool returned_done_ = false;
  JobStats stats_;
  double t_submit_ = 0.0;
};

struct SchedulerOptions {
  int max_running = 4;
  int max_queue = 32;
  int64_t prefill_chunk = 512;  // tokens per prefill eval (cancellation is checked between)
  int64_t kv_page_size = 16;    // tokens per KV page (batching engine)
  bool batching = true;         // continuous batching when the runner is a CPU Session
  bool warmup = true;           // warm what serves before the first job: the batch runner, else the runner
};

class Scheduler {
 public:
  // The runner and tokenizer must outlive the scheduler; the worker thread is the only
  // user of the runner from here on.
  Scheduler(engine::Runner& runner, const Tokenizer* tok, Metrics& metrics, const SchedulerOptions& o);
  ~Scheduler();  // stop()

  // Queues a job. Throws ApiError 503 when the scheduler is full and 400 when the prompt
  // does not fit the context or holds an id outside the vocabulary.
  std::shared_ptr<Job> submit(GenRequest r);
  // Cancels every job and joins the worker.
  void stop();

  EngineGauges gauges() const;
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_vocab() const { return n_vocab_; }

 private:
  void worker();
  void run_job(Job& job);
  void batch_worker();
  void end_job(Job& job, Finish f, double t_first, double t_last, int64_t n_gen);

  engine::Runner& runner_;
  const Tokenizer* tok_;
  Metrics& metrics_;
  SchedulerOptions opt_;
  int64_t n_ctx_ = 0, n_vocab_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::shared_ptr<Job> active_;  // popped by the worker, not finished
  bool stopping_ = false;
  std::atomic<int64_t> kv_used_{0};
  std::unique_ptr<engine::BatchRunner> batch_;  // null: jobs in turn through runner_
  int64_t n_running_ = 0;                       // batching: jobs in the batch (under mu_)
  engine::KvPageStats kv_pages_;                // batching: as of the last step (under mu_)

  // Worker-only: the tokens whose KV the runner holds, in order.
  std::vector<int32_t> cached_;
  std::thread thread_;
};

const char* finish_name(Finish f);

}  // namespace ft::serve
