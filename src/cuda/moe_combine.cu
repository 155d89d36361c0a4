#include "cuda/check.h"
#include "cuda/moe_combine.h"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

__global__ void invert_kernel(const int32_t* order, int64_t n, int32_t* inv) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j < n) inv[order[j]] = static_cast<int32_t>(j);
}

__global__ void combine_kernel(const float* ys, int64_t ldy, const int32_t* inv, int n_used,
                               const float* w, int64_t n_embd, float* out, int64_t ldo, Round round,
                               bool accumulate) {
  const int64_t t = blockIdx.y;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n_embd) return;
  float acc = 0.0f;
  for (int k = 0; k < n_used; ++k) {
    const int64_t slot = t * n_used + k;
    // Explicit roundings: no FMA contraction, as the CPU engine's loop (and ggml) computes it.
    const float v = __fmul_rn(ys[inv[slot] * ldy + i], w[slot]);
    acc = k == 0 ? v : __fadd_rn(acc, v);
  }
  acc = round_to(round, acc);
  float* o = out + t * ldo + i;
  *o = accumulate ? __fadd_rn(*o, acc) : acc;
}

}  // namespace

void moe_combine_sorted(const float* ysorted, int64_t ldy, const int32_t* order, int64_t n_tok, int n_used,
                 const float* w, int64_t n_embd, float* out, int64_t ldo, Round round,
                 bool accumulate, int32_t* inv, cudaStream_t s) {
  const int64_t n = n_tok * n_used;
  if (n == 0) return;
  invert_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(order, n, inv);
  FT_CUDA_CHECK_LAUNCH();
  const dim3 grid(static_cast<unsigned>((n_embd + 255) / 256), static_cast<unsigned>(n_tok));
  combine_kernel<<<grid, 256, 0, s>>>(ysorted, ldy, inv, n_used, w, n_embd, out, ldo, round, accumulate);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
