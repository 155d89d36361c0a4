// gemv_half.h: one warp per R rows; lane l takes the 8-element pieces l, l + 32, ... of each
// row. Loads are issued in groups of kU pieces x R rows before any math, so every lane keeps
// kU * R 16-byte weight loads in flight (L1::no_allocate: read once); X pieces come through
// __ldg and stay in L1 for the other warps.
#include "cuda/gemv_half.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "cuda/check.h"
#include "cuda/pdl.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr int kWarps = 8;  // per CTA
constexpr int kU = 4;      // pieces per lane per group

__device__ __forceinline__ uint4 ld_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The two halves of a 32-bit word as floats (element 2i in the low half).
template <bool kBF16>
__device__ __forceinline__ void widen(uint32_t u, float& lo, float& hi) {
  if constexpr (kBF16) {
    lo = __uint_as_float(u << 16);
    hi = __uint_as_float(u & 0xFFFF0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u));
    lo = f.x;
    hi = f.y;
  }
}

template <bool kBF16, int NT, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_half_kernel(const uint8_t* __restrict__ w, int64_t row_bytes,
                                                                int64_t k, int64_t rows, const float* __restrict__ x,
                                                                int64_t ldx, int n_tok, float* y, int64_t ldy,
                                                                const float* row_scale, float scale, Round round,
                                                                int accumulate) {
  pdl_wait();
  pdl_trigger();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * R;
  if (row0 >= rows) return;
  const int nr = rows - row0 < R ? static_cast<int>(rows - row0) : R;
  const int64_t n_pieces = k / 8;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  for (int64_t g = lane; g < n_pieces; g += 32 * kU) {
    uint4 wv[kU][R] = {};
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t pc = g + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (pc < n_pieces && r < nr) wv[u][r] = ld_stream(w + (row0 + r) * row_bytes + pc * 16);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t pc = g + 32 * u;
      if (pc >= n_pieces) break;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tok) break;
        const float4* xp = reinterpret_cast<const float4*>(x + t * ldx + pc * 8);
        const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= nr) break;
          float f[8];
          widen<kBF16>(wv[u][r].x, f[0], f[1]);
          widen<kBF16>(wv[u][r].y, f[2], f[3]);
          widen<kBF16>(wv[u][r].z, f[4], f[5]);
          widen<kBF16>(wv[u][r].w, f[6], f[7]);
          float s = acc[r][t];
          s = fmaf(f[0], a.x, s);
          s = fmaf(f[1], a.y, s);
          s = fmaf(f[2], a.z, s);
          s = fmaf(f[3], a.w, s);
          s = fmaf(f[4], b.x, s);
          s = fmaf(f[5], b.y, s);
          s = fmaf(f[6], b.z, s);
          s = fmaf(f[7], b.w, s);
          acc[r][t] = s;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][t] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][t], o);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= nr) break;
    const int64_t row = row0 + r;
    const float s = row_scale != nullptr ? row_scale[row] * scale : scale;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= n_tok) break;
      const float v = round_to(round, __fmul_rn(acc[r][t], s));
      float* yp = y + t * ldy + row;
      *yp = accumulate ? __fadd_rn(*yp, v) : v;
    }
  }
}

template <bool kBF16, int NT>
void launch(const GemvArgs& a, cudaStream_t s) {
  // Rows per warp: 2 for one or two tokens (each X piece serves two rows; 8 loads of 16 B
  // in flight per lane), 1 beyond (accumulator registers).
  constexpr int R = NT <= 2 ? 2 : 1;
  const int64_t warps = (a.rows + R - 1) / R;
  const unsigned grid = static_cast<unsigned>((warps + kWarps - 1) / kWarps);
  launch_pdl(gemv_half_kernel<kBF16, NT, R>, dim3(grid), dim3(kWarps * 32), 0, s, a.w, a.row_bytes, a.k, a.rows,
             a.x, a.ldx, static_cast<int>(a.n_tok), a.y, a.ldy, a.row_scale, a.scale, a.round,
             a.accumulate ? 1 : 0);
}

template <bool kBF16>
void by_tokens(const GemvArgs& a, cudaStream_t s) {
  if (a.n_tok == 1) return launch<kBF16, 1>(a, s);
  if (a.n_tok == 2) return launch<kBF16, 2>(a, s);
  if (a.n_tok <= 4) return launch<kBF16, 4>(a, s);
  return launch<kBF16, 8>(a, s);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool gemv_half_supported(const GemvArgs& a) {
  return (a.type == GgmlType::BF16 || a.type == GgmlType::F16) && a.ids == nullptr && a.slot_w == nullptr &&
         a.n_tok >= 1 && a.n_tok <= kGemvMaxTokens && a.k > 0 && a.k % 8 == 0 && a.rows > 0 &&
         a.row_bytes % 16 == 0 && a.row_bytes >= a.k * 2 && a.ldx % 4 == 0 && aligned16(a.w) && aligned16(a.x);
}

void gemv_half(const GemvArgs& a, cudaStream_t s) {
  if (!gemv_half_supported(a))
    fail_message("cuda gemv_half: needs BF16/F16 dense weights, 1..8 tokens, k % 8 == 0 and 16-byte aligned rows "
                 "and activations (k = " +
                 std::to_string(a.k) + ", n_tok = " + std::to_string(a.n_tok) + ")");
  if (a.type == GgmlType::BF16)
    by_tokens<true>(a, s);
  else
    by_tokens<false>(a, s);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
