// Row helpers (rows.h): one block of 256 threads per output row, columns strided, plain
// coalesced fp32 accesses (these move a few rows per step; the launch dominates).
#include "cuda/rows.h"

#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gather_kernel(const float* x, int64_t ldx, const int32_t* idx, int64_t idx_div, int64_t cols,
                              float* y, int64_t ldy) {
  const int64_t i = blockIdx.x;
  const float* src = x + static_cast<int64_t>(idx[i]) / idx_div * ldx;
  float* dst = y + i * ldy;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
}

__global__ void add_kernel(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t cols, float* y,
                           int64_t ldy) {
  const int64_t i = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[i * ldy + c] = ops::add_rn(a[i * lda + c], b[i * ldb + c]);
}

__global__ void copy_kernel(const float* x, int64_t ldx, int64_t cols, float* y, int64_t ldy, Round r) {
  const int64_t i = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[i * ldy + c] = round_to(r, x[i * ldx + c]);
}

__global__ void combine_kernel(const float* yd, int64_t ldyd, const int32_t* slot_of, const float* weights,
                               int n_used, int64_t cols, float* out, int64_t ldo, Round r) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < n_used; ++k) {
      const int64_t slot = t * n_used + k;
      const int64_t row = slot_of != nullptr ? slot_of[slot] : slot;
      const float p = ops::mul_rn(yd[row * ldyd + c], weights[slot]);
      acc = k == 0 ? p : ops::add_rn(acc, p);
    }
    out[t * ldo + c] = round_to(r, acc);
  }
}

void check_rows(const char* what, int64_t n) {
  if (n > 0x7fffffff) fail_message(std::string(what) + ": " + std::to_string(n) + " rows exceed the grid limit");
}

}  // namespace

void gather_rows(const float* x, int64_t ldx, const int32_t* idx, int64_t idx_div, int64_t n, int64_t cols,
                 float* y, int64_t ldy, cudaStream_t s) {
  if (n <= 0 || cols <= 0) return;
  check_rows("gather_rows", n);
  if (idx_div <= 0) fail_message("gather_rows: idx_div " + std::to_string(idx_div) + " must be positive");
  gather_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, ldx, idx, idx_div, cols, y, ldy);
  FT_CUDA_CHECK_LAUNCH();
}

void add_rows(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t n, int64_t cols, float* y,
              int64_t ldy, cudaStream_t s) {
  if (n <= 0 || cols <= 0) return;
  check_rows("add_rows", n);
  add_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(a, lda, b, ldb, cols, y, ldy);
  FT_CUDA_CHECK_LAUNCH();
}

void copy_rows(const float* x, int64_t ldx, int64_t n, int64_t cols, float* y, int64_t ldy, Round r,
               cudaStream_t s) {
  if (n <= 0 || cols <= 0) return;
  check_rows("copy_rows", n);
  copy_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, ldx, cols, y, ldy, r);
  FT_CUDA_CHECK_LAUNCH();
}

void moe_combine(const float* yd, int64_t ldyd, const int32_t* slot_of, const float* weights, int n_used,
                 int64_t n_tok, int64_t cols, float* out, int64_t ldo, Round r, cudaStream_t s) {
  if (n_tok <= 0 || cols <= 0) return;
  check_rows("moe_combine", n_tok);
  if (n_used <= 0) fail_message("moe_combine: n_used " + std::to_string(n_used) + " must be positive");
  combine_kernel<<<static_cast<unsigned>(n_tok), kThreads, 0, s>>>(yd, ldyd, slot_of, weights, n_used, cols, out,
                                                                   ldo, r);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
