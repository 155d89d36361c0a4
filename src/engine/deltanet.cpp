#include "engine/deltanet.h"

#include <algorithm>
#include <cmath>

#include "engine/conv1d.h"
#include "engine/ffn.h"
#include "engine/norm.h"
#include "engine/vec_math.h"

namespace ft::engine {

DeltaNetState::DeltaNetState(const DeltaNetShape& s, const std::vector<uint8_t>& recurrent,
                             int64_t n_ubatch) {
  conv_.resize(recurrent.size());
  ssm_.resize(recurrent.size());
  bool any = false;
  for (size_t il = 0; il < recurrent.size(); ++il) {
    if (!recurrent[il]) continue;
    any = true;
    conv_[il].assign(static_cast<size_t>(s.conv_dim() * (s.d_conv - 1)), 0.0f);
    ssm_[il].assign(static_cast<size_t>(s.n_v_heads * s.d_head * s.d_head), 0.0f);
  }
  if (!any) return;
  const auto U = static_cast<size_t>(n_ubatch);
  in.resize(U * s.in_dim());
  out.resize(U * s.value_dim());
  y.resize(U * s.conv_dim());
}

void DeltaNetState::reset() {
  for (auto& v : conv_) std::fill(v.begin(), v.end(), 0.0f);
  for (auto& v : ssm_) std::fill(v.begin(), v.end(), 0.0f);
}

size_t DeltaNetState::bytes() const {
  size_t n = 0;
  for (size_t il = 0; il < conv_.size(); ++il) n += (conv_[il].size() + ssm_[il].size()) * sizeof(float);
  return n;
}

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// ggml's softplus: linear above 20 where log(1 + e^x) == x in fp32.
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// x / sqrt(sum x^2 + eps), computed as llama.cpp's build_gdn_l2_norm does:
// rms_norm(x, eps/n) * (1/sqrt(n)).
void l2_norm(float* x, int64_t n, float eps) {
  const float fn = static_cast<float>(n);
  rmsnorm_row(x, nullptr, n, eps / fn, x, ActType::kF32);
  const float s = 1.0f / std::sqrt(fn);
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace

void delta_rule_step(float* S, const float* q, const float* k, const float* v, float g, float beta,
                     int64_t d, float* o) {
  const float decay = std::exp(g);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Row r of S only ever meets v[r]: decay, correct and read it in one pass. The dot
  // products and the rank-1 update round as ggml-cpu's gated_delta_net does (vec_math.h):
  // the output feeds a Q8-rounded matmul, where an ulp of difference can flip a rounding.
  for (int64_t r = 0; r < d; ++r) {
    float* row = S + r * d;
    for (int64_t c = 0; c < d; ++c) row[c] *= decay;
    const float u = (v[r] - dot_f32(row, k, d)) * beta;
    mad_f32(row, k, u, d);
    o[r] = dot_f32(row, q, d) * scale;
  }
}

void deltanet(const Exec& ex, const DeltaNetShape& s, const DeltaNetWeights& w, float* conv_state,
              float* ssm_state, const float* in, int64_t ldin, int64_t n_tok, float* out, int64_t ldo,
              float* y) {
  const int64_t d = s.d_head, Hk = s.n_k_heads, Hv = s.n_v_heads;
  const int64_t key_dim = s.key_dim(), conv_dim = s.conv_dim(), value_dim = s.value_dim();
  const ActType act = ex.act;
  ThreadPool& pool = *ex.pool;

  conv1d_causal_silu(ex, in, ldin, n_tok, conv_dim, w.conv1d, s.d_conv, conv_state, y, conv_dim);

  // q and k heads of every token (value heads stay as they are).
  const int64_t n_norm = n_tok * 2 * Hk;
  pool.parallel_for(n_norm, pool.grain_for(n_norm), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) l2_norm(y + (i / (2 * Hk)) * conv_dim + (i % (2 * Hk)) * d, d, s.eps);
  });

  // The recurrence: tokens in order, value heads in parallel. o_j goes straight to out.
  pool.parallel_for(Hv, 1, [&](int64_t j0, int64_t j1, int) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t i = j % Hk;
      float* S = ssm_state + j * d * d;
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* yt = y + t * conv_dim;
        const float* it = in + t * ldin + conv_dim + value_dim;
        const float beta = sigmoid(it[j]);
        const float g = softplus(it[Hv + j] + w.dt_bias[j]) * w.a[j];
        delta_rule_step(S, yt + i * d, yt + key_dim + i * d, yt + 2 * key_dim + j * d, g, beta, d,
                        out + t * ldo + j * d);
      }
    }
  });

  // Gated RMSNorm per (token, value head): rmsnorm(o; norm) * silu(z).
  const int64_t n_heads = n_tok * Hv;
  pool.parallel_for(n_heads, pool.grain_for(n_heads), [&](int64_t h0, int64_t h1, int) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t t = h / Hv, j = h % Hv;
      float* o = out + t * ldo + j * d;
      const float* z = in + t * ldin + conv_dim + j * d;
      rmsnorm_row(o, w.norm, d, s.eps, o, ActType::kF32);
      for (int64_t r = 0; r < d; ++r) o[r] = round_act(act, o[r] * silu(z[r]));
    }
  });
}

}  // namespace ft::engine
