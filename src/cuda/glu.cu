// SwiGLU (glu.h): a 2-D grid, blockIdx.x the row and blockIdx.y a slice of 4 * 256 columns;
// each thread does 4 consecutive columns (float4 loads and stores when the rows allow it).
// n_ff 12288-14336 at decode is 12-14 blocks: one wave, launch-bound.
#include "cuda/glu.h"

#include <string>

#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;

__device__ __forceinline__ float swiglu1(float g, float u, Round r) { return round_to(r, ops::mul_rn(ops::silu(g), u)); }

template <bool kVec>
__global__ void swiglu_kernel(const float* gu, int64_t ldgu, int64_t n_ff, float* h, int64_t ldh, Round r,
                              uint8_t* xq, int64_t xq_row_bytes) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kThreads * kPerThread;
  const int64_t j = c0 + static_cast<int64_t>(threadIdx.x) * kPerThread;
  const float* g = gu + t * ldgu;
  float* o = h + t * ldh;
  if constexpr (kVec) {  // n_ff % 4 == 0: the 4 columns are all in range
    if (j >= n_ff) return;
    const float4 a = *reinterpret_cast<const float4*>(g + j);
    const float4 b = *reinterpret_cast<const float4*>(g + n_ff + j);
    const float4 v = make_float4(swiglu1(a.x, b.x, r), swiglu1(a.y, b.y, r), swiglu1(a.z, b.z, r),
                                 swiglu1(a.w, b.w, r));
    *reinterpret_cast<float4*>(o + j) = v;
    // The Q8 copy straight from registers (n_ff % 32 == 0 whenever xq is set, so a 32-column
    // block's 8 lanes are all here).
    if (xq != nullptr) q8_quantize_quad(v, j, n_ff, xq + t * xq_row_bytes);
  } else {
    for (int64_t i = j; i < j + kPerThread && i < n_ff; ++i) o[i] = swiglu1(g[i], g[n_ff + i], r);
    if (xq != nullptr) {  // every thread reaches the barrier (none returned above)
      __syncthreads();
      const int64_t c1 = c0 + kThreads * kPerThread < n_ff ? c0 + kThreads * kPerThread : n_ff;
      q8_quantize_segment(o, c0, c1, n_ff, xq + t * xq_row_bytes);
    }
  }
}

}  // namespace

void swiglu(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
            cudaStream_t s) {
  swiglu_q8(gu, ldgu, n_ff, n_tok, h, ldh, r, nullptr, s);
}

void swiglu_q8(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
               void* xq_out, cudaStream_t s) {
  if (n_tok <= 0 || n_ff <= 0) return;
  if (xq_out != nullptr && (n_ff % 32 != 0 || reinterpret_cast<uintptr_t>(xq_out) % 16 != 0))
    fail_message("swiglu: a Q8 copy needs n_ff % 32 == 0 and a 16-byte aligned buffer (n_ff = " + std::to_string(n_ff) + ")");
  auto* xq = static_cast<uint8_t*>(xq_out);
  const int64_t xrb = act_q8_row_bytes(n_ff);
  if (ldgu < 2 * n_ff) fail_message("swiglu: gate|up row stride " + std::to_string(ldgu) + " is below 2*n_ff");
  const bool vec = n_ff % 4 == 0 && ldgu % 4 == 0 && ldh % 4 == 0 && reinterpret_cast<uintptr_t>(gu) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(h) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(n_tok),
                  static_cast<unsigned>((n_ff + kThreads * kPerThread - 1) / (kThreads * kPerThread)));
  if (vec)
    launch_pdl(swiglu_kernel<true>, dim3(grid), dim3(kThreads), 0, s, gu, ldgu, n_ff, h, ldh, r, xq,
               xrb);
  else
    launch_pdl(swiglu_kernel<false>, dim3(grid), dim3(kThreads), 0, s, gu, ldgu, n_ff, h, ldh, r,
               xq, xrb);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
