// moe_combine_split (moe_combine_split.h): one thread per (token, element), the ranks summed
// in order in a register.
#include "cuda/moe_combine_split.h"

#include <string>

#include "cuda/check.h"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void moe_combine_split_kernel(const float* yg, const float* yc, const int32_t* from_c, const float* w,
                                         int n_used, int64_t n_embd, float* x, int64_t ldx, Round round) {
  const int64_t t = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_embd) return;
  float acc = 0.0f;
  for (int j = 0; j < n_used; ++j) {
    const int64_t slot = t * n_used + j;
    const float* y = from_c[slot] >= 0 ? yc : yg;
    // One rounding per operation (no FMA), as the grouped GEMV's combine epilogue.
    const float v = __fmul_rn(y[slot * n_embd + i], w[slot]);
    acc = j == 0 ? v : __fadd_rn(acc, v);
  }
  float* o = x + t * ldx + i;
  *o = __fadd_rn(*o, round_to(round, acc));
}

}  // namespace

void moe_combine_split(const float* yg, const float* yc, const int32_t* from_c, const float* w, int64_t n_tok,
                       int n_used, int64_t n_embd, float* x, int64_t ldx, Round round, cudaStream_t s) {
  if (n_tok <= 0) return;
  if (n_used < 1 || n_embd < 1 || ldx < n_embd || n_tok > 65535)
    fail_message("moe_combine_split: n_used " + std::to_string(n_used) + ", n_embd " + std::to_string(n_embd) +
                 ", ldx " + std::to_string(ldx) + ", n_tok " + std::to_string(n_tok) + " out of range");
  const dim3 grid(static_cast<unsigned>((n_embd + kThreads - 1) / kThreads), static_cast<unsigned>(n_tok));
  moe_combine_split_kernel<<<grid, kThreads, 0, s>>>(yg, yc, from_c, w, n_used, n_embd, x, ldx, round);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
