// CPU matrix products of a quantised weight matrix with fp32 activations.
//
//   Y[t][r] = round( scale_r * sum_k W[r][k] * X[t][k] )     r in [r0, r1), t in [0, n_tok)
//
// W is `rows` rows of `k` elements of type `type`, `row_bytes` apart. The scale
// (per-row vector or a scalar, the NVFP4 second-level `.scale`) is applied to the fp32
// accumulator before anything is stored, then the result is rounded to `round`
// (the activation dtype) -- so a tiny scale never meets an fp16 store unscaled.
//
// matmul() picks the fastest kernel this CPU has (AVX-512, AVX2, scalar) at run time;
// matmul_ref() dequantises each row with dequantize_row_ref and accumulates in order,
// and is the twin that tests diff the fast kernels against. Callers parallelise by
// splitting [r0, r1) across threads; the kernels know nothing of threads or models.
// Give each call at least 4 rows (ideally a multiple of 4): with one token the kernels
// work on 4 rows at once to hide FMA latency, and a lone row runs one accumulator chain.
// Any type with has_ref_dequant() works; F32, F16, BF16, Q8_0, Q4_K, Q6_K, MXFP4 and
// NVFP4 have SIMD decoders, the others are decoded by the reference decoder into an
// L1/L2 buffer first. Results differ from matmul_ref only by fp32 summation order.
//
// With act_quant = kQ8 matmul_ref is the fp32 product with X replaced by
// round_trip_act(X) (dequant(quant(X)), bit-identical to what ggml's quantiser yields;
// Q4_1/Q5_1 instead use ggml's Q8_1 formula with its stored fp16 block sum, scalar);
// the AVX2 integer kernels (NVFP4, MXFP4, Q4_0, Q8_0, Q4_K, Q6_K; AVX-512 CPUs run them
// too) equal it up to fp32 summation order, and other types run the fp32 kernels on
// round_trip_act(X).
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "format/ggml_type.h"
#include "quant/act_quant.h"

namespace ft::quant {

enum class Round { kNone, kBF16, kF16 };

struct MatmulArgs {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;  // first row
  int64_t row_bytes = 0;       // stride between rows
  int64_t k = 0;               // elements per row (multiple of the block size)
  const float* x = nullptr;    // X[t][k] at x + t*ldx
  int64_t ldx = 0;
  int64_t n_tok = 1;
  float* y = nullptr;  // Y[t][r] at y + t*ldy + r
  int64_t ldy = 0;
  const float* row_scale = nullptr;  // per-row fp32 scale, indexed by r (nullptr: none)
  float scale = 1.0f;                // scalar fp32 scale, multiplied with row_scale
  Round round = Round::kNone;
  // kQ8: round X to act_dot_type(type) first, exactly as llama.cpp's CPU backend does
  // (act_quant.h), then integer dot products with fp32 block-scale accumulation. X is
  // quantised once per call, into a thread-local buffer. F32 weights are unaffected.
  ActQuant act_quant = ActQuant::kNone;
  // Rows of the whole weight matrix (0: unknown). With kQ8 and F32/F16/BF16 weights it
  // picks llama.cpp's summation order: one-row dot products where its CPU backend takes
  // them (one token, rows not a multiple of 4), else the tiled sgemm's (matmul_vec_dot.cpp).
  int64_t n_rows = 0;
};

// True when matmul/matmul_ref support this weight type.
bool matmul_supported(GgmlType t);

void matmul(const MatmulArgs& a, int64_t r0, int64_t r1);
void matmul_ref(const MatmulArgs& a, int64_t r0, int64_t r1);

// matmul() with an explicit kernel family (tests and benchmarks compare them); throws
// ft::Error when this CPU cannot run `isa`. Isa::kScalar is matmul_ref.
void matmul_on(Isa isa, const MatmulArgs& a, int64_t r0, int64_t r1);

// Name of the kernel family matmul() dispatches to on this CPU ("avx512", "avx2", "scalar").
const char* matmul_isa();

}  // namespace ft::quant
