// The one interface in front of a running sequence, whatever device computes it: the CPU
// engine (engine::Session) and the CUDA backend (gpu::GpuSession) both implement it, so the
// CLI and the server never know where the model runs.
#pragma once

#include <cstdint>
#include <string>

namespace ft::engine {

class Sampler;

class Runner {
 public:
  virtual ~Runner() = default;

  // Appends tokens and returns the logits after the last one (n_vocab floats, host memory),
  // or with all_logits n rows of them. Valid until the next call. Throws ft::Error when the
  // context is full or an id is out of range.
  virtual const float* eval(const int32_t* tokens, int64_t n, bool all_logits = false) = 0;
  // Appends tokens and returns the argmax of the last logits (first index on ties). A device
  // backend computes it where the logits are and copies back one integer.
  virtual int32_t eval_argmax(const int32_t* tokens, int64_t n);
  // Appends tokens and picks the next one with `s` (its parameters, history and random
  // stream), exactly as s.sample(eval(tokens, n)) would. A device backend samples where the
  // logits are and copies back one integer.
  virtual int32_t eval_sample(const int32_t* tokens, int64_t n, Sampler& s);

  // Forgets the sequence (the KV cache is reused from position 0).
  virtual void reset() = 0;
  // Pays the one-time costs of the first prompt and decode step before a user's request does, then forgets what
  // it ran (as llama.cpp's warm-up run). The GPU session's: library kernels loaded on first use, CUDA graph
  // captures -- H200 session 54, Llama-8B, `ft generate --prompt-tokens 1..40 --max-tokens 16 --json` with and
  // without --no-warmup: the first prompt 90 -> 33 ms, the first decode step 89.6 -> 1.97 ms, for 229 ms at load.
  // The CPU engine has none worth a prompt's time.
  virtual void warmup() {}

  virtual int64_t n_past() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t n_vocab() const = 0;
  // One line for logs: device, dtype, threads or GPU name.
  virtual std::string describe() const = 0;
};

}  // namespace ft::engine
