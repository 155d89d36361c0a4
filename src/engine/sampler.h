// Next-token sampling over a logit vector, in llama.cpp's default chain order:
// repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// temperature <= 0 is greedy: the first index of the largest (penalised) logit.
// The draw uses std::mt19937_64 seeded from `seed`, so a run is reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ft::engine {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;         // <= 0: off
  float top_p = 0.95f;        // >= 1: off
  float min_p = 0.05f;        // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int32_t repeat_last_n = 64;   // penalise the last n tokens seen
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);

  // Picks the next token from n_vocab logits (not modified). Uses internal buffers sized on
  // the first call.
  int32_t sample(const float* logits, int32_t n_vocab);
  // Records a token (prompt or generated) for the repetition penalty.
  void accept(int32_t token);

  const SamplerParams& params() const { return p_; }
  // For a backend that samples elsewhere (the GPU's twin of sample()): the tokens the
  // repetition penalty sees, and the one uniform draw sample() would take now (only
  // non-greedy samples draw), from the same random stream.
  const std::vector<int32_t>& history() const { return history_; }
  double draw();

 private:
  struct Cand {
    int32_t id;
    float logit;
  };
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;
  std::vector<int32_t> seen_;
  std::vector<Cand> cand_;
  std::vector<float> probs_;
};

// Index of the first maximum.
int32_t argmax(const float* x, int32_t n);

}  // namespace ft::engine
