// The weighted rank-order sum of a MoE layer's expert outputs when each route was computed
// on one of two sides (the hybrid backend: the GPU's grouped GEMV per-slot rows, or the CPU's
// rows in mapped memory), with the grouped combine's arithmetic:
//
//   x[t] += round( sum over ranks j < n_used, in order, of y_j[i] * w[t*n_used + j] )
//   y_j = row t*n_used + j (n_embd floats) of yc where from_c[t*n_used + j] >= 0, else of yg
//
// fp32 products and sums rounded one operation at a time (no FMA), the first product taken
// as is: exactly the combine epilogue of the grouped GEMV (cuda/gemv.h) and of the CPU
// engine, so splitting the routes between the two sides changes no bit of x (adding a GPU
// partial sum and a CPU partial sum would: fp32 addition is not associative).
// Twin: moe_combine_split_ref; test tests/cuda/moe_combine_split_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// yg, yc: [n_tok * n_used][n_embd]; from_c, w: [n_tok * n_used]; x: n_tok rows ldx apart.
// All device pointers (yc may be mapped host memory).
void moe_combine_split(const float* yg, const float* yc, const int32_t* from_c, const float* w, int64_t n_tok,
                       int n_used, int64_t n_embd, float* x, int64_t ldx, Round round, cudaStream_t s);

// The same on host pointers, scalar C++ (moe_combine_split_ref.cpp).
void moe_combine_split_ref(const float* yg, const float* yc, const int32_t* from_c, const float* w, int64_t n_tok,
                           int n_used, int64_t n_embd, float* x, int64_t ldx, Round round);

}  // namespace ft::cuda
