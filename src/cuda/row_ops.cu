// Row ops (row_ops.h): grid-stride elementwise kernels, one block row per token; the value
// norm is one warp per head with the double sum of cuda/norm.cu.
#include "cuda/row_ops.h"

#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

dim3 row_grid(int64_t n_tok, int64_t n) {
  const int64_t slices = (n + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(n_tok), static_cast<unsigned>(slices < 64 ? slices : 64));
}

__global__ void scale_rows_kernel(float* x, int64_t ldx, int64_t n, float a, const float* w, Round r) {
  float* row = x + static_cast<int64_t>(blockIdx.x) * ldx;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    float v = ops::mul_rn(row[i], a);
    if (w != nullptr) v = ops::mul_rn(v, w[i]);
    row[i] = round_to(r, v);
  }
}

__global__ void add_scale_rows_kernel(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, float a,
                                      Round r) {
  float* row = x + static_cast<int64_t>(blockIdx.x) * ldx;
  const float* yr = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x)
    row[i] = round_to(r, ops::mul_rn(ops::add_rn(row[i], yr[i]), a));
}

__global__ void softcap_kernel(float* x, int64_t ldx, int64_t n, float inv, float cap) {
  float* row = x + static_cast<int64_t>(blockIdx.x) * ldx;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const float t = static_cast<float>(tanh(static_cast<double>(ops::mul_rn(row[i], inv))));
    row[i] = ops::mul_rn(t, cap);
  }
}

constexpr int kHeadWarps = 4;

__global__ void head_rmsnorm_kernel(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t n_tok,
                                    int64_t n_head, int64_t hd, float eps, Round r) {
  const int64_t head = static_cast<int64_t>(blockIdx.x) * kHeadWarps + threadIdx.x / 32;
  if (head >= n_tok * n_head) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = head / n_head, h = head % n_head;
  const float* x = src + t * lds + h * hd;
  float* y = dst + t * ldd + h * hd;
  double sum = 0.0;
  for (int64_t i = lane; i < hd; i += 32) sum += static_cast<double>(ops::mul_rn(x[i], x[i]));
  sum = ops::warp_sum(sum);
  const float mean = static_cast<float>(sum / static_cast<double>(hd));
  const float sc = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
  // Every lane has read its elements before any writes them (dst may alias src).
  for (int64_t i = lane; i < hd; i += 32) y[i] = round_to(r, ops::mul_rn(x[i], sc));
}

}  // namespace

void scale_rows(float* x, int64_t ldx, int64_t n, int64_t n_tok, float a, const float* w, Round r,
                cudaStream_t s) {
  if (n_tok <= 0 || n <= 0) return;
  scale_rows_kernel<<<row_grid(n_tok, n), kThreads, 0, s>>>(x, ldx, n, a, w, r);
  FT_CUDA_CHECK_LAUNCH();
}

void add_scale_rows(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t n_tok, float a,
                    Round r, cudaStream_t s) {
  if (n_tok <= 0 || n <= 0) return;
  add_scale_rows_kernel<<<row_grid(n_tok, n), kThreads, 0, s>>>(x, ldx, y, ldy, n, a, r);
  FT_CUDA_CHECK_LAUNCH();
}

void softcap(float* x, int64_t ldx, int64_t n, int64_t n_tok, float cap, cudaStream_t s) {
  if (n_tok <= 0 || n <= 0) return;
  if (!(cap > 0.0f)) fail_message("softcap: the cap must be > 0, got " + std::to_string(cap));
  softcap_kernel<<<row_grid(n_tok, n), kThreads, 0, s>>>(x, ldx, n, 1.0f / cap, cap);
  FT_CUDA_CHECK_LAUNCH();
}

void head_rmsnorm(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t n_tok, int64_t n_head,
                  int64_t hd, float eps, Round r, cudaStream_t s) {
  if (n_tok <= 0 || n_head <= 0) return;
  const int64_t heads = n_tok * n_head;
  head_rmsnorm_kernel<<<static_cast<unsigned>((heads + kHeadWarps - 1) / kHeadWarps), 32 * kHeadWarps, 0, s>>>(
      src, lds, dst, ldd, n_tok, n_head, hd, eps, r);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
