#include "engine/rope.h"

#include <algorithm>
#include <cmath>

namespace ft::engine {
namespace {

float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base) {
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

}  // namespace

void rope_angles(const model::RopeParams& p, const float* ff, int64_t pos, float* cs) {
  const int n_rot = p.n_rot;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(n_rot));
  float lo = 0.0f, hi = 0.0f;
  if (p.ext_factor != 0.0f) {
    lo = std::max(0.0f, std::floor(yarn_corr_dim(n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    hi = std::min(static_cast<float>(n_rot - 1),
                  std::ceil(yarn_corr_dim(n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta = static_cast<float>(pos);
  for (int i = 0; i < n_rot / 2; ++i) {
    const float theta_extrap = theta / (ff ? ff[i] : 1.0f);
    const float theta_interp = p.freq_scale * theta_extrap;
    float t = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - lo) / std::max(0.001f, hi - lo);
      const float ramp = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      t = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cs[2 * i] = std::cos(t) * mscale;
    cs[2 * i + 1] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

void RopeCache::build(const model::RopeParams& p, const float* ff, int64_t pos0, int64_t n_tok) {
  n_rot_ = p.n_rot;
  type_ = p.type;
  data_.resize(static_cast<size_t>(n_tok * n_rot_));  // grows once, then reused
  for (int64_t t = 0; t < n_tok; ++t) rope_angles(p, ff, pos0 + t, data_.data() + t * n_rot_);
}

void rope_apply(const Exec& ex, const RopeCache& rc, float* x, int64_t ld, int64_t n_tok,
                int64_t n_head, int64_t hd) {
  const int half = rc.n_rot() / 2;
  // NORM rotates (2i, 2i+1), NEOX (i, i + n_rot/2).
  const int64_t stride_i = rc.type() == model::RopeType::kNorm ? 2 : 1;
  const int64_t offset_b = rc.type() == model::RopeType::kNorm ? 1 : half;
  const ActType act = ex.act;
  const int64_t n = n_tok * n_head;
  ex.pool->parallel_for(n, ex.pool->grain_for(n), [&](int64_t i0, int64_t i1, int) {
    for (int64_t j = i0; j < i1; ++j) {
      const int64_t t = j / n_head;
      float* h = x + t * ld + (j % n_head) * hd;
      const float* cs = rc.cs(t);
      for (int i = 0; i < half; ++i) {
        float* a = h + i * stride_i;
        float* b = a + offset_b;
        const float x0 = *a, x1 = *b, c = cs[2 * i], s = cs[2 * i + 1];
        // The first product fused, the second rounded: ggml-cpu's rotate_pairs as its build
        // contracts it (bit-identical q and k; drift_probe_test.cpp measured 1-ulp
        // differences with two rounded products).
        *a = round_act(act, std::fma(x0, c, -(x1 * s)));
        *b = round_act(act, std::fma(x0, s, x1 * c));
      }
    }
  });
}

}  // namespace ft::engine
