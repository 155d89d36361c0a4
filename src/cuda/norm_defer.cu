// The deferred RMSNorm's stand-alone halves (norm_defer.h): a warp per 32-element block for the
// pieces, one warp for the scale. The fallbacks of gemv.h's GemvArgs::nd_* where the
// tensor-core GEMV does not take the call, and the twins its tests diff it against.
#include "cuda/norm_defer.h"

#include <string>

#include "cuda/check.h"
#include "cuda/norm_defer.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

__global__ void pieces_kernel(const float* x, const float* w, int64_t n, uint8_t* xq, double* ss) {
  pdl_wait();
  pdl_trigger();
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (j >= n / 32) return;  // whole warps
  const int64_t i = 32 * j + (threadIdx.x & 31);
  norm_defer::block_pieces(x[i], w != nullptr ? w[i] : 1.0f, j, n, xq, ss);
}

// One warp: lane l sums ss[l + 32 i] for every i in order, then the xor tree -- norm_defer::scale_of's
// order (its zero padding adds nothing to a sum of squares).
__global__ void scale_kernel(float* y, int64_t rows, const double* ss, int64_t n, float eps) {
  pdl_wait();
  pdl_trigger();
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t nb = n / 32;
  double s = lane < nb ? ss[lane] : 0.0;
  for (int64_t b = lane + 32; b < nb; b += 32) s += ss[b];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
  const float sc = ops::div_rn(1.0f, __fsqrt_rn(ops::add_rn(static_cast<float>(s / static_cast<double>(n)), eps)));
  for (int64_t r = lane; r < rows; r += 32) y[r] = __fmul_rn(y[r], sc);
}

void check_n(const char* what, int64_t n) {
  if (n <= 0 || n % 32 != 0)
    fail_message(std::string(what) + ": row length " + std::to_string(n) + " must be a positive multiple of 32");
}

}  // namespace

void norm_defer_pieces(const float* x, const float* w, int64_t n, void* xq, double* ss, cudaStream_t s) {
  check_n("norm_defer_pieces", n);
  if (reinterpret_cast<uintptr_t>(xq) % 16 != 0) fail_message("norm_defer_pieces: the Q8 row must be 16-byte aligned");
  const int64_t blocks = (n / 32 + kWarpsPerBlock - 1) / kWarpsPerBlock;
  launch_pdl(pieces_kernel, dim3(static_cast<unsigned>(blocks)), dim3(32 * kWarpsPerBlock), 0, s, x, w, n,
             static_cast<uint8_t*>(xq), ss);
}

void norm_defer_scale(float* y, int64_t rows, const double* ss, int64_t n, float eps, cudaStream_t s) {
  check_n("norm_defer_scale", n);
  if (rows <= 0) fail_message("norm_defer_scale: rows = " + std::to_string(rows) + " must be positive");
  launch_pdl(scale_kernel, dim3(1), dim3(32), 0, s, y, rows, ss, n, eps);
}

}  // namespace ft::cuda
