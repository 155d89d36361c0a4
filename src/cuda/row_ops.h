// Small row-wise ops of the gemma4 forward pass on the GPU, each the CUDA twin of a CPU loop
// (model/gemma4_forward.cpp, engine/norm.cpp). Rows are fp32, `n` wide, `ld*` floats apart.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

// x[t][i] = round((x[t][i] * a) * w[i])   (w == nullptr: round(x * a)), in place.
// a = 1 / sqrt(n_embd) with w = ffn_gate_inp.scale is gemma4's router input; a = the layer
// output scale with Round::kNone is its residual scaling.
void scale_rows(float* x, int64_t ldx, int64_t n, int64_t n_tok, float a, const float* w, Round r,
                cudaStream_t s);

// x[t][i] = round((x[t][i] + y[t][i]) * a), in place (gemma4's per-layer input mix).
void add_scale_rows(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t n, int64_t n_tok, float a,
                    Round r, cudaStream_t s);

// Final logit softcapping: x = tanh(x * (1 / cap)) * cap (tanh in double, rounded once to
// fp32: glibc's tanhf up to double rounding).
void softcap(float* x, int64_t ldx, int64_t n, int64_t n_tok, float cap, cudaStream_t s);

// Per-head RMSNorm without a weight, out of place (gemma4's value norm):
//   dst head = round(src head * s), s = 1 / sqrt(float(sum double(x*x) / hd) + eps)
// for n_head heads of hd floats per token (src + t*lds + h*hd -> dst + t*ldd + h*hd), the
// sums as engine::rmsnorm_row's. One warp per head. dst may equal src.
void head_rmsnorm(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t n_tok, int64_t n_head,
                  int64_t hd, float eps, Round r, cudaStream_t s);

}  // namespace ft::cuda
