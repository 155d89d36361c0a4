// A decode RMSNorm deferred across the GEMV that reads it (one launch fewer a layer).
//
// The norm  h = (x * s) * w,  s = 1 / sqrt(float(sum_i double(x_i * x_i) / n) + eps)  (norm.h)
// feeds the integer GEMV only through h's Q8 copy (act_q8.h), and Q8 is scale-free: the codes
// of s * v are v's codes (but where s moves a value across a rounding boundary, about one code
// in 10^5) and its block scales are v's times s. So the norm splits in two:
//   pieces (by the kernel that writes x, per 32-element block b of the row):
//     xq block b = Q8(x[32b + i] * w[32b + i])         the unnormalised product's act_q8 bytes
//     ss[b]      = sum over the block of double(x*x)  (a warp's xor tree)
//   scale (by the GEMV reading xq): its row sums times
//     s = 1 / sqrt(float(sum_b ss[b] / n) + eps)      (lane l sums b = l, l + 32, .. in order,
//                                                     then an xor tree: a fixed order)
// The product equals norm-then-GEMV to fp32 rounding, not bit for bit (the double sum's order,
// the rare code above, and s applied after the sums instead of before the quantisation); an
// output rounding (bf16 / f16 activations) is not reproducible this way, so callers defer only
// fp32 activations. The tensor-core GEMV does both halves in its own launches (gemv.h
// GemvArgs::nd_*); these are the stand-alone twins every other path takes and the tests diff
// them against.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

// The pieces of x's norm (n % 32 == 0): xq an act_q8 row of k = n, ss n / 32 doubles.
void norm_defer_pieces(const float* x, const float* w, int64_t n, void* xq, double* ss, cudaStream_t s);

// y[r] = y[r] * s for r < rows, s from ss (n / 32 partials) as above.
void norm_defer_scale(float* y, int64_t rows, const double* ss, int64_t n, float eps, cudaStream_t s);

// The deferred norm's largest n in the tensor-core GEMV's epilogue (its partials are held in
// registers, kNormDeferLanes a lane); longer rows take norm_defer_scale.
inline constexpr int kNormDeferLanes = 4;
inline constexpr int64_t kNormDeferMaxN = 32 * 32 * kNormDeferLanes;

}  // namespace ft::cuda
