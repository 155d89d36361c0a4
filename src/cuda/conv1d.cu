// conv1d.h. A thread per channel keeps its window in registers; token rows are read
// coalesced across the channel threads. Products and sums go through the *_rn ops so they
// round like the CPU twin (built without FMA).
#include "cuda/conv1d.h"

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops_math.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 128;

template <int K>
__global__ void conv1d_kernel(const float* x, int64_t ldx, int64_t n_tok, int64_t n_ch, const float* w, int k_rt,
                              float* state, float* y, int64_t ldy, const int32_t* d_pos) {
  const int k = K > 0 ? K : k_rt;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_ch) return;
  const bool fresh = d_pos != nullptr && *d_pos == 0;
  float win[K > 0 ? K : kConvMaxKernel];
  float wc[K > 0 ? K : kConvMaxKernel];
  float* sc = state + c * (k - 1);
#pragma unroll
  for (int j = 0; j < (K > 0 ? K : kConvMaxKernel); ++j) {
    if (j >= k) break;
    wc[j] = w[c * k + j];
    if (j + 1 < k) win[j] = fresh ? 0.0f : sc[j];
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    win[k - 1] = x[t * ldx + c];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < (K > 0 ? K : kConvMaxKernel); ++j) {
      if (j >= k) break;
      sum = ops::add_rn(sum, ops::mul_rn(win[j], wc[j]));
    }
    y[t * ldy + c] = ops::silu(sum);
#pragma unroll
    for (int j = 0; j + 1 < (K > 0 ? K : kConvMaxKernel); ++j) {
      if (j + 1 >= k) break;
      win[j] = win[j + 1];
    }
  }
#pragma unroll
  for (int j = 0; j + 1 < (K > 0 ? K : kConvMaxKernel); ++j) {
    if (j + 1 >= k) break;
    sc[j] = win[j];
  }
}

}  // namespace

void conv1d_causal_silu(const float* x, int64_t ldx, int64_t n_tok, int64_t n_ch, const float* w, int64_t k,
                        float* state, float* y, int64_t ldy, const int32_t* d_pos, cudaStream_t s) {
  if (k < 1 || k > kConvMaxKernel) fail("cuda conv1d: kernel width {} is outside [1, {}]", k, kConvMaxKernel);
  if (n_tok <= 0 || n_ch <= 0) return;
  const dim3 grid(static_cast<unsigned>((n_ch + kThreads - 1) / kThreads));
  // K = 4 (every Qwen3.5/3.6 model) gets a fully unrolled window in registers.
  if (k == 4)
    conv1d_kernel<4><<<grid, kThreads, 0, s>>>(x, ldx, n_tok, n_ch, w, 4, state, y, ldy, d_pos);
  else
    conv1d_kernel<0><<<grid, kThreads, 0, s>>>(x, ldx, n_tok, n_ch, w, static_cast<int>(k), state, y, ldy, d_pos);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
