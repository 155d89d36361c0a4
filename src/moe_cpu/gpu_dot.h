// The GPU decode GEMV's row dot products in its exact fp32 summation order, on the CPU
// (scalar C++): the "exact" mode of the expert executor, so that the cpu and hybrid MoE
// backends give the fused backend's bits rather than the same math in another order.
//
// How the GPU forms one row (src/cuda/gemv*.cu; summary of what is mirrored here):
//   float path (fp32 activations; F32/F16/BF16 weights, or any type without Q8 activations):
//     32 lanes per row; chunks of 1024 elements; lane l takes the 8-element pieces
//     pg = l + 32 j (j < 4, unit pg / 4 < the chunk's units) of each chunk in order:
//       part = fma(q[i], x[i], part) for i < 8 from 0   (E2M1 formats: q = code * 2^-126,
//              x * 2^64, then part * 2^63)
//       acc  = fma(part, d, acc)                         (Q4_K: then acc = fma(-m, sum x, acc))
//   integer path, generic kernel (Q8 activations, Q8_0 / MXFP4 / NVFP4 off the fast paths):
//     L lanes per row (the plan's, gemv_tuning.h); chunks of 64 L elements; lane kl takes the
//     64-element unit kl of each chunk in order; per 32-element block (NVFP4: 16-element
//     sub-block) an exact integer sum is of weight codes times int8 activations, then
//       acc = fma(float(is), w_scale * x_scale, acc)
//     (NVFP4: w_scale = the full UE4M3 value, x_scale = d * 0.5; MXFP4: e8m0_half, d).
//   NVFP4 slab kernel (grouped rows of >= 32 blocks): lane l takes blocks l, l + 32, ... and
//     chains their 4 sub-block fmas in one accumulator.
//   NVFP4 packed kernel (grouped rows of < 32 blocks): each block's 4 sub-block fmas start
//     from 0; the row's sum is 0 + a_0 + a_1 + ... in block order (no lane tree).
//   Lanes are then summed by the xor shuffle tree: for o = L/2, ..., 1: v[i] += v[i ^ o];
//   lane 0 holds the row's sum. The epilogue: y = round(acc * scale) with scale = the
//   expert's bank column (1 without one); the MoE combine: c = y_0 * w_0, c = c + y_j * w_j
//   in rank order (no FMA), x += round(c).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "format/ggml_type.h"

namespace ft::moe_cpu {

enum class GpuDot { kFloat, kQ8Generic, kNvfp4Slab, kNvfp4Packed };

struct GpuDotPlan {
  GpuDot kind = GpuDot::kFloat;
  int lanes = 32;  // kQ8Generic: lanes per row (4, 8, 16, 32)
};

// The GPU's plan for a grouped decode GEMV of `rows` x `k` weights of `type` with n_out out
// rows of n_sub slots each (gate/up: the call's token-slots and 1; the combined down: the
// tokens and n_used), q8 = activations quantised (act_q8). Supplied by the GPU side
// (gpu/moe_cpu_backend.cpp reads cuda/gemv_tuning.h); moe_cpu knows no CUDA.
using GpuDotPlanFn = GpuDotPlan (*)(GgmlType type, int64_t rows, int64_t k, int64_t n_out, int n_sub, bool q8);

// Types the exact mode covers on each path.
bool gpu_dot_float_supported(GgmlType t);  // F32 F16 BF16 Q8_0 MXFP4 NVFP4
bool gpu_dot_q8_supported(GgmlType t);     // Q8_0 MXFP4 NVFP4

// What the SIMD rows derive from one Q8 activation row, made once per activation row and
// call (gpu_act_aux) instead of once per row group: sums of the codes (NVFP4: per 16-element
// sub-block; Q8_0 / MXFP4: per 32-block; the kernels take unsigned weights with an offset
// and subtract offset * sum), NVFP4's codes in the order of the low / high nibbles of a
// block's 32 code bytes ([nb][2][32]) and its d * 0.5 per 32.
struct GpuActAux {
  std::vector<int32_t> sum;
  std::vector<int8_t> nv_ab;
  std::vector<float> dxh;
};

// One activation row in the GPU's Q8 layout (act_q8.h): int8 codes and one fp32 scale per
// 32 (d = fp16-rounded amax / 127, q = round_half_even(x * 127 / amax)); aux: optional
// gpu_act_aux of the same row for the type multiplied (the rows make their own without).
struct GpuActQ8 {
  const int8_t* qs;
  const float* d;
  const GpuActAux* aux = nullptr;
};
// Quantises k values (k % 32 == 0) into qs[k], d[k / 32]; AVX2 where the CPU has it (the
// same values: the decode step quantises each token once per layer, and the scalar loop
// with its libm nearbyintf took 64 us for 16 K values on the dev host).
void gpu_quantize_act_q8(const float* x, int64_t k, int8_t* qs, float* d);
void gpu_quantize_act_q8_ref(const float* x, int64_t k, int8_t* qs, float* d);
void gpu_act_aux(GgmlType type, const GpuActQ8& x, int64_t k, GpuActAux& aux);
// gpu_act_aux in parts (the GLU phase spreads a route's row over threads): size aux for k
// values, then fill the entries of values [k0, k1) (multiples of 64 for NVFP4, 32 else).
void gpu_act_aux_size(GgmlType type, int64_t k, GpuActAux& aux);
void gpu_act_aux_part(GgmlType type, const GpuActQ8& x, int64_t k0, int64_t k1, GpuActAux& aux);

// The kernel family of the rows below: active_isa() (FT_ISA), AVX-512 only with BW, VL and
// VNNI; gpu_dot_limit_isa lowers it (never raises it) for A/B timing in one process.
Isa gpu_dot_isa();
void gpu_dot_limit_isa(Isa max);
bool gpu_dot_avx512_supported();

// The GPU's sum for one row (before the epilogue), bit for bit.
float gpu_dot_float(GgmlType type, const uint8_t* row, const float* x, int64_t k);
float gpu_dot_q8(const GpuDotPlan& plan, GgmlType type, const uint8_t* row, const GpuActQ8& x, int64_t k);

// n_rows rows (row_bytes apart from w) of the integer path: out[r] = gpu_dot_q8(plan, type,
// row r, x, k), bit for bit; AVX-512 (16 rows per zmm, VNNI block sums) or AVX2 (8 rows per
// ymm, maddubs) where the CPU has it (NVFP4, Q8_0, MXFP4), else the scalar mirror above.
void gpu_dot_q8_rows(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows,
                     const GpuActQ8& x, int64_t k, float* out);
// The float path's rows likewise (gpu_dot_float per row, bit for bit); AVX2: 8 rows per
// ymm, pieces transposed so that each row's 8-element fma chain runs in one lane; AVX-512
// (BF16): one row at a time, 16 of its pieces per zmm.
void gpu_dot_float_rows(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x, int64_t k,
                        float* out);
namespace detail {
// How the SIMD rows prefetch (FT_MOE_CPU_PREFETCH, read once; for A/B runs): kNext (default):
// the next row group's bytes, linearly, spread over the current group's block steps (2-core
// EPYC, DRAM-resident Qwen3-30B-A3B experts, exact AVX2: NVFP4 11 -> 17 GB/s, Q8_0 16.8 ->
// 24.5, MXFP4 10.5 -> 16.2, now level with the engine's kernels); kNextL2: the same into L2
// only; kNext2: the group after next (the first group of a call also fetches the next one:
// twice the distance, for DRAM latency at 15 threads); kNext128: kNext's bytes, every other
// line (the L2's adjacent-line prefetcher brings the pair: half the fill buffers per byte,
// which bound one core's software prefetches); kRow: each row 16 blocks ahead (the earlier
// scheme); kNone. H200 host, exact AVX-512, guided rows, one process (session 7): next2 and
// next-128 within -4..+11% of next across NVFP4 / MXFP4 / Q8_0, inside the runs' spread.
enum class Prefetch { kNone, kRow, kNext, kNextL2, kNext2, kNext128 };
Prefetch gpu_dot_prefetch();
// Overrides FT_MOE_CPU_PREFETCH for the whole process (tests, A/B timing).
void gpu_dot_set_prefetch(Prefetch p);
// kNext / kNextL2 / kNext128 / kNext2: the rows [g0 + group, g0 + 2 group) (kNext2: [g0 + 2 group,
// g0 + 3 group), from g0 + group when g0 == 0), clipped to n_rows, their bytes prefetched in
// `steps` equal parts, step(c) at the current group's step c.
struct NextGroup {
  const char* p = nullptr;
  int64_t per_step = 0, bytes = 0, stride = 64;
  bool l2 = false;
  NextGroup(const uint8_t* w, int64_t row_bytes, int64_t g0, int64_t group, int64_t n_rows, int64_t steps) {
    const Prefetch m = gpu_dot_prefetch();
    if (m == Prefetch::kNone || m == Prefetch::kRow || steps < 1) return;
    const int64_t r0 = g0 + (m == Prefetch::kNext2 && g0 > 0 ? 2 : 1) * group;
    const int64_t r1 = std::min(n_rows, g0 + (m == Prefetch::kNext2 ? 3 : 2) * group);
    if (r0 >= r1) return;
    p = reinterpret_cast<const char*>(w + r0 * row_bytes);
    bytes = (r1 - r0) * row_bytes;
    stride = m == Prefetch::kNext128 ? 128 : 64;
    per_step = ((bytes + steps - 1) / steps + stride - 1) / stride * stride;
    l2 = m == Prefetch::kNextL2;
  }
  void step(int64_t c) const {
    if (p == nullptr) return;
    const int64_t e = bytes < (c + 1) * per_step ? bytes : (c + 1) * per_step;
    for (int64_t o = c * per_step; o < e; o += stride)
      if (l2)
        __builtin_prefetch(p + o, 0, 2);
      else
        __builtin_prefetch(p + o, 0, 3);
  }
};
// The float path's piece at element e (e % 8 == 0): raw values q[8] and scale d, w = d q
// (E2M1 formats: q = code * 2^-126, gemv_formats.cuh).
void gpu_float_piece(GgmlType type, const uint8_t* row, int64_t e, float* q, float& d);
bool gpu_dot_float_rows_avx2(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x,
                             int64_t k, float* out);
bool gpu_dot_q8_rows_avx2(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes,
                          int64_t n_rows, const GpuActQ8& x, int64_t k, float* out);
bool gpu_dot_float_rows_avx512(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t n_rows, const float* x,
                               int64_t k, float* out);
bool gpu_dot_q8_rows_avx512(const GpuDotPlan& plan, GgmlType type, const uint8_t* w, int64_t row_bytes,
                            int64_t n_rows, const GpuActQ8& x, int64_t k, float* out);
void gpu_quantize_act_q8_avx2(const float* x, int64_t k, int8_t* qs, float* d);
}

// The xor shuffle tree over v[0..lanes) (a power of two): lane 0's result; v is clobbered.
float gpu_lane_tree(float* v, int lanes);

}  // namespace ft::moe_cpu
