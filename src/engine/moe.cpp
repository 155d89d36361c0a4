#include "engine/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/ffn.h"
#include "engine/vec_math.h"

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

quant::MatmulArgs expert_args(const model::ExpertTensor& t, int64_t e, int64_t row_off,
                              const float* x, int64_t ldx, int64_t n_tok, float* y, int64_t ldy,
                              float scale, quant::Round round,
                              quant::ActQuant aq = quant::ActQuant::kNone) {
  quant::MatmulArgs a;
  a.type = t.w.type;
  a.row_bytes = t.w.row_bytes();
  a.w = t.expert(e) + row_off * a.row_bytes;
  a.k = t.w.ne[0];
  a.x = x;
  a.ldx = ldx;
  a.n_tok = n_tok;
  a.y = y;
  a.ldy = ldy;
  a.scale = scale;
  a.round = round;
  a.act_quant = aq;
  return a;
}

// Rows [r0, r1) of the 2*n_ff gate|up output of expert e for n_tok tokens.
template <bool kRef>
void gate_up_rows(const ExpertWeights& w, int64_t e, const float* x, int64_t ldx, int64_t n_tok,
                  float* y, int64_t r0, int64_t r1, quant::Round round,
                  quant::ActQuant aq = quant::ActQuant::kNone) {
  const int64_t n_ff = w.n_ff, ldy = 2 * n_ff;
  auto run = [&](const quant::MatmulArgs& a, int64_t a0, int64_t a1) {
    if constexpr (kRef)
      quant::matmul_ref(a, a0, a1);
    else
      quant::matmul(a, a0, a1);
  };
  if (w.gate_up) {
    run(expert_args(w.gate_up, e, 0, x, ldx, n_tok, y, ldy, 1.0f, round, aq), r0, r1);
    return;
  }
  if (r0 < n_ff)
    run(expert_args(w.gate, e, 0, x, ldx, n_tok, y, ldy, w.gate.scale_of(e), round, aq), r0,
        std::min(r1, n_ff));
  if (r1 > n_ff)
    run(expert_args(w.up, e, 0, x, ldx, n_tok, y + n_ff, ldy, w.up.scale_of(e), round, aq),
        std::max(r0, n_ff) - n_ff, r1 - n_ff);
}

class CpuMoeExperts final : public MoeExperts {
 public:
  explicit CpuMoeExperts(const ExpertWeights& w) : w_(w) {}
  std::string_view backend() const override { return "cpu"; }

  void forward(const Exec& ex, const float* x, int64_t ldx, int64_t n_tok, const int32_t* ids,
               const float* weights, int n_used, float* out, int64_t ldo) override {
    const int64_t n_embd = w_.n_embd, n_ff = w_.n_ff, n_slots = n_tok * n_used;
    grow(n_slots);
    // Group (token, rank) slots by expert: slot_of_[s] is the position in the grouped order.
    std::fill(count_.begin(), count_.end(), 0);
    for (int64_t s = 0; s < n_slots; ++s) ++count_[ids[s]];
    active_.clear();
    int64_t off = 0;
    for (int64_t e = 0; e < w_.n_expert; ++e) {
      start_[e] = off;
      if (count_[e]) active_.push_back(static_cast<int32_t>(e));
      off += count_[e];
      count_[e] = 0;
    }
    for (int64_t s = 0; s < n_slots; ++s) {
      const int32_t e = ids[s];
      const int64_t g = start_[e] + count_[e]++;
      slot_of_[s] = g;
      std::memcpy(xg_.data() + g * n_embd, x + (s / n_used) * ldx, sizeof(float) * n_embd);
    }

    const quant::Round round = ex.round();
    const ActType act = ex.act;
    const int64_t n_active = static_cast<int64_t>(active_.size());
    const int n_threads = ex.pool->size();
    // (expert, row chunk) work items: about 4 per thread over all selected experts, so the
    // top-k GEMVs of one decode step are spread over every core.
    auto chunk_rows = [&](int64_t rows) {
      int64_t c = (rows * n_active + 4 * n_threads - 1) / (4 * n_threads);
      c = (c + 15) / 16 * 16;
      return std::min(rows, std::max<int64_t>(16, c));
    };

    const int64_t cgu = chunk_rows(2 * n_ff), ngu = (2 * n_ff + cgu - 1) / cgu;
    ex.pool->parallel_for(n_active * ngu, 1, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t e = active_[i / ngu];
        const int64_t r0 = (i % ngu) * cgu, r1 = std::min(2 * n_ff, r0 + cgu);
        gate_up_rows<false>(w_, e, xg_.data() + start_[e] * n_embd, n_embd, count_[e],
                            gu_.data() + start_[e] * 2 * n_ff, r0, r1, round, ex.act_quant);
      }
    });
    if (w_.glu == Glu::kGelu)
      geglu(ex, gu_.data(), 2 * n_ff, n_ff, n_slots, h_.data(), n_ff);
    else
      swiglu(ex, gu_.data(), 2 * n_ff, n_ff, n_slots, h_.data(), n_ff);

    const int64_t cd = chunk_rows(n_embd), nd = (n_embd + cd - 1) / cd;
    ex.pool->parallel_for(n_active * nd, 1, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t e = active_[i / nd];
        const int64_t r0 = (i % nd) * cd, r1 = std::min(n_embd, r0 + cd);
        const auto a = expert_args(w_.down, e, 0, h_.data() + start_[e] * n_ff, n_ff, count_[e],
                                   yd_.data() + start_[e] * n_embd, n_embd, w_.down.scale_of(e),
                                   round, ex.act_quant);
        quant::matmul(a, r0, r1);
      }
    });

    ex.pool->parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) combine(t, weights, n_used, out + t * ldo, act);
    });
  }

 private:
  void grow(int64_t n_slots) {
    const auto n = static_cast<size_t>(n_slots);
    if (slot_of_.size() >= n) return;
    slot_of_.resize(n);
    xg_.resize(n * w_.n_embd);
    gu_.resize(n * 2 * w_.n_ff);
    h_.resize(n * w_.n_ff);
    yd_.resize(n * w_.n_embd);
    count_.resize(static_cast<size_t>(w_.n_expert));
    start_.resize(static_cast<size_t>(w_.n_expert));
  }

  // out = y_0 * w_0 + y_1 * w_1 + ... in rank order (ggml adds the weighted experts one by one).
  void combine(int64_t t, const float* weights, int n_used, float* out, ActType act) const {
    const int64_t n = w_.n_embd;
    for (int r = 0; r < n_used; ++r) {
      const float* y = yd_.data() + slot_of_[t * n_used + r] * n;
      const float wr = weights[t * n_used + r];
      if (r == 0) {
        for (int64_t i = 0; i < n; ++i) out[i] = y[i] * wr;
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] += y[i] * wr;
      }
    }
    round_act(act, out, n);
  }

  ExpertWeights w_;
  std::vector<int64_t> count_, start_, slot_of_;
  std::vector<int32_t> active_;
  std::vector<float> xg_, gu_, h_, yd_;
};

}  // namespace

std::unique_ptr<MoeExperts> make_cpu_experts(const ExpertWeights& w) {
  return std::make_unique<CpuMoeExperts>(w);
}

void moe_experts_ref(ActType act, const ExpertWeights& w, const float* x, int64_t ldx,
                     int64_t n_tok, const int32_t* ids, const float* weights, int n_used,
                     float* out, int64_t ldo) {
  const int64_t n_embd = w.n_embd, n_ff = w.n_ff;
  const quant::Round round = round_of(act);
  std::vector<float> gu(static_cast<size_t>(2 * n_ff)), h(static_cast<size_t>(n_ff)),
      y(static_cast<size_t>(n_embd));
  for (int64_t t = 0; t < n_tok; ++t) {
    float* o = out + t * ldo;
    for (int r = 0; r < n_used; ++r) {
      const int32_t e = ids[t * n_used + r];
      gate_up_rows<true>(w, e, x + t * ldx, ldx, 1, gu.data(), 0, 2 * n_ff, round);
      for (int64_t i = 0; i < n_ff; ++i)
        h[i] = round_act(act, (w.glu == Glu::kGelu ? gelu(gu[i]) : silu(gu[i])) * gu[n_ff + i]);
      quant::matmul_ref(expert_args(w.down, e, 0, h.data(), n_ff, 1, y.data(), n_embd,
                                    w.down.scale_of(e), round),
                        0, n_embd);
      const float wr = weights[t * n_used + r];
      for (int64_t i = 0; i < n_embd; ++i) o[i] = r == 0 ? y[i] * wr : o[i] + y[i] * wr;
    }
    round_act(act, o, n_embd);
  }
}

}  // namespace ft::engine
