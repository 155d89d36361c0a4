#include "engine/conv1d.h"

#include "core/error.h"
#include "engine/ffn.h"

namespace ft::engine {

void conv1d_causal_silu(const Exec& ex, const float* x, int64_t ldx, int64_t n_tok, int64_t n_ch,
                        const float* w, int64_t k, float* state, float* y, int64_t ldy) {
  if (k < 1 || k > kMaxConvKernel) fail("conv1d: kernel width {} is outside [1, {}]", k, kMaxConvKernel);
  ex.pool->parallel_for(n_ch, ex.pool->grain_for(n_ch, 16), [&](int64_t c0, int64_t c1, int) {
    float win[kMaxConvKernel];
    for (int64_t c = c0; c < c1; ++c) {
      const float* wc = w + c * k;
      float* sc = state + c * (k - 1);
      for (int64_t j = 0; j + 1 < k; ++j) win[j] = sc[j];
      for (int64_t t = 0; t < n_tok; ++t) {
        win[k - 1] = x[t * ldx + c];
        float sum = 0.0f;
        // Rounded products added in j order: ggml-cpu's ssm_conv as its build compiles it
        // (a fused form gave 1-ulp differences in drift_probe_test.cpp). conv1d.cpp is built
        // without FMA, so the compiler cannot fuse them.
        for (int64_t j = 0; j < k; ++j) sum += win[j] * wc[j];
        y[t * ldy + c] = silu(sum);
        for (int64_t j = 0; j + 1 < k; ++j) win[j] = win[j + 1];
      }
      for (int64_t j = 0; j + 1 < k; ++j) sc[j] = win[j];
    }
  });
}

}  // namespace ft::engine
