#include "engine/ffn.h"

namespace ft::engine {

void swiglu(const Exec& ex, const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h,
            int64_t ldh) {
  const ActType act = ex.act;
  const int64_t n = n_tok * n_ff;
  ex.pool->parallel_for(n, ex.pool->grain_for(n, 64), [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / n_ff, j = i % n_ff;
      const float* g = gu + t * ldgu;
      h[t * ldh + j] = round_act(act, silu(g[j]) * g[n_ff + j]);
    }
  });
}

void ffn_swiglu(const Exec& ex, const Linear& gate_up, const Linear& down, const float* x,
                int64_t ldx, int64_t n_tok, float* out, int64_t ldo, const FfnScratch& s) {
  const int64_t n_ff = down.k();
  linear(ex, gate_up, x, ldx, n_tok, s.gate_up, 2 * n_ff);
  swiglu(ex, s.gate_up, 2 * n_ff, n_ff, n_tok, s.h, n_ff);
  linear(ex, down, s.h, n_ff, n_tok, out, ldo);
}

}  // namespace ft::engine
