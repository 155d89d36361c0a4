// GeGLU (geglu.h): one block per (row, slice of 1024 columns), 4 columns per thread; the gelu
// table sits in device global memory (128 KiB, L2-resident after the first reads).
#include "cuda/geglu.h"

#include <cuda_fp16.h>

#include <string>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/ops_math.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;

__device__ uint16_t g_gelu_f16[65536];
bool g_table_ready = false;

__device__ __forceinline__ float gelu_dev(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const uint16_t i = __half_as_ushort(__float2half_rn(x));
  return __half2float(__ushort_as_half(g_gelu_f16[i]));
}

__global__ void geglu_kernel(const float* gu, int64_t ldgu, int64_t n_ff, float* h, int64_t ldh, Round r,
                             uint8_t* xq, int64_t xq_row_bytes) {
  const int64_t t = blockIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kThreads * kPerThread;
  const int64_t j = c0 + static_cast<int64_t>(threadIdx.x) * kPerThread;
  const float* g = gu + t * ldgu;
  float* o = h + t * ldh;
  for (int64_t i = j; i < j + kPerThread && i < n_ff; ++i) {
    const float x = g[i];
    // x <= -10: ggml writes 0 without reading the up value (0 * inf would be NaN).
    o[i] = round_to(r, x <= -10.0f ? 0.0f : ops::mul_rn(gelu_dev(x), g[n_ff + i]));
  }
  if (xq != nullptr) {
    __syncthreads();
    const int64_t c1 = c0 + kThreads * kPerThread < n_ff ? c0 + kThreads * kPerThread : n_ff;
    q8_quantize_segment(o, c0, c1, n_ff, xq + t * xq_row_bytes);
  }
}

__global__ void gelu_mul_kernel(float* x, int64_t ldx, const float* m, int64_t ldm, int64_t n, Round r) {
  const int64_t t = blockIdx.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    float* v = x + t * ldx + i;
    *v = round_to(r, ops::mul_rn(round_to(r, gelu_dev(*v)), m[t * ldm + i]));
  }
}

void check_ready(const char* who) {
  if (!g_table_ready)
    fail_message(std::string(who) + ": the gelu table was not uploaded (call cuda::gelu_table_set first)");
}

}  // namespace

void gelu_table_set(const uint16_t* host_table) {
  FT_CUDA_CHECK(cudaMemcpyToSymbol(g_gelu_f16, host_table, sizeof(uint16_t) * 65536));
  g_table_ready = true;
}

bool gelu_table_ready() { return g_table_ready; }

void geglu(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
           cudaStream_t s) {
  geglu_q8(gu, ldgu, n_ff, n_tok, h, ldh, r, nullptr, s);
}

void geglu_q8(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
              void* xq_out, cudaStream_t s) {
  if (n_tok <= 0 || n_ff <= 0) return;
  check_ready("geglu");
  if (xq_out != nullptr && (n_ff % 32 != 0 || reinterpret_cast<uintptr_t>(xq_out) % 16 != 0))
    fail_message("geglu: a Q8 copy needs n_ff % 32 == 0 and a 16-byte aligned buffer (n_ff = " +
                 std::to_string(n_ff) + ")");
  if (ldgu < 2 * n_ff) fail_message("geglu: gate|up row stride " + std::to_string(ldgu) + " is below 2*n_ff");
  const dim3 grid(static_cast<unsigned>(n_tok),
                  static_cast<unsigned>((n_ff + kThreads * kPerThread - 1) / (kThreads * kPerThread)));
  geglu_kernel<<<grid, kThreads, 0, s>>>(gu, ldgu, n_ff, h, ldh, r, static_cast<uint8_t*>(xq_out),
                                         act_q8_row_bytes(n_ff));
  FT_CUDA_CHECK_LAUNCH();
}

void gelu_mul(float* x, int64_t ldx, const float* m, int64_t ldm, int64_t n, int64_t n_tok, Round r,
              cudaStream_t s) {
  if (n_tok <= 0 || n <= 0) return;
  check_ready("gelu_mul");
  const unsigned slices = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  gelu_mul_kernel<<<dim3(static_cast<unsigned>(n_tok), slices < 64 ? slices : 64), kThreads, 0, s>>>(x, ldx, m, ldm,
                                                                                                  n, r);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
