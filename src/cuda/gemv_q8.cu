// The integer path of the decode GEMV (gemv.h, xq != nullptr), like llama.cpp's CUDA MMVQ:
// activations arrive as int8 blocks of 32 (act_q8.h); weights are decoded to int8 in
// registers (gemv_q8_formats.cuh), multiplied with dp4a (4 products per instruction), and
// the block scales meet the integer sums in fp32.
//
// Why: the float path spends ~17 issued instructions per NVFP4 weight (H200 run 3), against
// ~4 that the H200 can afford at its HBM rate (4.5 TB/s / 0.5625 byte per element = 8 G
// elements/s; 132 SMs x 4 schedulers x 1.98 GHz = 33 T thread-instructions/s). Here an
// NVFP4 element costs ~1.4 decode instructions (3 byte permutes per 4 codes) plus a quarter
// dp4a per token; scales cost a few per 16 elements.
//
// Lane kl of a row takes one 64-element unit of each chunk (chunk = lanes x 64 elements):
//   NVFP4: one block (36 bytes at 36*kl);  MXFP4: two blocks (34 bytes);  Q8_0: two blocks
//   (68 bytes);  Q4_K: sub-blocks 2p, 2p+1 of super-block kl/4 (p = kl%4);  Q6_K: elements
//   128h + 32qq + 16i + (0..15), qq = 0..3, of super-block kl/4 (h, i from kl%4).
#include <algorithm>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

__device__ __forceinline__ uint32_t ld32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ float ld_half(const uint8_t* p) {
  return half_bits_to_float(*reinterpret_cast<const unsigned short*>(p));
}
// N words of the bytes at o (any alignment) of a staged row (base 16-aligned): N + 1 aligned
// loads and N funnel shifts; may read up to 3 bytes past the region (the stage is padded).
template <int N>
__device__ __forceinline__ void ld_words(const uint8_t* base, int o, uint32_t (&out)[N]) {
  const uint8_t* a = base + (o & ~3);
  const uint32_t sh = static_cast<uint32_t>(o & 3) * 8;
  uint32_t w[N + 1];
#pragma unroll
  for (int i = 0; i <= N; ++i) w[i] = ld32(a + 4 * i);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = funnel_r(w[i], w[i + 1], sh);
}

// Activation block b of token row xt: scale d and the half sums.
struct XScale {
  float d;
  int s_lo, s_hi;
};
__device__ __forceinline__ XScale x_scale(const uint8_t* xt, int64_t k, int64_t b) {
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(xt + k) + b);
  return {__uint_as_float(v.x), static_cast<int>(static_cast<int16_t>(v.y & 0xFFFF)),
          static_cast<int>(static_cast<int16_t>(v.y >> 16))};
}
__device__ __forceinline__ uint4 x_ld16(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// The units below decode each weight word once per row and then loop over the tokens, so
// that only one token's activations are live at a time (batch 8 held all of them and ran
// at ~250 registers per thread: 8 warps per SM).
struct Q8Nvfp4 {
  static constexpr int kBlockElems = 64, kBlockBytes = 36;
  template <int NT, int R>
  static __device__ __forceinline__ void unit(float (&acc)[R][NT], const uint8_t* st, int rstride, int kl,
                                              const uint8_t* xt, int64_t xq_row, int n_tok, int64_t k, int64_t e0) {
    if (e0 >= k) return;
    const uint8_t* wb = st + 36 * kl;
    float sw[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r) nvfp4_scales(ld32(wb + r * rstride), sw[r]);
#pragma unroll
    for (int ab = 0; ab < 2; ++ab) {
      float dx[NT];
#pragma unroll
      for (int t = 0; t < NT; ++t)  // nvfp4_scales' ue4m3 * 0.5 = ue4m3_half
        dx[t] = t < n_tok ? x_scale(xt + t * xq_row, k, (e0 >> 5) + ab).d * 0.5f : 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * ab + h;
        uint32_t wv[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint8_t* q = wb + r * rstride + 4 + 8 * s;
          e2m1x8_i8(ld32(q), wv[r][0], wv[r][1]);
          e2m1x8_i8(ld32(q + 4), wv[r][2], wv[r][3]);
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          if (t >= n_tok) break;
          const uint4 v = x_ld16(xt + t * xq_row + e0 + 32 * ab + 16 * h);  // elements 0-3, 4-7, 8-11, 12-15
          const uint32_t a0 = x_pair_0(v.x, v.z), a1 = x_pair_1(v.x, v.z);
          const uint32_t a2 = x_pair_0(v.y, v.w), a3 = x_pair_1(v.y, v.w);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            int is = dp4a(wv[r][0], a0, 0);
            is = dp4a(wv[r][1], a1, is);
            is = dp4a(wv[r][2], a2, is);
            is = dp4a(wv[r][3], a3, is);
            acc[r][t] = fmaf(static_cast<float>(is), sw[r][s] * dx[t], acc[r][t]);
          }
        }
      }
    }
  }
};

struct Q8Mxfp4 {
  static constexpr int kBlockElems = 32, kBlockBytes = 17;
  template <int NT, int R>
  static __device__ __forceinline__ void unit(float (&acc)[R][NT], const uint8_t* st, int rstride, int kl,
                                              const uint8_t* xt, int64_t xq_row, int n_tok, int64_t k, int64_t e0) {
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int64_t eb = e0 + 32 * b;
      if (eb >= k) return;
      const int o = 34 * kl + 17 * b;
      uint32_t wv[R][8];
      float sw[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint8_t* base = st + r * rstride;
        sw[r] = e8m0_half(base[o]);
        uint32_t q[4];
        ld_words<4>(base, o + 1, q);
#pragma unroll
        for (int i = 0; i < 4; ++i) e2m1x8_i8(q[i], wv[r][2 * i], wv[r][2 * i + 1]);
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tok) break;
        const uint8_t* x = xt + t * xq_row;
        const float dx = x_scale(x, k, eb >> 5).d;
        const uint4 u = x_ld16(x + eb), v = x_ld16(x + eb + 16);
        const uint32_t X[8] = {u.x, u.y, u.z, u.w, v.x, v.y, v.z, v.w};
        uint32_t xp[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          xp[2 * i] = x_pair_0(X[i], X[i + 4]);
          xp[2 * i + 1] = x_pair_1(X[i], X[i + 4]);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int is = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) is = dp4a(wv[r][i], xp[i], is);
          acc[r][t] = fmaf(static_cast<float>(is), sw[r] * dx, acc[r][t]);
        }
      }
    }
  }
};

struct Q8Q8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  template <int NT, int R>
  static __device__ __forceinline__ void unit(float (&acc)[R][NT], const uint8_t* st, int rstride, int kl,
                                              const uint8_t* xt, int64_t xq_row, int n_tok, int64_t k, int64_t e0) {
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int64_t eb = e0 + 32 * b;
      if (eb >= k) return;
      const int o = 68 * kl + 34 * b;
      uint32_t wv[R][8];
      float d[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint8_t* base = st + r * rstride;
        d[r] = ld_half(base + o);
        ld_words<8>(base, o + 2, wv[r]);
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tok) break;
        const uint8_t* x = xt + t * xq_row;
        const float dx = x_scale(x, k, eb >> 5).d;
        const uint4 u = x_ld16(x + eb), v = x_ld16(x + eb + 16);
        const uint32_t X[8] = {u.x, u.y, u.z, u.w, v.x, v.y, v.z, v.w};
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int is = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) is = dp4a(wv[r][i], X[i], is);
          acc[r][t] = fmaf(static_cast<float>(is), d[r] * dx, acc[r][t]);
        }
      }
    }
  }
};

// Q4_K: sub-block h of the pair (2p + h) meets activation block (e0 / 32) + h:
//   acc += d * (dx * (sc * sum q*qx)) - dmin * (dx * (m * sum qx))
struct Q8Q4_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  template <int NT, int R>
  static __device__ __forceinline__ void unit(float (&acc)[R][NT], const uint8_t* st, int rstride, int kl,
                                              const uint8_t* xt, int64_t xq_row, int n_tok, int64_t k, int64_t e0) {
    if (e0 >= k) return;
    const int sb = kl >> 2, pp = kl & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t wv[R][8];
      float d[R], dmin[R];
      int sc[R], mn[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint8_t* b = st + r * rstride + 144 * sb;
        const uint32_t dm = ld32(b);
        d[r] = half_bits_to_float(static_cast<unsigned short>(dm & 0xFFFF));
        dmin[r] = half_bits_to_float(static_cast<unsigned short>(dm >> 16));
        q4k_scale_min(b + 4, 2 * pp + h, sc[r], mn[r]);
        const uint4 qa = *reinterpret_cast<const uint4*>(b + 16 + 32 * pp);
        const uint4 qb = *reinterpret_cast<const uint4*>(b + 32 + 32 * pp);
        const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) wv[r][i] = (q[i] >> (4 * h)) & 0x0F0F0F0Fu;
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tok) break;
        const uint8_t* x = xt + t * xq_row;
        const XScale xs = x_scale(x, k, (e0 >> 5) + h);
        const int sx = xs.s_lo + xs.s_hi;
        const uint4 u = x_ld16(x + e0 + 32 * h), v = x_ld16(x + e0 + 32 * h + 16);
        const uint32_t X[8] = {u.x, u.y, u.z, u.w, v.x, v.y, v.z, v.w};
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int is = 0;
#pragma unroll
          for (int i = 0; i < 8; ++i) is = dp4a(wv[r][i], X[i], is);
          const float a = xs.d * static_cast<float>(sc[r] * is);
          const float mm = xs.d * static_cast<float>(mn[r] * sx);
          acc[r][t] = fmaf(d[r], a, acc[r][t]);
          acc[r][t] = fmaf(-dmin[r], mm, acc[r][t]);
        }
      }
    }
  }
};

struct Q8Q6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  template <int NT, int R>
  static __device__ __forceinline__ void unit(float (&acc)[R][NT], const uint8_t* st, int rstride, int kl,
                                              const uint8_t* xt, int64_t xq_row, int n_tok, int64_t k, int64_t e0) {
    const int sb = kl >> 2, h = (kl >> 1) & 1, i = kl & 1;
    const int64_t esb = e0 - 64 * (kl & 3);  // first element of super-block sb
    if (esb >= k) return;
    uint32_t qla[R][4], qlb[R][4], qh[R][4];
    int sc[R][4];
    float d[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      // Blocks are 210 bytes: only 2-aligned, so the word loads align on the staged row.
      const uint8_t* row = st + r * rstride;
      const int o = 210 * sb;
      const uint8_t* b = row + o;
      ld_words<4>(row, o + 64 * h + 16 * i, qla[r]);
      ld_words<4>(row, o + 64 * h + 32 + 16 * i, qlb[r]);
      ld_words<4>(row, o + 128 + 32 * h + 16 * i, qh[r]);
#pragma unroll
      for (int qq = 0; qq < 4; ++qq) sc[r][qq] = static_cast<int8_t>(b[192 + 8 * h + i + 2 * qq]);
      d[r] = ld_half(b + 208);
    }
#pragma unroll
    for (int qq = 0; qq < 4; ++qq) {
      const int64_t eg = esb + 128 * h + 32 * qq;  // activation block of this group
      uint32_t cv[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t* ql = (qq & 1) ? qlb[r] : qla[r];
        const int ls = 4 * (qq >> 1), hs = 2 * qq;
#pragma unroll
        for (int j = 0; j < 4; ++j) cv[r][j] = q6k_codes(ql[j], ls, qh[r][j], hs);
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t >= n_tok) break;
        const uint8_t* x = xt + t * xq_row;
        const XScale xs = x_scale(x, k, eg >> 5);
        const int off = -32 * (i ? xs.s_hi : xs.s_lo);
        const uint4 X = x_ld16(x + eg + 16 * i);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int is = dp4a(cv[r][0], X.x, off);
          is = dp4a(cv[r][1], X.y, is);
          is = dp4a(cv[r][2], X.z, is);
          is = dp4a(cv[r][3], X.w, is);
          acc[r][t] = fmaf(static_cast<float>(sc[r][qq] * is), d[r] * xs.d, acc[r][t]);
        }
      }
    }
  }
};

template <class F>
struct Q8Policy {
  static __device__ __forceinline__ int64_t data_bytes(const Params& p) { return p.k / F::kBlockElems * F::kBlockBytes; }

  template <int NT, int R>
  static __device__ __forceinline__ void compute(float (&acc)[R][NT], const uint8_t* stage, const Params& p,
                                                 int64_t xrow, int c, int kl, int ns) {
    const int64_t e0 = static_cast<int64_t>(c) * p.chunk_elems + 64 * kl;
    F::template unit<NT, R>(acc, stage, ns * p.cbp, kl, p.xq + xrow * p.xq_row, p.xq_row, p.n_tok, p.k, e0);
  }
};

template <class F, int NT, int R>
void launch(Params p, int64_t n_out, const GemvQ8Plan& pl, cudaStream_t stream) {
  const int lpr = pl.lanes, ns = 32 / lpr;
  p.lpr_log2 = lpr == 32 ? 5 : lpr == 16 ? 4 : lpr == 8 ? 3 : 2;
  p.chunk_elems = 64 * lpr;
  p.chunk_bytes = p.chunk_elems / F::kBlockElems * F::kBlockBytes;
  // Padding: 16 bytes for the decoders' over-read; with several row slices, a row-chunk
  // stride of lpr (mod 32) words puts slice rs's lanes on banks the other slices leave free.
  int cbp = (p.chunk_bytes + 16 + 15) & ~15;
  if (ns > 1)
    while ((cbp / 4) % 32 != lpr % 32) cbp += 16;
  p.cbp = cbp;
  p.vb = gemv_vector_bytes(p, p.chunk_bytes);
  int stages = std::max(1, std::min(4, pl.stages));
  while (stages > 1 && static_cast<size_t>(kWarps) * stages * R * ns * cbp > static_cast<size_t>(max_smem_optin()))
    --stages;
  p.stages = stages;
  launch_kernel<Q8Policy<F>, NT, R>(p, n_out, stream);
}

template <class F>
void dispatch(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const Q8Plan& over, cudaStream_t stream) {
  const int64_t n_slots = grouped ? (p.slot_w != nullptr ? n_tok / p.n_used : n_tok) : 1;  // out rows
  const int64_t nt = grouped ? 1 : n_tok;
  GemvQ8Plan pl = gemv_q8_plan(type, p.rows, p.k, nt, n_slots, p.slot_w != nullptr ? p.n_used : 1);
  if (over.lanes == 4 || over.lanes == 8 || over.lanes == 16 || over.lanes == 32) pl.lanes = over.lanes;
  if (over.rows == 1 || over.rows == 2 || over.rows == 4) pl.rows = over.rows;
  if (over.stages >= 1) pl.stages = over.stages;
  if (nt == 1) {
    if (pl.rows == 1) return launch<F, 1, 1>(p, n_slots, pl, stream);
    if (pl.rows == 2) return launch<F, 1, 2>(p, n_slots, pl, stream);
    return launch<F, 1, 4>(p, n_slots, pl, stream);
  }
  if (nt == 2) return launch<F, 2, 4>(p, n_slots, pl, stream);
  if (nt <= 4) return launch<F, 4, 2>(p, n_slots, pl, stream);
  return launch<F, 8, 2>(p, n_slots, pl, stream);
}

}  // namespace

void gemv_q8(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const Q8Plan& plan, cudaStream_t stream) {
  switch (type) {
    case GgmlType::Q8_0: return dispatch<Q8Q8_0>(type, p, n_tok, grouped, plan, stream);
    case GgmlType::Q4_K: return dispatch<Q8Q4_K>(type, p, n_tok, grouped, plan, stream);
    case GgmlType::Q6_K: return dispatch<Q8Q6_K>(type, p, n_tok, grouped, plan, stream);
    case GgmlType::MXFP4: return dispatch<Q8Mxfp4>(type, p, n_tok, grouped, plan, stream);
    case GgmlType::NVFP4: return dispatch<Q8Nvfp4>(type, p, n_tok, grouped, plan, stream);
    default: fail_message("cuda gemv: no integer kernel for this type");
  }
}

}  // namespace ft::cuda::gemv_detail
