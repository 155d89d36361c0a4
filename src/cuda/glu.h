// SwiGLU on the GPU: the CUDA twin of engine::swiglu (engine/ffn.cpp).
//
//   h[t][j] = round( silu(gu[t][j]) * gu[t][n_ff + j] ),  silu(g) = g / (1 + exp(-g))
//
// gu rows hold the gate in [0, n_ff) and the up projection in [n_ff, 2 n_ff) (fused gate|up
// output, or one MoE slot per row). exp is evaluated in double and rounded once
// (ops_math.cuh), so a result may differ from the CPU's glibc expf by 1 ulp in rare cases.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

void swiglu(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
            cudaStream_t s);

// swiglu that also writes h's Q8 copy (act_q8.h layout, the bytes quantize_act_q8 would write
// from h) for the integer GEMV of the down projection. n_ff % 32 == 0.
void swiglu_q8(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
               void* xq, cudaStream_t s);

}  // namespace ft::cuda
