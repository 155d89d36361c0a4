// Mixture of experts (README §C.7).
//
// Routing, per token:  probs = softmax(router logits) (fp32; sum in double as ggml)
//                      sel   = top-k of probs in the order of llama.cpp's argsort (std::sort of
//                              0..n-1 with a descending comparator: ties resolve the same way)
//                      w_k   = probs[sel_k] / max(sum_k probs[sel_k], 6.103515625e-5)
// Experts, per rank k with e = sel_k:
//   g = (Wg[e]·x)·s_gate[e];  u = (Wu[e]·x)·s_up[e];  h = silu(g) ⊙ u   (gelu(g) ⊙ u: gemma4)
//   y_k = (Wd[e]·h)·s_down[e] · w_k;     out = y_0 + y_1 + ... (rank order, fp32)
//
// MoeExperts is the one interface in front of the expert computation: model code routes
// tokens and hands (ids, weights) to it, and never knows where an expert lives. The CPU
// implementation is here; GPU fused / offload / hybrid / cpu backends implement the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/exec.h"
#include "engine/geglu.h"
#include "model/tensor.h"

namespace ft::engine {

inline constexpr float kMoeWeightSumMin = 6.103515625e-5f;

// Softmax + top-k + renormalisation for one token. `order` is n_expert ints of scratch.
void moe_route(const float* logits, int64_t n_expert, int n_used, float* probs, int32_t* order,
               int32_t* ids, float* weights);

// The expert tensors of one MoE layer: separate gate/up (each optionally scaled) or a merged
// gate_up (rows [0, n_ff) gate, [n_ff, 2 n_ff) up; no gate/up scale), and down.
struct ExpertWeights {
  model::ExpertTensor gate, up, gate_up, down;
  int64_t n_expert = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  Glu glu = Glu::kSilu;
};

class MoeExperts {
 public:
  virtual ~MoeExperts() = default;
  virtual std::string_view backend() const = 0;
  // out[t] (n_embd, ldo apart) = sum over ranks r of weights[t*n_used + r] * expert
  // ids[t*n_used + r] applied to x[t]. Overwrites out.
  virtual void forward(const Exec& ex, const float* x, int64_t ldx, int64_t n_tok,
                       const int32_t* ids, const float* weights, int n_used, float* out,
                       int64_t ldo) = 0;
};

// Experts computed on the CPU from the mapped weights: moe_cpu::ExpertExecutor (the same
// executor the GPU's cpu / hybrid backends run). Tokens are grouped by expert so each
// expert's weights are read once per batch; the gate/up and down products of all selected
// experts each run as one parallel loop over (expert, row chunk) items.
std::unique_ptr<MoeExperts> make_cpu_experts(const ExpertWeights& w);

// Token-by-token scalar twin (matmul_ref, in rank order) for tests: moe_cpu::expert_exec_ref.
void moe_experts_ref(ActType act, const ExpertWeights& w, const float* x, int64_t ldx,
                     int64_t n_tok, const int32_t* ids, const float* weights, int n_used,
                     float* out, int64_t ldo);

}  // namespace ft::engine
