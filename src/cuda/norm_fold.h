// The norm fold: a decode layer's RMSNorm made by the launches on either side of it (the GEMV
// writing the residual row, the GEMV reading its Q8 copy) instead of a one-CTA launch between
// them. cuda::GemvArgs::nq_* (producer) and norm_part (consumer) ask a GEMV for its half;
// norm_fold.cuh has the arithmetic.
//
// Why: on the H200 a one-CTA launch in the decode chain costs ~1.5-4.7 us a layer of serial
// time (benches/h200.md, sessions 31-32: Llama-8B without its two norms decodes +7.9% faster),
// and a norm made inside the consumer's launch costs more than the launch (session 32: every
// in-launch form slower). Here the producer's completing warps do the per-block work in their
// tail (as the SwiGLU tail does, gemv_mma.cu) and the consumer only sums 128 partials.
// Measured (H200 session 33 call 4, Llama-8B tg128): the attention norm's fold +0.6% (520-522
// against 518 tok/s), both folds +0.2% -- most of the launch's cost moves into the producer's tail
// (a ticket round trip and a read-back of the block). gpu/forward.cpp takes the attention norm's.
//
// The fold is not rmsnorm_q8's bytes: it quantises y * w and rescales each block's scale by
// 1 / rms, where rmsnorm_q8 quantises (y * s) * w. The codes agree but for fp32 rounding at a
// .5 boundary, the scales but for fp32 rounding before the fp16 rounding (tests:
// CudaNormFold.CloseToRmsnormQ8).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

// The most elements a folded row may have (the consumer's partials in registers).
inline constexpr int64_t kNormFoldMaxN = 8192;

// Producer's half as a launch (for GEMV kernels without the tail): from the finished row y
// (n values, n % 32 == 0, n <= kNormFoldMaxN): xq (an act_q8 row of k = n) = Q8(y * w) with raw
// block scales, part[n / 32] the blocks' sums of squares. The same bytes as the GEMV tails.
void norm_fold_produce(const float* y, const float* w, int64_t n, void* xq, double* part, cudaStream_t s);
// Consumer's half as a launch (for GEMV kernels that do not take norm_part): xq's block scales
// made those of the normalised row, in place. The same scales the tensor-core GEMV forms.
void norm_fold_apply(void* xq, int64_t n, const double* part, float eps, cudaStream_t s);

// Host twins, bit for bit: one row.
void norm_fold_produce_ref(const float* y, const float* w, int64_t n, void* xq_row, double* part);
float norm_fold_inv_rms_ref(const double* part, int64_t n, float eps);
void norm_fold_apply_ref(void* xq_row, int64_t n, const double* part, float eps);

}  // namespace ft::cuda
