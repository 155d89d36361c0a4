// The hybrid backend's rank-order combine (moe_hybrid.h): each route's expert output comes
// from the GPU (its grouped GEMV's per-slot rows) or from the CPU (the executor's per-route
// rows in mapped memory), and the ranks are summed in order with the fused combine's
// arithmetic, so splitting the routes between the two sides changes no bit of x.
// (moe_hybrid.h is C++20 through the executor's headers; nvcc compiles C++17, so the
// declaration is repeated here.)
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/check.h"
#include "cuda/round.cuh"

namespace ft::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void hybrid_combine_kernel(const float* yg, const float* yc, const int32_t* cpu_ids, const float* w,
                                      int n_used, int64_t n_embd, float* x, int64_t ldx, cuda::Round round) {
  const int64_t t = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_embd) return;
  float acc = 0.0f;
  for (int j = 0; j < n_used; ++j) {
    const int64_t slot = t * n_used + j;
    const float* y = cpu_ids[slot] >= 0 ? yc : yg;
    // One rounding per operation (no FMA), as the grouped GEMV's combine epilogue.
    const float v = __fmul_rn(y[slot * n_embd + i], w[slot]);
    acc = j == 0 ? v : __fadd_rn(acc, v);
  }
  float* o = x + t * ldx + i;
  *o = __fadd_rn(*o, cuda::round_to(round, acc));
}

}  // namespace

void hybrid_combine(const float* yg, const float* yc, const int32_t* cpu_ids, const float* w, int64_t n_tok,
                    int n_used, int64_t n_embd, float* x, int64_t ldx, cuda::Round round, cudaStream_t s);

void hybrid_combine(const float* yg, const float* yc, const int32_t* cpu_ids, const float* w, int64_t n_tok,
                    int n_used, int64_t n_embd, float* x, int64_t ldx, cuda::Round round, cudaStream_t s) {
  if (n_tok <= 0) return;
  const dim3 grid(static_cast<unsigned>((n_embd + kThreads - 1) / kThreads), static_cast<unsigned>(n_tok));
  hybrid_combine_kernel<<<grid, kThreads, 0, s>>>(yg, yc, cpu_ids, w, n_used, n_embd, x, ldx, round);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::gpu
