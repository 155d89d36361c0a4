// Gated DeltaNet token mixing, recurrent form (shared/spec/arch/qwen35.md §3.2), and the
// per-sequence state it carries between calls.
//
// Per token t, from the layer's projections [mixed | z | beta logits | alpha]:
//   y = silu(causal_conv1d(mixed))                      (conv1d.h, rolling state)
//   q_i, k_i = y's key heads, L2-normalised (x / sqrt(sum x^2 + eps));  v_j = y's value heads
//   g_j = softplus(alpha_j + dt_bias_j) * a_j  (a = -exp(A_log), so g <= 0);  b_j = sigmoid(beta_j)
//   per value head j, with key head i = j mod H_k (GGUF files store value heads tiled):
//     S_j = exp(g_j) S_j;   u = b_j (v_j - S_j k_i);   S_j += u k_i^T;   o_j = S_j q_i / sqrt(d)
//   out_j = rmsnorm(o_j; norm) * silu(z_j)
// S_j is d x d fp32, row = value index, contiguous over the key index (ggml's layout).
//
// Prefill runs the same recurrence token by token (llama.cpp's CPU default, fused_gdn_ch);
// a chunked form is a GPU concern. Value heads are independent, so they split over threads.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/exec.h"

namespace ft::engine {

struct DeltaNetShape {
  int64_t n_k_heads = 0;  // H_k (ssm.group_count)
  int64_t n_v_heads = 0;  // H_v (ssm.time_step_rank), a multiple of H_k
  int64_t d_head = 0;     // d (ssm.state_size): key and value head size
  int64_t d_conv = 0;     // K (ssm.conv_kernel)
  float eps = 1e-6f;      // of the L2 norms and the gated RMSNorm

  int64_t key_dim() const { return n_k_heads * d_head; }
  int64_t value_dim() const { return n_v_heads * d_head; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // One token's projection row: mixed (conv_dim) | z (value_dim) | beta (H_v) | alpha (H_v).
  int64_t in_dim() const { return conv_dim() + value_dim() + 2 * n_v_heads; }
};

// fp32 views of a layer's small tensors.
struct DeltaNetWeights {
  const float* conv1d = nullptr;   // [conv_dim][d_conv]
  const float* dt_bias = nullptr;  // [H_v]
  const float* a = nullptr;        // [H_v], -exp(A_log)
  const float* norm = nullptr;     // [d_head], gated RMSNorm weight
};

// Conv and delta-rule state of every Gated DeltaNet layer of one sequence (layers without
// one get none), plus the buffers one call needs for up to n_ubatch tokens.
class DeltaNetState {
 public:
  DeltaNetState() = default;
  DeltaNetState(const DeltaNetShape& s, const std::vector<uint8_t>& recurrent, int64_t n_ubatch);

  // Zeroes every state: a sequence starts from S = 0 and a zero conv window.
  void reset();
  float* conv(int64_t il) { return conv_[il].data(); }  // [conv_dim][d_conv - 1]
  float* ssm(int64_t il) { return ssm_[il].data(); }    // [H_v][d][d]
  size_t bytes() const;

  std::vector<float> in;   // [U][in_dim] the layer's projections
  std::vector<float> out;  // [U][value_dim] gated, normed head outputs
  std::vector<float> y;    // [U][conv_dim] conv output: q | k | v

 private:
  std::vector<std::vector<float>> conv_, ssm_;
};

// One value head, one token: S = exp(g) S; u = beta (v - S k); S += u k^T; o = S q / sqrt(d).
void delta_rule_step(float* S, const float* q, const float* k, const float* v, float g, float beta,
                     int64_t d, float* o);

// The token mixing of one layer for n_tok consecutive tokens of one sequence. `in` rows
// (ldin apart) as DeltaNetShape::in_dim; out rows (ldo apart) of value_dim, rounded to the
// activation dtype. conv_state / ssm_state are the layer's, updated in place.
void deltanet(const Exec& ex, const DeltaNetShape& s, const DeltaNetWeights& w, float* conv_state,
              float* ssm_state, const float* in, int64_t ldin, int64_t n_tok, float* out, int64_t ldo,
              float* y);

}  // namespace ft::engine
