// The last step of the MoE prefill: token-slots were computed in expert-sorted order
// (gemm_grouped); this puts them back per token and sums them with their routing weights,
// in rank order as the CPU engine does (engine/moe.cpp, combine):
//
//   out[t] (+)= round( sum_{k < n_used} ysorted[pos(t*n_used + k)] * w[t*n_used + k] )
//
// where order[j] is the slot at sorted position j (moe_sort) and pos its inverse. (rows.h's
// moe_combine is the same sum over an already inverted slot map, without the residual add.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// inv: n_tok * n_used ints of scratch.
void moe_combine_sorted(const float* ysorted, int64_t ldy, const int32_t* order, int64_t n_tok, int n_used,
                 const float* w, int64_t n_embd, float* out, int64_t ldo, Round round,
                 bool accumulate, int32_t* inv, cudaStream_t s);

}  // namespace ft::cuda
