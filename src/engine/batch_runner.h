// Several sequences generated together (continuous batching in src/serve/scheduler): one
// step() runs one forward over the next tokens of every sequence given, so the linear
// layers and experts read their weights once for all of them.
//
// Two implementations over a CPU Session (make_batch_runner picks):
//   paged   (llama, qwen3, qwen3moe: the archs whose forward is model::decoder_forward)
//           a paged KV cache (engine/kv_pages.h) shared by all sequences, prompt prefixes
//           shared page by page across sequences; attention per sequence over its pages.
//   serial  (every other arch: gemma4's ring layers, qwen35's recurrent state) one State
//           per sequence slot, stepped one after another; prefix reuse only when a prompt
//           extends what a free slot holds (the recurrent state is that of its whole text).
// The scheduler sees the same interface either way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_pages.h"

namespace ft::engine {

class Runner;

struct BatchItem {
  int64_t seq = -1;
  const int32_t* tokens = nullptr;
  int64_t n = 0;  // >= 1
};

class BatchRunner {
 public:
  virtual ~BatchRunner() = default;

  // Starts a sequence whose prompt is prompt[0..n). With reuse, the KV of a cached prefix is
  // taken over; *n_cached (< n, so the last prompt token is always evaluated) says how many
  // prompt tokens the caller must skip: it feeds prompt[*n_cached..] to step(). Returns the
  // sequence id. Throws ft::Error when max_sequences() are running.
  virtual int64_t add_sequence(const int32_t* prompt, int64_t n, bool reuse, int64_t* n_cached) = 0;
  // Ends a sequence; its pages are free at once (shared ones when their last user leaves).
  virtual void remove_sequence(int64_t seq) = 0;
  // Appends each item's tokens to its sequence (one item per sequence at most) and returns
  // one row of n_vocab logits per item, after its last token; valid until the next step.
  // At most max_step_tokens() tokens in all. Throws ft::Error on a full context or a bad id.
  virtual const float* step(const std::vector<BatchItem>& items) = 0;

  // Greedy steps: with on, the next step() may compute each row's argmax where the logits
  // are (first index on ties, as engine::argmax) instead of returning the rows: step() then
  // returns null and argmax_rows() the ids. Runners without it ignore the call and
  // argmax_rows() is null.
  virtual void set_argmax_only(bool on) { (void)on; }
  virtual const int32_t* argmax_rows() const { return nullptr; }

  // As Runner::warmup for the runner's own buffers and graphs (a prompt, then a decode step of each head); leaves
  // no sequence. No-op where there is nothing to warm (the CPU runners).
  virtual void warmup() {}

  virtual int64_t n_past(int64_t seq) const = 0;
  virtual int64_t n_ctx() const = 0;  // per sequence
  virtual int64_t n_vocab() const = 0;
  virtual int64_t max_sequences() const = 0;
  virtual int64_t max_step_tokens() const = 0;
  virtual KvPageStats kv_stats() const = 0;
  virtual std::string describe() const = 0;
};

// A batch runner over `r` when it is a CPU engine::Session (sharing its model, threads and
// activation buffers; r must not be used while the batch runner is: the paged runner frees
// the session's own KV cache meanwhile and gives it a fresh, reset one when it ends), else
// null. The paged pool holds max_seqs full contexts, so admitted sequences never run out of
// pages.
std::unique_ptr<BatchRunner> make_batch_runner(Runner& r, int64_t max_seqs, int64_t page_size = 16);

// Batch runners over runners ft_core does not know (the CUDA backend registers one,
// cli/runner_factory.cpp): make_batch_runner asks each registered factory in turn when r is
// no CPU Session; a factory returns null for a runner that is not its kind.
using BatchRunnerFactory = std::unique_ptr<BatchRunner> (*)(Runner& r, int64_t max_seqs, int64_t page_size);
void register_batch_runner_factory(BatchRunnerFactory f);

}  // namespace ft::engine
