// Activation quantisation for the "q8 route": llama.cpp's CPU backend does not multiply
// quantised weights with fp32 activations; it first converts each activation row to the
// weight type's vec_dot_type (ggml-cpu.c type_traits_cpu) and takes integer dot products.
//
//   weights                                   activations become
//   Q4_0 Q5_0 Q8_0 MXFP4 NVFP4 IQ4_NL         Q8_0  (32 per block, fp16 d)
//   Q4_1 Q5_1                                 Q8_1  (32 per block, fp16 d and s = d*sum(q))
//   Q2_K..Q6_K IQ* (not IQ4_NL)               Q8_K  (256 per block, fp32 d, 16 bsums)
//   F16                                       F16   (round to nearest even)
//   BF16                                      BF16  (round to nearest even)
//   F32                                       F32   (unchanged)
//
// The rounding is that of the x86 AVX2 quantiser in the prebuilt libggml-cpu-haswell.so
// (ggml/src/ggml-cpu/arch/x86/quants.c), which differs from ggml's scalar _ref code:
//   Q8_0/Q8_1: amax over the block; d = amax / 127 (a division), stored as fp16 (RNE);
//              id = amax != 0 ? 127 / amax : 0 (a division); q = round_half_even(x * id).
//              Q8_1 adds s = fp16(d * sum(q)) with d the fp32 value before fp16 rounding.
//   Q8_K:      ggml's scalar quantize_row_q8_K_ref even on x86: max = the signed element
//              of largest |x| (first one wins), iscale = -127 / max, q = min(127,
//              round_half_even(iscale * x)), d = 1 / iscale (fp32), bsums[j] = sum of
//              q[16j..16j+15]; an all-zero block gets d = 0, q = 0.
// tests/oracle/act_quant_oracle_test.cpp checks these bit for bit against ggml.
#pragma once

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::quant {

// How matmul treats fp32 activations before a quantised-weight dot product.
//   kNone: exact fp32 products (the "exact math" mode).
//   kQ8:   llama.cpp's CPU numerics: round activations to act_dot_type(weight type) first.
enum class ActQuant { kNone, kQ8 };

// ggml's block layouts (byte-identical, so tests can compare with ggml's own output).
struct BlockQ8_0 {
  uint16_t d;  // fp16
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d;  // fp16
  uint16_t s;  // fp16 of d * sum(qs)
  int8_t qs[32];
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 && sizeof(BlockQ8_K) == 292);

// The type llama.cpp's CPU backend rounds activations to for weights of type w (table
// above); F32 for types it has no vec_dot for.
GgmlType act_dot_type(GgmlType w);

// Scalar quantisers into ggml's block layouts (k a multiple of the block size).
void quantize_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k);
void quantize_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k);
void quantize_q8_K_ref(const float* x, BlockQ8_K* y, int64_t k);

// x -> the value llama.cpp's dot product sees for it: dequant(quant(x)) for the Q8 types
// (for Q8_1 the dot product also uses the block's fp16 sum: see matmul_q8_1.cpp),
// fp16/bf16 rounding for F16/BF16, x itself for F32. This is the q8 route's definition
// (matmul_ref uses it); k must be a multiple of dot's block size.
void round_trip_act(GgmlType dot, const float* x, float* y, int64_t k);

// ---- the packed form the integer kernels read ------------------------------------------
// One token's activations as Q8_0 or Q8_K, split into arrays so the kernels load 32 int8
// with one instruction and the scale with one broadcast:
//   qs[k]            int8 values
//   d[k / block]     fp32 scales (Q8_0: the fp16 d widened; Q8_K: d)
//   bsums[k / 16]    Q8_K only: sums of 16 consecutive qs
struct PackedActRow {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;
};

// Bytes of one packed row of k elements of `dot` (Q8_0 or Q8_K), a multiple of 32.
int64_t packed_act_bytes(GgmlType dot, int64_t k);
// Views the packed row that starts at p.
PackedActRow packed_act_view(GgmlType dot, const void* p, int64_t k);
// Quantises x into the packed row at p (packed_act_bytes(dot, k) bytes, 32-byte aligned
// for speed). pack_act_ref is the scalar twin; pack_act uses AVX2 where the CPU has it.
void pack_act_ref(GgmlType dot, const float* x, void* p, int64_t k);
void pack_act(GgmlType dot, const float* x, void* p, int64_t k);

namespace detail {
void pack_act_q8_0_avx2(const float* x, void* p, int64_t k);
}

}  // namespace ft::quant
