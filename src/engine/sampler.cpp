#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace ft::engine {

int32_t argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n <= 0) return;
  history_.push_back(token);
  if (history_.size() > static_cast<size_t>(p_.repeat_last_n)) history_.erase(history_.begin());
}

double Sampler::draw() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) cand_[i] = {i, logits[i]};

  // Repetition penalty (llama.cpp's penalties sampler): divide positive logits, multiply
  // negative ones, once per distinct token in the window.
  if (p_.repeat_penalty != 1.0f) {
    std::vector<int32_t>& seen = seen_;
    seen.assign(history_.begin(), history_.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n_vocab) continue;
      float& l = cand_[t].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }

  if (p_.temperature <= 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i)
      if (cand_[i].logit > cand_[best].logit) best = i;
    return best;
  }

  // Sorted by logit, descending (ties by id, for determinism).
  auto by_logit = [](const Cand& a, const Cand& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }

  // Softmax over the kept candidates (at temperature 1) for top-p and min-p.
  auto softmax = [&](size_t m, float temp) {
    probs_.resize(m);
    const float mx = cand_[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < m; ++i) sum += probs_[i] = std::exp((cand_[i].logit - mx) / temp);
    for (size_t i = 0; i < m; ++i) probs_[i] = static_cast<float>(probs_[i] / sum);
  };
  if (p_.top_p < 1.0f) {
    softmax(n, 1.0f);
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs_[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = std::max<size_t>(1, keep);
  }
  if (p_.min_p > 0.0f) {
    softmax(n, 1.0f);
    const float thr = probs_[0] * p_.min_p;
    size_t keep = 1;
    while (keep < n && probs_[keep] >= thr) ++keep;
    n = keep;
  }

  softmax(n, p_.temperature);
  const double r = draw();
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += probs_[i];
    if (r < cum) return cand_[i].id;
  }
  return cand_[n - 1].id;
}

}  // namespace ft::engine
