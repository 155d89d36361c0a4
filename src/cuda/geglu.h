// GeGLU with tanh GELU on the GPU, as ggml-cpu computes it: the CUDA twin of engine::geglu
// and engine::gelu_mul (engine/geglu.h; gemma4's FFNs, its MoE experts and its per-layer
// input gate).
//
//   gelu(x) = 0                         x <= -10
//           = x                         x >= 10
//           = table[f16(x)]             otherwise (ggml's 65536-entry fp16 table)
//   geglu:    h[t][j] = round( x <= -10 ? 0 : gelu(g) * u ),  g = gu[t][j], u = gu[t][n_ff + j]
//   gelu_mul: x[t][i] = round( round(gelu(x[t][i])) * m[t][i] )
//
// The table's entries (fp16 bits of gelu_tanh_f32 of each fp16 value) come from the host
// through gelu_table_set, once per process, so the device reads exactly the CPU's numbers
// (a tanh evaluated on the device would differ in the last fp32 bit and, rarely, in fp16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// Uploads the 65536 fp16 gelu values (index: fp16 bits of the input) to the current device.
void gelu_table_set(const uint16_t* host_table);
bool gelu_table_ready();

void geglu(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
           cudaStream_t s);

// geglu that also writes h's Q8 copy (act_q8.h layout) for the integer GEMV of the down
// projection. n_ff % 32 == 0.
void geglu_q8(const float* gu, int64_t ldgu, int64_t n_ff, int64_t n_tok, float* h, int64_t ldh, Round r,
              void* xq, cudaStream_t s);

// x[t][i] = round(round(gelu(x[t][i])) * m[t][i]) in place, i < n, t < n_tok.
void gelu_mul(float* x, int64_t ldx, const float* m, int64_t ldm, int64_t n, int64_t n_tok, Round r,
              cudaStream_t s);

}  // namespace ft::cuda
