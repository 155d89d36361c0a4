// moe_combine_split_ref (moe_combine_split.h): the scalar twin of the kernel.
#include "cuda/moe_combine_split.h"

#include "core/fp16.h"

namespace ft::cuda {
namespace {

float round_host(Round r, float v) {
  if (r == Round::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (r == Round::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

}  // namespace

void moe_combine_split_ref(const float* yg, const float* yc, const int32_t* from_c, const float* w, int64_t n_tok,
                           int n_used, int64_t n_embd, float* x, int64_t ldx, Round round) {
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t i = 0; i < n_embd; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < n_used; ++j) {
        const int64_t slot = t * n_used + j;
        const float* y = from_c[slot] >= 0 ? yc : yg;
        // ISO C++ (no -ffp-contract=fast) and no -mfma: the product is rounded before the add.
        const float v = y[slot * n_embd + i] * w[slot];
        acc = j == 0 ? v : acc + v;
      }
      x[t * ldx + i] += round_host(round, acc);
    }
  }
}

}  // namespace ft::cuda
