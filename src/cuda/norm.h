// RMSNorm on the GPU: the CUDA twin of engine::rmsnorm (engine/norm.cpp).
//
//   y[t][i] = round( (x[t][i] * s_t) * w[i] ),   s_t = 1 / sqrt(float(sum_i double(x*x) / n) + eps)
//
// Same operations as the CPU: squares rounded to fp32 and summed in double, mean and scale in
// fp32, products unfused. Only the order of the double sum differs (a tree instead of a
// loop), which moves the fp32 mean in about one row in 10^8. w may be nullptr (no weight).
// One block per row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

void rmsnorm(const float* x, int64_t ldx, const float* w, int64_t n, float eps, int64_t n_tok, float* y,
             int64_t ldy, Round r, cudaStream_t s);

// rmsnorm that also writes y's Q8 copy for the integer GEMV (act_q8.h layout, the bytes
// quantize_act_q8 would write from y), saving that launch. n % 32 == 0.
void rmsnorm_q8(const float* x, int64_t ldx, const float* w, int64_t n, float eps, int64_t n_tok, float* y,
                int64_t ldy, Round r, void* xq, cudaStream_t s);

// The residual add fused in front of the norm (one launch instead of two):
//   x[t] += b[t]   (fp32, written back: x is the residual stream), then y[t] = rmsnorm(x[t]).
// Twin: decoder.cpp's add_rows followed by engine::rmsnorm. y must not alias x or b.
void add_rmsnorm(float* x, int64_t ldx, const float* b, int64_t ldb, const float* w, int64_t n, float eps,
                 int64_t n_tok, float* y, int64_t ldy, Round r, cudaStream_t s);

// Test switch (process-wide, not thread-safe): false sends every row through the general
// kernel instead of the register-resident decode kernel (they must agree bit for bit).
void rmsnorm_set_register_path(bool on);

}  // namespace ft::cuda
