// Internal (gemm.cu, gemm_grouped.cu): the fused tensor-core GEMM kernel family of
// gemm_fused.cu, which dequantises weight tiles into shared memory on the fly.
//
// Group g (an expert) owns sorted positions [off(g), off(g+1)) with off = offsets, or, when
// offsets is nullptr, the single group [0, n_tok). Position j of group g computes
//   y[j*ldy + r] = round(sum_k W_g[r][k] * X[xr(j)][k] * s) (+ y when accumulate)
// with W_g = w + g*expert_bytes, xr(j) = order ? order[j] / x_div : j,
// s = (row_scale ? row_scale[r] : 1) * scale * (bank ? bank[g*4 + bank_col] : 1).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/gemm.h"
#include "cuda/gemm_decode.cuh"  // FT_HD

namespace ft::cuda::gemm_detail {

struct FusedParams {
  GgmlType type;
  const uint8_t* w;
  int64_t row_bytes, k, rows, expert_bytes;
  const float* x;
  int64_t ldx;
  int64_t n_tok;  // positions (upper bound of offsets[n_group] when offsets != nullptr)
  float* y;
  int64_t ldy;
  const float* row_scale;
  float scale;
  Round round;
  bool accumulate;
  GemmPrec prec;
  int64_t n_group;
  const int32_t* order;
  const int32_t* offsets;
  int64_t x_div;
  const float* bank;
  int bank_col;
};

// Shape checks of both routes (gemm.cu); throws ft::Error naming the problem.
void check_args(const GemmArgs& a, const char* who);

// Checks the shapes (ft::Error naming what is wrong) and enqueues the kernel.
void fused_gemm(const FusedParams& p, cudaStream_t s);

// Host twin of the kernel's tile lookup: token tile `tile` (of bt tokens) of the flattened
// list over groups -> its group and first position; false when tile is past the last one.
// counts(g) = offsets[g+1] - offsets[g].
FT_HD inline bool find_tile(const int32_t* offsets, int64_t n_group, int64_t bt, int64_t tile, int64_t& group,
                                 int64_t& first) {
  int64_t before = 0;
  for (int64_t g = 0; g < n_group; ++g) {
    const int64_t c = offsets[g + 1] - offsets[g];
    const int64_t t = c > 0 ? (c + bt - 1) / bt : 0;
    if (tile < before + t) {
      group = g;
      first = offsets[g] + (tile - before) * bt;
      return true;
    }
    before += t;
  }
  return false;
}

}  // namespace ft::cuda::gemm_detail
