// deltanet.h. deltanet_prepare: grid (n_tok, 2 H_k + 1), a warp per q or k head (the last
// row of blocks computes decay and beta). deltanet_recurrent<D>: grid (H_v, D / 32 row
// groups), 4 threads per row of S, thread part p holding columns p, p + 4, ... in registers;
// the row's dot products are summed over the 4 parts by two xor shuffles.
//
// Rounding follows the CPU twin: the L2 norm's sum of squares in double and its scale in
// fp32 (build_gdn_l2_norm as engine::rmsnorm_row with eps/d, then * 1/sqrt(d)); softplus and
// sigmoid in fp32 with exp/log correctly rounded; decay and rank-1 update as fma (ggml's
// vec_mad). The CPU's dot_f32 folds 32 partial sums in another order, so outputs agree to a
// few ulp (the test's tolerance).
#include "cuda/deltanet.h"

#include <cmath>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"

namespace ft::cuda {
namespace {

__device__ __forceinline__ float sigmoid_f(float x) {
  return ops::div_rn(1.0f, ops::add_rn(1.0f, ops::exp_f32(ops::sub_rn(0.0f, x))));
}

// ggml's softplus: log(1 + e^x), linear above 20.
__device__ __forceinline__ float softplus_f(float x) {
  if (x > 20.0f) return x;
  const float t = ops::add_rn(1.0f, ops::exp_f32(x));
  return static_cast<float>(log(static_cast<double>(t)));
}

__global__ void prepare_kernel(DeltaNetArgs p, float* y, float* gb, float eps_l2, float inv_sqrt_d) {
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x;
  if (blockIdx.y == gridDim.y - 1) {  // gates of every value head
    for (int64_t j = lane; j < p.n_v_heads; j += 32) {
      const float beta = sigmoid_f(p.beta[t * p.ldg + j]);
      const float g = ops::mul_rn(softplus_f(ops::add_rn(p.alpha[t * p.ldg + j], p.dt_bias[j])), p.a[j]);
      gb[(t * p.n_v_heads + j) * 3 + 0] = ops::exp_f32(g);
      gb[(t * p.n_v_heads + j) * 3 + 1] = beta;
      gb[(t * p.n_v_heads + j) * 3 + 2] = g;
    }
    return;
  }
  float* x = y + t * p.ldy + blockIdx.y * p.d;  // q heads, then k heads
  double sum = 0.0;
  for (int64_t c = lane; c < p.d; c += 32) sum += static_cast<double>(ops::mul_rn(x[c], x[c]));
  sum = ops::warp_sum(sum);
  const float mean = static_cast<float>(sum / static_cast<double>(p.d));
  const float s = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps_l2)));
  for (int64_t c = lane; c < p.d; c += 32) x[c] = ops::mul_rn(ops::mul_rn(x[c], s), inv_sqrt_d);
}

template <int D>
__global__ void __launch_bounds__(128) recurrent_kernel(DeltaNetArgs p, const float* gb, float scale) {
  constexpr int kRowsPerBlock = D < 32 ? D : 32;
  constexpr int kCols = D / 4;  // per thread
  const int64_t j = blockIdx.x;
  const int64_t i = j % p.n_k_heads;
  const int part = threadIdx.x & 3;
  const int r = blockIdx.y * kRowsPerBlock + (threadIdx.x >> 2);
  const bool fresh = p.d_pos != nullptr && *p.d_pos == 0;
  float* Sg = p.state + (j * D + r) * D;
  float s[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) s[c] = fresh ? 0.0f : Sg[part + 4 * c];
  const int64_t key_dim = p.n_k_heads * D;
  for (int64_t t = 0; t < p.n_tok; ++t) {
    const float* yt = p.y + t * p.ldy;
    const float* q = yt + i * D + part;
    const float* k = yt + key_dim + i * D + part;
    const float v = yt[2 * key_dim + j * D + r];
    const float decay = gb[(t * p.n_v_heads + j) * 3 + 0];
    const float beta = gb[(t * p.n_v_heads + j) * 3 + 1];
    float kr[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) kr[c] = k[4 * c];
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      s[c] = ops::mul_rn(s[c], decay);
      dot = ops::fma_rn(s[c], kr[c], dot);
    }
    dot = ops::add_rn(dot, __shfl_xor_sync(0xffffffffu, dot, 1));
    dot = ops::add_rn(dot, __shfl_xor_sync(0xffffffffu, dot, 2));
    const float u = ops::mul_rn(ops::sub_rn(v, dot), beta);
    float od = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      s[c] = ops::fma_rn(kr[c], u, s[c]);
      od = ops::fma_rn(s[c], q[4 * c], od);
    }
    od = ops::add_rn(od, __shfl_xor_sync(0xffffffffu, od, 1));
    od = ops::add_rn(od, __shfl_xor_sync(0xffffffffu, od, 2));
    if (part == 0) p.out[t * p.ldo + j * D + r] = ops::mul_rn(od, scale);
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) Sg[part + 4 * c] = s[c];
}

template <int D>
void launch(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s) {
  constexpr int kRowsPerBlock = D < 32 ? D : 32;
  const dim3 grid(static_cast<unsigned>(a.n_v_heads), D / kRowsPerBlock);
  recurrent_kernel<D><<<grid, kRowsPerBlock * 4, 0, s>>>(a, gb, scale);
}

}  // namespace

bool deltanet_supported(int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }

void deltanet_check(const DeltaNetArgs& a) {
  if (!deltanet_supported(a.d))
    fail("cuda deltanet: head size (ssm.state_size) {} is not one of 16, 32, 64, 128", a.d);
  if (a.n_k_heads <= 0 || a.n_v_heads % a.n_k_heads != 0)
    fail("cuda deltanet: {} value heads are not a multiple of {} key heads", a.n_v_heads, a.n_k_heads);
}

void deltanet_prepare(const DeltaNetArgs& a, float* gb, cudaStream_t s) {
  const float fd = static_cast<float>(a.d);
  const float eps_l2 = a.eps / fd;
  const float inv_sqrt_d = 1.0f / std::sqrt(fd);
  prepare_kernel<<<dim3(static_cast<unsigned>(a.n_tok), static_cast<unsigned>(2 * a.n_k_heads + 1)), 32, 0, s>>>(
      a, a.y, gb, eps_l2, inv_sqrt_d);
  FT_CUDA_CHECK_LAUNCH();
}

void deltanet_recurrent(const DeltaNetArgs& a, float* gb, cudaStream_t s) {
  deltanet_check(a);
  if (a.n_tok <= 0) return;
  deltanet_prepare(a, gb, s);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(a.d));
  switch (a.d) {
    case 16: launch<16>(a, gb, inv_sqrt_d, s); break;
    case 32: launch<32>(a, gb, inv_sqrt_d, s); break;
    case 64: launch<64>(a, gb, inv_sqrt_d, s); break;
    default: launch<128>(a, gb, inv_sqrt_d, s); break;
  }
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
