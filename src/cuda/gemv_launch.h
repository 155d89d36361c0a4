// Internal interface between gemv.cu (argument checks, dispatch) and the two kernel
// families (gemv_float.cu, gemv_q8.cu). CUDA translation units only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/gemv_kernel.cuh"
#include "format/ggml_type.h"

namespace ft::cuda::gemv_detail {

// Overrides of the tuning table (0: table).
struct FloatPlan {
  int split = 0, stages = 0;
};
struct Q8Plan {
  int split = 0, stages = 0, lanes = 0, rows = 0;
};

// Widest cp.async vector (16, 8, 4) that keeps every row, expert and chunk aligned; 0: none.
inline int gemv_vector_bytes(const Params& p, int chunk_bytes) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.w);
  for (int vb : {16, 8, 4}) {
    if (base % vb == 0 && p.row_bytes % vb == 0 && chunk_bytes % vb == 0 &&
        (p.ids == nullptr || p.expert_bytes % vb == 0))
      return vb;
  }
  return 0;
}

// n_tok: tokens, or slots in grouped mode (Params.n_tok is 1 there).
void gemv_float(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const FloatPlan& plan,
                cudaStream_t stream);
void gemv_q8(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const Q8Plan& plan, cudaStream_t stream);

}  // namespace ft::cuda::gemv_detail
