#include "engine/runner.h"

#include "engine/sampler.h"

namespace ft::engine {

int32_t Runner::eval_argmax(const int32_t* tokens, int64_t n) {
  const float* logits = eval(tokens, n);
  return argmax(logits, static_cast<int32_t>(n_vocab()));
}

int32_t Runner::eval_sample(const int32_t* tokens, int64_t n, Sampler& s) {
  const float* logits = eval(tokens, n);
  return s.sample(logits, static_cast<int32_t>(n_vocab()));
}

}  // namespace ft::engine
