// Decode GEMV for BF16 / F16 weights on fp32 activations, straight from global memory into
// registers: the output head of most NVFP4 releases (BF16, 128k-152k rows: 0.6-1 GB read per
// token, the largest single read of a decode step). The generic float kernel stages every
// chunk through shared memory and reached 55% of the H200's read bandwidth on the Qwen3
// head (249 us for 622 MB, benches/h200.md); this one keeps 4 x R 16-byte loads in flight per
// lane and has nothing else to do.
//
// Same contract and numerics as gemv() on the float path (gemv.h): exact fp32 products,
// summation order aside; Y = round(sum * s_r), s_r = row_scale[r] * scale, or += with
// accumulate. Dense only (no ids / combine), n_tok 1..8.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/gemv.h"

namespace ft::cuda {

// Whether gemv_half takes these arguments: BF16 or F16 weights, dense, float path (xq
// unused), 1..8 tokens, k % 8 == 0, 16-byte aligned rows and X.
bool gemv_half_supported(const GemvArgs& a);

// Throws ft::Error when !gemv_half_supported(a).
void gemv_half(const GemvArgs& a, cudaStream_t stream = nullptr);

}  // namespace ft::cuda
