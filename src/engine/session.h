// One sequence being generated: a thread pool, a KV cache and the activation buffers over a
// loaded model. eval() runs the prompt as batches of up to n_ubatch tokens (GEMMs with rows
// split over threads) and then one token at a time for decode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "engine/exec.h"
#include "engine/runner.h"
#include "engine/state.h"

namespace ft::model {
struct Model;
}

namespace ft::engine {

struct SessionOptions {
  int64_t n_ctx = 0;      // 0: min(context_length, 4096)
  int n_threads = 0;      // 0: physical cores
  ActType act = ActType::kF32;
  quant::ActQuant act_quant = quant::ActQuant::kNone;  // kQ8: llama.cpp's CPU numerics (Exec)
  int64_t n_ubatch = 512;  // largest batch of one forward pass
};

class Session : public Runner {
 public:
  Session(const model::Model& m, const SessionOptions& o);

  // Appends tokens to the sequence and returns the logits after the last one (n_vocab
  // floats), or, with all_logits, n rows of n_vocab (row i predicts the token after
  // tokens[i]). The pointer stays valid until the next eval. Throws ft::Error when the
  // context is full or a token id is out of range.
  const float* eval(const int32_t* tokens, int64_t n, bool all_logits = false) override;

  void reset() override { n_past_ = 0; }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return st_->n_ctx; }
  int64_t n_vocab() const override;
  std::string describe() const override;
  int n_threads() const { return pool_->size(); }
  ActType act() const { return st_->ex.act; }
  const KvCache& kv() const { return st_->kv; }
  // For a BatchRunner built over this session (engine/batch_runner.h): it borrows the
  // model, the thread pool and the activation buffers, and keeps its own paged KV cache.
  const model::Model& model() const { return m_; }
  State& state() { return *st_; }

 private:
  const model::Model& m_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<State> st_;
  std::vector<float> logits_;
  int64_t n_past_ = 0;
};

}  // namespace ft::engine
