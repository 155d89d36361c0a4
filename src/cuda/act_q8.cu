// Activation quantiser of the integer GEMV path (act_q8.h). One warp per block of 32: lane
// i quantises element i; the block maximum and the half sums are warp shuffles. The inputs
// are a few KB per token, so this kernel's cost is its launch.
#include "cuda/act_q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cuda/check.h"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"

namespace ft::cuda {
namespace {

using namespace q8_detail;

constexpr int kThreads = 256;

// A warp per block of 32 over the n_tok rows of k values, grid-stride: f(t, j, lane) with
// lane i of the warp on element 32 j + i of row t. The loop of both kernels below.
template <class F>
__device__ __forceinline__ void for_each_block(int64_t k, int64_t n_tok, F&& f) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t blocks_per_row = k / 32;
  const int64_t n_blocks = blocks_per_row * n_tok;
  const int64_t warp0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * kThreads) >> 5;
  for (int64_t b = warp0; b < n_blocks; b += n_warps) f(b / blocks_per_row, b % blocks_per_row, lane);
}

// The block's scale d and the code of this lane's value v (the block maximum by warp
// shuffles): q8_quantize_warp's first steps (q8_tail.cuh, the quantiser's block), without its
// stores.
__device__ __forceinline__ int block_code(float v, float& d) {
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  float id;
  act_q8_scales(amax, d, id);
  return round_half_even(v * id);
}

__global__ void __launch_bounds__(kThreads) quantize_act_q8_kernel(const float* __restrict__ x, int64_t ldx,
                                                                   int64_t k, int64_t n_tok, uint8_t* xq,
                                                                   int64_t row_bytes) {
  pdl_wait();
  pdl_trigger();
  for_each_block(k, n_tok, [&](int64_t t, int64_t j, int lane) {
    q8_quantize_warp(x[t * ldx + 32 * j + lane], j, k, xq + t * row_bytes);
  });
}

// The values quantize_act_q8_kernel codes, as d * q; in place when y == x (each lane reads its
// element before the warp's shuffles and writes it after them).
__global__ void __launch_bounds__(kThreads) round_trip_act_q8_kernel(const float* x, int64_t ldx, int64_t k,
                                                                     int64_t n_tok, float* y, int64_t ldy) {
  pdl_wait();
  pdl_trigger();
  for_each_block(k, n_tok, [&](int64_t t, int64_t j, int lane) {
    float d;
    const int q = block_code(x[t * ldx + 32 * j + lane], d);
    y[t * ldy + 32 * j + lane] = d * static_cast<float>(q);
  });
}

}  // namespace

void round_trip_act_q8(const float* x, int64_t ldx, int64_t k, int64_t n_tok, float* y, int64_t ldy, cudaStream_t s) {
  if (k <= 0 || k % 32 != 0) fail_message("round_trip_act_q8: k = " + std::to_string(k) + " must be a positive multiple of 32");
  if (n_tok < 1) fail_message("round_trip_act_q8: n_tok = " + std::to_string(n_tok) + " must be >= 1");
  const int64_t n_blocks = k / 32 * n_tok;
  const int64_t per_cta = kThreads / 32;
  const int64_t grid = std::min<int64_t>((n_blocks + per_cta - 1) / per_cta, 4096);
  launch_pdl(round_trip_act_q8_kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, s, x, ldx, k, n_tok, y,
             ldy);
  FT_CUDA_CHECK_LAUNCH();
}

void round_trip_act_q8_row_ref(const float* x, int64_t k, float* y) {
  for (int64_t j = 0; j < k / 32; ++j) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * j + i]));
    float d, id;
    act_q8_scales(amax, d, id);
    for (int i = 0; i < 32; ++i) y[32 * j + i] = d * static_cast<float>(round_half_even(x[32 * j + i] * id));
  }
}

int64_t act_q8_row_bytes(int64_t k) { return (k + 8 * (k / 32) + 15) / 16 * 16; }

size_t act_q8_bytes(int64_t k, int64_t n_tok) { return static_cast<size_t>(act_q8_row_bytes(k) * n_tok); }

void quantize_act_q8(const float* x, int64_t ldx, int64_t k, int64_t n_tok, void* xq, cudaStream_t s) {
  if (k <= 0 || k % 32 != 0) fail_message("quantize_act_q8: k = " + std::to_string(k) + " must be a positive multiple of 32");
  if (n_tok < 1) fail_message("quantize_act_q8: n_tok = " + std::to_string(n_tok) + " must be >= 1");
  if (reinterpret_cast<uintptr_t>(xq) % 16 != 0) fail_message("quantize_act_q8: xq must be 16-byte aligned");
  const int64_t n_blocks = k / 32 * n_tok;
  const int64_t per_cta = kThreads / 32;
  const int64_t grid = std::min<int64_t>((n_blocks + per_cta - 1) / per_cta, 4096);
  launch_pdl(quantize_act_q8_kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, s, x,
             ldx, k, n_tok, static_cast<uint8_t*>(xq), act_q8_row_bytes(k));
  FT_CUDA_CHECK_LAUNCH();
}

void quantize_act_q8_row_ref(const float* x, int64_t k, void* row) {
  auto* b = static_cast<uint8_t*>(row);
  std::memset(b, 0, static_cast<size_t>(act_q8_row_bytes(k)));
  for (int64_t j = 0; j < k / 32; ++j) {
    const float* xb = x + 32 * j;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    float d, id;
    act_q8_scales(amax, d, id);
    int s[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const int q = round_half_even(xb[i] * id);
      b[32 * j + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      s[i / 16] += q;
    }
    ActQ8Scale sc;
    sc.d = d;
    sc.s_lo = static_cast<int16_t>(s[0]);
    sc.s_hi = static_cast<int16_t>(s[1]);
    std::memcpy(b + k + 8 * j, &sc, 8);
  }
}

}  // namespace ft::cuda
