// gates.h. Grid (ceil(cols / 256), n_tok), one thread per element: these run on a few
// thousand elements per token, launch-bound.
#include "cuda/gates.h"

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid_f(float x) {
  return ops::div_rn(1.0f, ops::add_rn(1.0f, ops::exp_f32(ops::sub_rn(0.0f, x))));
}

__global__ void split_kernel(const float* raw, int64_t ldr, int64_t n_head, int64_t hd, int64_t kv_cols, float* qkv,
                             int64_t ldq, float* gate, int64_t ldg) {
  const int64_t t = blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t q_dim = n_head * hd;
  const float* row = raw + t * ldr;
  if (c < q_dim) {
    const int64_t h = c / hd, e = c % hd;
    qkv[t * ldq + c] = row[2 * h * hd + e];
    gate[t * ldg + c] = row[(2 * h + 1) * hd + e];
  } else if (c < q_dim + kv_cols) {
    qkv[t * ldq + c] = row[q_dim + c];
  }
}

__global__ void gate_mul_kernel(float* o, int64_t ldo, const float* g, int64_t ldg, int64_t cols, GateAct act,
                                Round r) {
  const int64_t t = blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= cols) return;
  const float gv = g[t * ldg + c];
  const float a = act == GateAct::kSigmoid ? sigmoid_f(gv) : ops::silu(gv);
  o[t * ldo + c] = round_to(r, ops::mul_rn(o[t * ldo + c], a));
}

__global__ void scale_sigmoid_kernel(const float* x, int64_t ldx, const float* logit, int64_t cols, float* y,
                                     int64_t ldy, Round r) {
  const int64_t t = blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= cols) return;
  y[t * ldy + c] = round_to(r, ops::mul_rn(x[t * ldx + c], sigmoid_f(logit[t])));
}

dim3 grid_for(int64_t cols, int64_t n_tok) {
  return dim3(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(n_tok));
}

}  // namespace

void split_q_gate(const float* raw, int64_t ldr, int64_t n_tok, int64_t n_head, int64_t hd, int64_t kv_cols,
                  float* qkv, int64_t ldq, float* gate, int64_t ldg, cudaStream_t s) {
  if (n_tok <= 0) return;
  split_kernel<<<grid_for(n_head * hd + kv_cols, n_tok), kThreads, 0, s>>>(raw, ldr, n_head, hd, kv_cols, qkv, ldq,
                                                                           gate, ldg);
  FT_CUDA_CHECK_LAUNCH();
}

void gate_mul(float* o, int64_t ldo, const float* g, int64_t ldg, int64_t n_tok, int64_t cols, GateAct act, Round r,
              cudaStream_t s) {
  if (n_tok <= 0 || cols <= 0) return;
  gate_mul_kernel<<<grid_for(cols, n_tok), kThreads, 0, s>>>(o, ldo, g, ldg, cols, act, r);
  FT_CUDA_CHECK_LAUNCH();
}

void scale_by_sigmoid(const float* x, int64_t ldx, const float* logit, int64_t n_tok, int64_t cols, float* y,
                      int64_t ldy, Round r, cudaStream_t s) {
  if (n_tok <= 0 || cols <= 0) return;
  scale_sigmoid_kernel<<<grid_for(cols, n_tok), kThreads, 0, s>>>(x, ldx, logit, cols, y, ldy, r);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
