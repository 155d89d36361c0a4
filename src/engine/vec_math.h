// Elementwise functions and f32 reductions rounded exactly as llama.cpp's CPU backend rounds
// them in the x86 AVX2 build the parity tests load (libggml-cpu-haswell.so), so that the
// activations feeding a Q8-rounded matmul come out bit-identical. A 1-ulp difference there
// flips one Q8 rounding now and then (a step of max|x|/127 in one input), and in a Gated
// DeltaNet layer the recurrent state carries the flip into every later token:
// tests/oracle/drift_probe_test.cpp measured max|dlogit| 0.12-0.18 at 100 tokens from
// ulp-level differences in exactly these functions.
//
//   exp_v    ggml's vector expf (not libm's): round x/ln2 to n with the 1.5*2^23 trick,
//            b = x - n*ln2 in two fused steps, a degree-5 polynomial in b evaluated with
//            fused multiply-adds, scaled by 2^n (max error ~1.5 ulp);
//   silu     x / (1 + exp_v(-x)) (ggml_vec_silu_f32 / ggml_vec_swiglu_f32 on 8-wide rows);
//   dot_f32  ggml_vec_dot_f32: 4 x 8 fused-multiply-add accumulators over steps of 32,
//            folded (0+2, 1+3), (0+1), lanes (l + l+4), then pairwise; the tail (n mod 32)
//            added as rounded products one element at a time;
//   mad_f32  ggml_vec_mad_f32: y = fma(x, v, y);
//   exp_sum  ggml_vec_soft_max_f32: y = e^(x - max) over a row, exp_v on groups of 8 (each
//            group summed in fp32 as (y_l + y_l+4) pairs, then pairwise, into a double),
//            libm expf on the last n mod 8 (each added to the double).
// Every step is a correctly rounded IEEE operation (fma included), so the results do not
// depend on the ISA we run on; with FMA hardware the same code runs through a clone
// compiled for it (vec_math.cpp).
#pragma once

#include <cstdint>

namespace ft::engine {

float exp_v(float x);
float silu(float x);
float dot_f32(const float* x, const float* y, int64_t n);
void mad_f32(float* y, const float* x, float v, int64_t n);

// x[i] = e^(x[i] - max) for i in [i0, n) in place; returns their sum. The row is ggml's
// from index 0: groups of 8 start at multiples of 8 and x[0, i0) counts as 0 (masked).
// padded: the row continues with masked entries up to a multiple of 8 (ggml's KV rows are
// padded), so the last group is an exp_v group too; otherwise it is the libm tail.
double exp_sum(float* x, int64_t i0, int64_t n, float max, bool padded);

}  // namespace ft::engine
