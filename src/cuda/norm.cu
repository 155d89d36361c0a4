// RMSNorm (norm.h): one block per row; each thread keeps its stripe's partial sum of squares
// in double, a warp-shuffle tree finishes it, and the row is read a second time (from L1/L2)
// to scale it. At decode sizes (n_embd 2048-4096, one row) the launch dominates.
#include "cuda/norm.h"

#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/ops_reduce.cuh"
#include "cuda/pdl.cuh"
#include "cuda/norm_row.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
bool g_norm_reg = true;

// kAdd: x += b first (written back). kVec: rows 16-byte aligned, n % 4 == 0: float4 access.
template <bool kAdd, bool kVec>
__global__ void rmsnorm_kernel(float* x, int64_t ldx, const float* b, int64_t ldb, const float* w, int64_t n,
                               float eps, float* y, int64_t ldy, Round r, uint8_t* xq, int64_t xq_row_bytes) {
  pdl_wait();
  pdl_trigger();
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x;
  float* xr = x + t * ldx;
  const float* br = kAdd ? b + t * ldb : nullptr;
  float* yr = y + t * ldy;
  double sum = 0.0;
  if constexpr (kVec) {
    for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < n; i += 4 * blockDim.x) {
      float4 v = *reinterpret_cast<const float4*>(xr + i);
      if constexpr (kAdd) {
        const float4 a = *reinterpret_cast<const float4*>(br + i);
        v.x = ops::add_rn(v.x, a.x), v.y = ops::add_rn(v.y, a.y), v.z = ops::add_rn(v.z, a.z),
        v.w = ops::add_rn(v.w, a.w);
        *reinterpret_cast<float4*>(xr + i) = v;
      }
      sum += static_cast<double>(ops::mul_rn(v.x, v.x));
      sum += static_cast<double>(ops::mul_rn(v.y, v.y));
      sum += static_cast<double>(ops::mul_rn(v.z, v.z));
      sum += static_cast<double>(ops::mul_rn(v.w, v.w));
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float v = xr[i];
      if constexpr (kAdd) {
        v = ops::add_rn(v, br[i]);
        xr[i] = v;
      }
      sum += static_cast<double>(ops::mul_rn(v, v));
    }
  }
  sum = ops::block_sum(sum, scratch);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(mean, eps)));
  // Each thread reads back only the elements it wrote above (same striding).
  if constexpr (kVec) {
    for (int64_t i = 4 * static_cast<int64_t>(threadIdx.x); i < n; i += 4 * blockDim.x) {
      const float4 v = *reinterpret_cast<const float4*>(xr + i);
      const float4 g = w != nullptr ? *reinterpret_cast<const float4*>(w + i) : make_float4(1, 1, 1, 1);
      *reinterpret_cast<float4*>(yr + i) = norm_row::scale_quad(v, scale, w != nullptr, g, r);
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float o = ops::mul_rn(xr[i], scale);
      if (w != nullptr) o = ops::mul_rn(o, w[i]);
      yr[i] = round_to(r, o);
    }
  }
  if (xq != nullptr) {
    __syncthreads();
    q8_quantize_segment(yr, 0, n, n, xq + t * xq_row_bytes);
  }
}

// The decode shape (16-byte aligned rows, n % 32 == 0, n <= NV * 1024): the row stays in
// registers from its one load to the Q8 copy, so the kernel makes one trip to global memory
// instead of three (load, reload to scale, reload to quantise), and the weights are fetched
// before pdl_wait (they do not depend on the kernel before). Thread i holds float4 i,
// i + 256, ...: the same elements in the same order as rmsnorm_kernel<kAdd, true>, so the
// double sum and every output are bit-identical to it; a Q8 block of 32 is 8 consecutive
// lanes, quantised as q8_quantize_segment does (same amax, scales, codes and half sums).
template <bool kAdd, int NV>
__global__ void __launch_bounds__(kThreads) rmsnorm_reg_kernel(float* x, int64_t ldx, const float* b, int64_t ldb,
                                                               const float* w, int64_t n, float eps, float* y,
                                                               int64_t ldy, Round r, uint8_t* xq,
                                                               int64_t xq_row_bytes) {
  static_assert(kThreads == norm_row::kThreads, "norm_row's thread layout");
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x;
  float4 g[NV];
  norm_row::load_weights(w, n, g);
  pdl_wait();
  pdl_trigger();
  float4 o[NV];
  norm_row::normalize<kAdd, NV>(x + t * ldx, kAdd ? b + t * ldb : nullptr, g, w != nullptr, n, eps, y + t * ldy, r,
                                xq != nullptr ? xq + t * xq_row_bytes : nullptr, scratch, o);
}

// Launches the register kernel when the row fits (NV float4 per thread, at most 8: n <=
// 8192); false otherwise.
template <bool kAdd>
bool launch_reg(unsigned grid, float* x, int64_t ldx, const float* b, int64_t ldb, const float* w, int64_t n,
                float eps, float* y, int64_t ldy, Round r, uint8_t* xq, int64_t xrb, cudaStream_t s) {
  const int64_t nv = (n + 4 * kThreads - 1) / (4 * kThreads);
  auto go = [&](auto kernel) {
    launch_pdl(kernel, dim3(grid), dim3(kThreads), 0, s, x, ldx, b, ldb, w, n, eps, y, ldy, r, xq, xrb);
    return true;
  };
  if (n % 32 != 0) return false;
  if (nv <= 1) return go(rmsnorm_reg_kernel<kAdd, 1>);
  if (nv <= 2) return go(rmsnorm_reg_kernel<kAdd, 2>);
  if (nv <= 4) return go(rmsnorm_reg_kernel<kAdd, 4>);
  if (nv <= 8) return go(rmsnorm_reg_kernel<kAdd, 8>);
  return false;
}

// FT_CUDA_NORM_REG=0 keeps every row on rmsnorm_kernel (tests compare the two).
bool reg_path_enabled() { return g_norm_reg; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void run(float* x, int64_t ldx, const float* b, int64_t ldb, const float* w, int64_t n, float eps, int64_t n_tok,
         float* y, int64_t ldy, Round r, cudaStream_t s, void* xq_out = nullptr) {
  if (n_tok <= 0) return;
  if (xq_out != nullptr && (n % 32 != 0 || reinterpret_cast<uintptr_t>(xq_out) % 16 != 0))
    fail_message("rmsnorm: a Q8 copy needs n % 32 == 0 and a 16-byte aligned buffer (n = " + std::to_string(n) + ")");
  auto* xq = static_cast<uint8_t*>(xq_out);
  const int64_t xrb = act_q8_row_bytes(n);
  if (n <= 0) fail_message("rmsnorm: row length " + std::to_string(n) + " must be positive");
  const bool vec = n % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && aligned16(x) && aligned16(y) &&
                   (w == nullptr || aligned16(w)) && (b == nullptr || (ldb % 4 == 0 && aligned16(b)));
  const unsigned grid = static_cast<unsigned>(n_tok);
  if (vec && reg_path_enabled()) {
    const bool done = b != nullptr ? launch_reg<true>(grid, x, ldx, b, ldb, w, n, eps, y, ldy, r, xq, xrb, s)
                                   : launch_reg<false>(grid, x, ldx, nullptr, 0, w, n, eps, y, ldy, r, xq, xrb, s);
    if (done) return FT_CUDA_CHECK_LAUNCH();
  }
  if (b != nullptr) {
    if (vec)
      launch_pdl(rmsnorm_kernel<true, true>, dim3(grid), dim3(kThreads), 0, s, x, ldx, b, ldb, w, n,
                 eps, y, ldy, r, xq, xrb);
    else
      launch_pdl(rmsnorm_kernel<true, false>, dim3(grid), dim3(kThreads), 0, s, x, ldx, b, ldb, w,
                 n, eps, y, ldy, r, xq, xrb);
  } else {
    if (vec)
      launch_pdl(rmsnorm_kernel<false, true>, dim3(grid), dim3(kThreads), 0, s, x, ldx, nullptr, 0,
                 w, n, eps, y, ldy, r, xq, xrb);
    else
      launch_pdl(rmsnorm_kernel<false, false>, dim3(grid), dim3(kThreads), 0, s, x, ldx, nullptr, 0,
                 w, n, eps, y, ldy, r, xq, xrb);
  }
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rmsnorm_set_register_path(bool on) { g_norm_reg = on; }

void rmsnorm(const float* x, int64_t ldx, const float* w, int64_t n, float eps, int64_t n_tok, float* y,
             int64_t ldy, Round r, cudaStream_t s) {
  // The kernel writes x only when adding; the const_cast keeps one kernel for both.
  run(const_cast<float*>(x), ldx, nullptr, 0, w, n, eps, n_tok, y, ldy, r, s);
}

void rmsnorm_q8(const float* x, int64_t ldx, const float* w, int64_t n, float eps, int64_t n_tok, float* y,
                int64_t ldy, Round r, void* xq, cudaStream_t s) {
  run(const_cast<float*>(x), ldx, nullptr, 0, w, n, eps, n_tok, y, ldy, r, s, xq);
}

void add_rmsnorm(float* x, int64_t ldx, const float* b, int64_t ldb, const float* w, int64_t n, float eps,
                 int64_t n_tok, float* y, int64_t ldy, Round r, cudaStream_t s) {
  if (b == nullptr) fail_message("add_rmsnorm: the added rows b must not be null");
  run(x, ldx, b, ldb, w, n, eps, n_tok, y, ldy, r, s);
}

}  // namespace ft::cuda
