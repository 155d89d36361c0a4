// Activations for the integer GEMV path (cuda/gemv.h, xq): each token row of k fp32 values
// (k a multiple of 32) becomes blocks of 32 int8 codes with one fp32 scale, quantised once
// per GEMV input and shared by every product that reads it (q, k, v; gate, up).
//
// Rounding (that of the CPU q8 route's Q8_0 activations, quant/act_quant.h, and of ggml):
//   amax = max |x| over the block; d = fp16(amax / 127) widened to fp32;
//   q    = round_half_even(x * (amax != 0 ? 127 / amax : 0))      (|q| <= 127)
// plus s_lo / s_hi = sum of q over the block's first / second 16 values (the K-quant minimum
// terms and Q6_K's -32 offset need them).
//
// Layout of token row t (act_q8_row_bytes(k) bytes apart, 16-byte aligned):
//   qs[k]              int8 codes
//   ds[k / 32]         {float d; int16 s_lo; int16 s_hi}   (8 bytes)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ft::cuda {

struct ActQ8Scale {
  float d;
  int16_t s_lo, s_hi;
};
static_assert(sizeof(ActQ8Scale) == 8);

// Bytes between token rows: k + 8 * (k / 32), rounded up to 16.
int64_t act_q8_row_bytes(int64_t k);
// Bytes of n_tok rows.
size_t act_q8_bytes(int64_t k, int64_t n_tok);

// Quantises X[t][0..k) (x + t*ldx, t < n_tok) into xq (act_q8_bytes(k, n_tok) bytes, 16-byte
// aligned) on stream s. Throws ft::Error when k % 32 != 0 or n_tok < 1.
void quantize_act_q8(const float* x, int64_t ldx, int64_t k, int64_t n_tok, void* xq, cudaStream_t s);

// Host twin (the same rounding, bit for bit): one row of k values into a buffer of
// act_q8_row_bytes(k) bytes.
void quantize_act_q8_row_ref(const float* x, int64_t k, void* row);

// The values the integer path multiplies, as fp32: Y[t][i] = d * q for X's blocks of 32 (the
// rounding above; d * q is exact in fp32). A GEMM in fp32 on Y then sees what the integer GEMV
// and llama.cpp's CPU build (Q8_0 activations) see, up to summation order: --dtype auto's
// prefill with quantised weights (gpu/forward_gemma4.cpp). y may alias x. Throws ft::Error
// when k % 32 != 0 or n_tok < 1.
void round_trip_act_q8(const float* x, int64_t ldx, int64_t k, int64_t n_tok, float* y, int64_t ldy, cudaStream_t s);
// Host twin, bit for bit: one row of k values (y may alias x).
void round_trip_act_q8_row_ref(const float* x, int64_t k, float* y);

}  // namespace ft::cuda
