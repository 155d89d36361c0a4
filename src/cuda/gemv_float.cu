// The float path of the decode GEMV (gemv.h, xq == nullptr): fp32 activations, weights
// dequantised in registers, exact fp32 products up to summation order.
//
// Chunks are 1024 elements per row (all 32 lanes of a warp on one row, lpr = 32). Lane l
// takes the 8-element pieces l, l+32, l+64, l+96 of a staged chunk, so a warp's X loads are
// 1 KB contiguous and its shared reads of a row are (nearly) conflict-free (with one
// 32-element unit per lane, H200 run 2, every X load touched 32 different 128-byte lines and
// F32/F16 staging reads had 8-/4-way bank conflicts: all types sat at 20-40% of HBM
// bandwidth). The block scale multiplies each 8-element partial sum, not each weight.
// E2M1 codes become floats in 3 integer ops per element (gemv_formats.cuh e2m1x4: the code's
// value times 2^-126), so X is pre-multiplied by 2^64 to keep the products normal and the
// partial sum is multiplied back by 2^63 (2^62 and the doubled table x2), then by the
// half-scale. Needs fp32 subnormals: no -ftz.
#include "cuda/gemv_launch.h"

#include "cuda/check.h"
#include "cuda/gemv_formats.cuh"
#include "cuda/gemv_kernel.cuh"

namespace ft::cuda::gemv_detail {
namespace {

constexpr int kUnit = 32;           // elements per lane per row per chunk
constexpr int kChunk = 32 * kUnit;  // elements per row per chunk
constexpr float kX2e64 = 18446744073709551616.0f;  // 2^64
constexpr float kX2e63 = 9223372036854775808.0f;   // 2^63

template <class F>
constexpr int chunk_bytes() {
  return kChunk / F::kBlockElems * F::kBlockBytes;
}

template <class F>
struct FloatPolicy {
  static __device__ __forceinline__ int64_t data_bytes(const Params& p) { return p.k / F::kBlockElems * F::kBlockBytes; }

  template <int NT, int R>
  static __device__ __forceinline__ void compute(float (&acc)[R][NT], const uint8_t* stage, const Params& p,
                                                 int64_t xrow, int c, int lane, int /*ns*/) {
    const int units =
        static_cast<int>(min(static_cast<int64_t>(kUnit), (p.k - static_cast<int64_t>(c) * kChunk) / kUnit));
    const float* xc = p.x + xrow * p.ldx + static_cast<int64_t>(c) * kChunk;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int pg = lane + 32 * j;  // piece of the chunk: elements 8*pg .. 8*pg+7
      const int u = pg >> 2, pc = pg & 3;
      if (u >= units) break;
      float xv[NT][8];
      [[maybe_unused]] float xsum[NT];
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t < p.n_tok) {
          const float4* s = reinterpret_cast<const float4*>(xc + t * p.ldx + 8 * pg);
          const float4 a = __ldg(s), b = __ldg(s + 1);
          xv[t][0] = a.x, xv[t][1] = a.y, xv[t][2] = a.z, xv[t][3] = a.w;
          xv[t][4] = b.x, xv[t][5] = b.y, xv[t][6] = b.z, xv[t][7] = b.w;
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) xv[t][i] = 0.0f;
        }
        if constexpr (F::kHasMin) {
          float s = 0.0f;
#pragma unroll
          for (int i = 0; i < 8; ++i) s += xv[t][i];
          xsum[t] = s;
        }
        if constexpr (F::kE2M1) {
#pragma unroll
          for (int i = 0; i < 8; ++i) xv[t][i] *= kX2e64;
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float q[8], d;
        [[maybe_unused]] float m;
        F::piece(stage + r * p.cbp, u, pc, q, d, m);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          float part = 0.0f;
#pragma unroll
          for (int i = 0; i < 8; ++i) part = fmaf(q[i], xv[t][i], part);
          if constexpr (F::kE2M1) part *= kX2e63;
          acc[r][t] = fmaf(part, d, acc[r][t]);
          if constexpr (F::kHasMin) acc[r][t] = fmaf(-m, xsum[t], acc[r][t]);
        }
      }
    }
  }
};

// Rows per warp: enough X reuse, bounded registers (accumulators, X pieces).
template <class F, int NT>
constexpr int rows_per_warp() {
  return chunk_bytes<F>() >= 2048 ? (NT <= 2 ? 2 : 1) : (NT <= 2 ? 4 : 2);
}

template <class F, int NT>
void launch(Params p, int64_t n_out, const FloatPlan& plan, cudaStream_t stream) {
  constexpr int R = rows_per_warp<F, NT>();
  constexpr int CB = chunk_bytes<F>();
  p.lpr_log2 = 5;
  p.chunk_elems = kChunk;
  p.chunk_bytes = CB;
  p.cbp = (CB + 15) & ~15;
  p.vb = gemv_vector_bytes(p, CB);
  // Stages: 3 chunks ahead per warp, fewer for the big float rows so that a CTA stays within
  // ~56 KB of shared memory (4 CTAs, 16 warps per SM).
  int stages = plan.stages > 0 ? plan.stages : static_cast<int>(57344 / (kWarps * R * p.cbp));
  stages = stages < 2 ? 2 : stages > 4 ? 4 : stages;
  if (plan.stages > 0) stages = plan.stages > 4 ? 4 : plan.stages;
  p.stages = stages;
  launch_kernel<FloatPolicy<F>, NT, R>(p, n_out, stream);
}

template <class F>
void dispatch_tokens(const Params& p, int64_t n_tok, bool grouped, const FloatPlan& plan, cudaStream_t stream) {
  if (grouped) return launch<F, 1>(p, p.slot_w != nullptr ? n_tok / p.n_used : n_tok, plan, stream);
  if (n_tok == 1) return launch<F, 1>(p, 1, plan, stream);
  if (n_tok == 2) return launch<F, 2>(p, 1, plan, stream);
  if (n_tok <= 4) return launch<F, 4>(p, 1, plan, stream);
  return launch<F, 8>(p, 1, plan, stream);
}

}  // namespace

void gemv_float(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const FloatPlan& plan,
                cudaStream_t stream) {
  switch (type) {
    case GgmlType::F32: return dispatch_tokens<FmtF32>(p, n_tok, grouped, plan, stream);
    case GgmlType::F16: return dispatch_tokens<FmtF16>(p, n_tok, grouped, plan, stream);
    case GgmlType::BF16: return dispatch_tokens<FmtBF16>(p, n_tok, grouped, plan, stream);
    case GgmlType::Q8_0: return dispatch_tokens<FmtQ8_0>(p, n_tok, grouped, plan, stream);
    case GgmlType::Q4_K: return dispatch_tokens<FmtQ4_K>(p, n_tok, grouped, plan, stream);
    case GgmlType::Q6_K: return dispatch_tokens<FmtQ6_K>(p, n_tok, grouped, plan, stream);
    case GgmlType::MXFP4: return dispatch_tokens<FmtMXFP4>(p, n_tok, grouped, plan, stream);
    case GgmlType::NVFP4: return dispatch_tokens<FmtNVFP4>(p, n_tok, grouped, plan, stream);
    default: fail_message("cuda gemv: no float kernel for this type");
  }
}

}  // namespace ft::cuda::gemv_detail
