#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/vec_math.h"
#include "moe_cpu/expert_exec.h"

namespace ft::engine {

void moe_route(const float* logits, int64_t n_expert, int n_used, float* probs, int32_t* order,
               int32_t* ids, float* weights) {
  float mx = -INFINITY;
  for (int64_t e = 0; e < n_expert; ++e) mx = std::max(mx, logits[e]);
  // e^(l - max) and its sum as ggml's soft_max rounds them (vec_math.h): a 1-ulp difference
  // in a weight moves the expert mix, and with it a later Q8 rounding.
  for (int64_t e = 0; e < n_expert; ++e) probs[e] = logits[e];
  const double sum = exp_sum(probs, 0, n_expert, mx, false);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t e = 0; e < n_expert; ++e) probs[e] *= inv;
  // Same algorithm and comparator as ggml-cpu's argsort (descending): equal probabilities
  // come out in the order std::sort leaves them, exactly as in llama.cpp.
  for (int64_t e = 0; e < n_expert; ++e) order[e] = static_cast<int32_t>(e);
  std::sort(order, order + n_expert, [probs](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  double wsum = 0.0;
  for (int r = 0; r < n_used; ++r) {
    ids[r] = order[r];
    weights[r] = probs[order[r]];
    wsum += weights[r];
  }
  const float denom = std::max(static_cast<float>(wsum), kMoeWeightSumMin);
  for (int r = 0; r < n_used; ++r) weights[r] /= denom;
}

namespace {

// The CPU experts are moe_cpu's executor over a view of the mapped tensors (one copy of the
// expert math for the engine and the GPU's cpu / hybrid backends; the scale bank is built
// once from the tensors' per-expert scales).
class CpuMoeExperts final : public MoeExperts {
 public:
  explicit CpuMoeExperts(const ExpertWeights& w) : w_(w) { host_ = moe_cpu::host_experts_of(w_, bank_); }
  std::string_view backend() const override { return "cpu"; }

  void forward(const Exec& ex, const float* x, int64_t ldx, int64_t n_tok, const int32_t* ids,
               const float* weights, int n_used, float* out, int64_t ldo) override {
    // The executor keeps its scratch between calls; it is bound to one pool.
    if (!exec_ || pool_ != ex.pool) {
      exec_ = std::make_unique<moe_cpu::ExpertExecutor>(*ex.pool);
      pool_ = ex.pool;
    }
    exec_->run(host_, moe_cpu::ExpertNumerics{ex.act, ex.act_quant}, x, ldx, n_tok, ids, weights, n_used, out, ldo);
  }

 private:
  ExpertWeights w_;
  std::vector<float> bank_;
  moe_cpu::HostExperts host_;
  ThreadPool* pool_ = nullptr;
  std::unique_ptr<moe_cpu::ExpertExecutor> exec_;
};

}  // namespace

std::unique_ptr<MoeExperts> make_cpu_experts(const ExpertWeights& w) {
  return std::make_unique<CpuMoeExperts>(w);
}

void moe_experts_ref(ActType act, const ExpertWeights& w, const float* x, int64_t ldx,
                     int64_t n_tok, const int32_t* ids, const float* weights, int n_used,
                     float* out, int64_t ldo) {
  std::vector<float> bank;
  const moe_cpu::HostExperts h = moe_cpu::host_experts_of(w, bank);
  moe_cpu::expert_exec_ref(h, moe_cpu::ExpertNumerics{act}, x, ldx, n_tok, ids, weights, n_used, out, ldo);
}

}  // namespace ft::engine
