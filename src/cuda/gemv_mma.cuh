// Pieces of the NVFP4 tensor-core GEMV kernels (gemv_mma.cu: dense one token, a CTA per
// 16-row tile; gemv_mma_persist.cu: the same sums with CTAs that walk tiles). See
// gemv_mma.cu for the layout: a CTA owns 16 rows, a step is 4 NVFP4 blocks (144 bytes) of each
// row, lane (g, c) decodes word c of a 16-byte tile of rows g and g + 8, and the activations
// sit in B fragments {x, -x} built once per CTA in shared memory (x_frag). CUDA only.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/norm_fold.cuh"

namespace ft::cuda::gemv_detail {

inline constexpr int kMmaRows = 16;                                 // rows per CTA (the mma's M)
inline constexpr int kMmaStepBlocks = 4;                            // NVFP4 blocks per step
inline constexpr int kMmaRowStep = 144;                             // bytes of a row per step (9 x 16)
inline constexpr int kMmaStageBytes = kMmaRows * kMmaRowStep;       // 2304
inline constexpr int kMmaVecPerLane = (kMmaStageBytes / 16 + 31) / 32;  // 5 (144 vectors)
inline constexpr int kMmaFragGroupBytes = 4 * 4 * 16;  // per group: 4 tiles x 4 lanes x {x0, x1, -x0, -x1}
// XN (x only): fragments {x0, x1} alone, both of mma_step_acc's chains on B = x and the sums cp - cn -- the same
// int32 sums (exact), half the x_frag bytes, 8 B B-registers a tile. Taken by the bulk-copy kernel
// (gemv_mma_tma.cu): H100 session 43 call 7, Qwen3-30B-A3B tg128 5 rounds alternating 499.69 vs 497.12 tok/s
// (+0.5%, every round), the same greedy tokens. Not by gemv_mma.cu's: there the same change made Llama-8B 0.8%
// slower (call 5: 460.31 vs 464.17, every round).
template <bool XN>
struct MmaFrag {
  using B = std::conditional_t<XN, uint2, uint4>;
  static constexpr int kBytes = XN ? 8 : 16;
  static constexpr int kGroupBytes = 4 * 4 * kBytes;
  __device__ static B zero() {
    if constexpr (XN) return make_uint2(0, 0); else return make_uint4(0, 0, 0, 0);
  }
  __device__ static void put(uint8_t* frag, int f, uint32_t x0, uint32_t x1) {
    if constexpr (XN)
      *reinterpret_cast<uint2*>(frag + kBytes * f) = make_uint2(x0, x1);
    else
      *reinterpret_cast<uint4*>(frag + kBytes * f) = make_uint4(x0, x1, __vneg4(x0), __vneg4(x1));
  }
  __device__ static B load(const uint8_t* p) { return *reinterpret_cast<const B*>(p); }
};

__device__ __forceinline__ void mma_s8_16816(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
}

// m16n8k32: the two k16 halves of one tile's words in one instruction (A {row g lo, row g + 8
// lo, row g hi, row g + 8 hi}, B {x lo, x hi}): the same int32 sums as two m16n8k16 into one C.
__device__ __forceinline__ void mma_s8_16832(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Shared memory of a CTA: the E2M1 table (8 bytes, padded to 16), x_frag (k / 128 groups x
// 256 bytes; 128 with xn, MmaFrag<true>), the activation scales times 0.5 (k / 32 floats), the warps' stages, then
// red_bytes of row sums. n_rows activation rows (gemv_mma_batch.cu): their x_frag rows, then their scale rows, as
// mma_build_x writes them.
struct MmaSmem {
  int frag, xd, stage, red, total;
};
inline MmaSmem mma_smem(int64_t k, int nw, int ns, int red_bytes, bool xn = false, int n_rows = 1) {
  MmaSmem m{};
  m.frag = 16;
  m.xd = m.frag + n_rows * static_cast<int>(k / 128) * (xn ? MmaFrag<true>::kGroupBytes : kMmaFragGroupBytes);
  m.stage = m.xd + n_rows * static_cast<int>(k / 32) * 4;
  m.stage = (m.stage + 15) & ~15;
  m.red = m.stage + nw * ns * kMmaStageBytes;
  m.total = m.red + red_bytes;
  return m;
}

// x_frag and the activation scales (times 0.5) of n_rows act_q8 rows into shared memory, by
// all nthreads threads of the CTA (the caller syncs): row r is xq row (slot0 + r) / x_div, its
// fragments at frag + r * (nb / 2) * kMmaFragGroupBytes, its scales at xd + r * 2 nb.
// Fragment f = (group, tile t, lane c of the active four) = 16 bytes {x0, x1, -x0, -x1}: tile t
// of the group is block 2 group + (t >> 1), codes half h = t & 1; lane c's word is sub-block
// 2h + (c >> 1), bytes 4 (c & 1) .. + 3: nibble order of e2m1x8_pn, x_pair_0 / x_pair_1 of the
// activations 8 apart. Batches of 4 fragments per thread: their 8 loads (L2 round trips, while
// the first stages stream in) are in flight together rather than one after another.
// kB: fragments a thread loads before it writes any (a batch; 4 by default, gemv_mma_batch.cu more: its 2..8
// rows make 2..8x the batches, each an L2 round trip).
template <bool XN = false, int kB = 4>
__device__ __forceinline__ void mma_build_x(uint8_t* frag, float* xd, const uint8_t* xq, int64_t xq_row, int slot0,
                                            int64_t x_div, int n_rows, int64_t k, int nb, int nthreads) {
  using namespace q8_detail;
  const int n_frag = (nb / 2) * 16, n_all = n_frag * n_rows;
  for (int f0 = static_cast<int>(threadIdx.x); f0 < n_all; f0 += kB * nthreads) {
    uint32_t a[kB], b[kB];
#pragma unroll
    for (int u = 0; u < kB; ++u) {
      const int fa = f0 + u * nthreads, r = n_rows == 1 ? 0 : fa / n_frag, f = fa - r * n_frag;
      const int grp = f >> 4, t = (f >> 2) & 3, fc = f & 3;
      const int e = 128 * grp + 64 * (t >> 1) + 16 * (2 * (t & 1) + (fc >> 1)) + 4 * (fc & 1);
      a[u] = b[u] = 0;
      if (fa < n_all) {
        const uint8_t* x = xq + static_cast<int64_t>(static_cast<uint32_t>(slot0 + r) / static_cast<uint32_t>(x_div)) * xq_row;
        a[u] = __ldg(reinterpret_cast<const uint32_t*>(x + e));
        b[u] = __ldg(reinterpret_cast<const uint32_t*>(x + e + 8));
      }
    }
#pragma unroll
    for (int u = 0; u < kB; ++u) {
      const int fa = f0 + u * nthreads;
      const uint32_t x0 = x_pair_0(a[u], b[u]), x1 = x_pair_1(a[u], b[u]);
      if (fa < n_all) MmaFrag<XN>::put(frag, fa, x0, x1);
    }
  }
  for (int i = static_cast<int>(threadIdx.x); i < nb * 2 * n_rows; i += nthreads) {
    const int r = n_rows == 1 ? 0 : i / (nb * 2), j = i - r * (nb * 2);
    const uint8_t* x = xq + static_cast<int64_t>(static_cast<uint32_t>(slot0 + r) / static_cast<uint32_t>(x_div)) * xq_row;
    xd[i] = __ldg(reinterpret_cast<const float*>(x + k + 8 * j)) * 0.5f;
  }
}

// mma_build_x for one activation row (n_rows 1) with every load of the thread -- its fragments'
// words and its scales -- issued before the first is used: one L2 round trip after the PDL wait
// where mma_build_x takes one per batch of 4 fragments and one more for the scales. Returns false
// (nothing done) when a thread would hold more than MAXF fragments or MAXD scales. The same
// bytes as mma_build_x. (Its fragment offset repeats mma_build_x's line rather than sharing a
// helper: that helper changed the PTX of the measured instances, H200 session 26.)
// part (the norm fold's consumer, norm_fold.cuh; nullptr: none): the row's block sums, loaded with
// the rest (P a lane: k <= 1024 P), and the scales made fp16(raw / rms) -- every warp forms the same
// 1 / rms, so no barrier is added.
template <int MAXF, int MAXD, int P = 4, bool XN = false>
__device__ __forceinline__ bool mma_build_x_1pass(uint8_t* frag, float* xd, const uint8_t* xq, int64_t k, int nb,
                                                  int nthreads, const double* part = nullptr, float eps = 0.0f) {
  using namespace q8_detail;
  const int n_frag = (nb / 2) * 16, n_xd = nb * 2;
  if (n_frag > MAXF * nthreads || n_xd > MAXD * nthreads || (part != nullptr && k > 1024 * P)) return false;
  const int tid = static_cast<int>(threadIdx.x);
  double pv[P];
  if (part != nullptr) norm_fold::load_parts<P>(part, static_cast<int>(k / 32), pv);
  uint32_t a[MAXF], b[MAXF];
  float d[MAXD];
#pragma unroll
  for (int u = 0; u < MAXF; ++u) {
    const int f = tid + u * nthreads;
    const int grp = f >> 4, t = (f >> 2) & 3, fc = f & 3;
    const int e = 128 * grp + 64 * (t >> 1) + 16 * (2 * (t & 1) + (fc >> 1)) + 4 * (fc & 1);
    a[u] = b[u] = 0;
    if (f < n_frag) {
      a[u] = __ldg(reinterpret_cast<const uint32_t*>(xq + e));
      b[u] = __ldg(reinterpret_cast<const uint32_t*>(xq + e + 8));
    }
  }
#pragma unroll
  for (int u = 0; u < MAXD; ++u) {
    const int i = tid + u * nthreads;
    d[u] = i < n_xd ? __ldg(reinterpret_cast<const float*>(xq + k + 8 * i)) : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < MAXF; ++u) {
    const int f = tid + u * nthreads;
    const uint32_t x0 = x_pair_0(a[u], b[u]), x1 = x_pair_1(a[u], b[u]);
    if (f < n_frag) MmaFrag<XN>::put(frag, f, x0, x1);
  }
  if (part != nullptr) {
    const float inv = norm_fold::inv_rms<P>(pv, k, eps);
#pragma unroll
    for (int u = 0; u < MAXD; ++u) d[u] = norm_fold::fix_scale(d[u], inv);
  }
#pragma unroll
  for (int u = 0; u < MAXD; ++u) {
    const int i = tid + u * nthreads;
    if (i < n_xd) xd[i] = d[u] * 0.5f;
  }
  return true;
}

// The norm fold's consumer where the one-pass build declined: xd (= raw scale x 0.5, written and
// synced by mma_build_x) made fix_scale's x 0.5 -- the same bits (x 0.5 and x 2 are exact). Every
// thread; the caller syncs after.
__device__ __forceinline__ void mma_norm_fix_xd(float* xd, const double* part, int64_t k, float eps, int nthreads) {
  double pv[norm_fold::kMaxPartsPerLane];
  norm_fold::load_parts<norm_fold::kMaxPartsPerLane>(part, static_cast<int>(k / 32), pv);
  const float inv = norm_fold::inv_rms<norm_fold::kMaxPartsPerLane>(pv, k, eps);
  for (int i = static_cast<int>(threadIdx.x); i < static_cast<int>(k / 32); i += nthreads)
    xd[i] = norm_fold::fix_scale(xd[i] * 2.0f, inv) * 0.5f;
}

// The E2M1 table in shared memory (loaded back by every lane: a value ptxas cannot re-create
// per PRMT, H200 run 9). One thread writes it.
__device__ __forceinline__ void mma_put_table(uint8_t* smem) {
  if (threadIdx.x == 0) {
    reinterpret_cast<uint32_t*>(smem)[0] = q8_detail::kMag0;
    reinterpret_cast<uint32_t*>(smem)[1] = q8_detail::kMag1;
  }
}

// One step (16 rows x 4 blocks) of the dense kernels (gemv_mma.cu, gemv_mma_persist.cu) into a warp's row
// sums, its bytes fetched by the caller's word(gh, t, r) -- the lane's code word of tile t of group gh, row g +
// 8 r -- and scale(gh, r) -- the 16-bit scale pair of the lane's sub-blocks there, in the low half: lane (g, c)
// adds its sub-blocks of rows g, g + 8 to acc0, acc8 in the fixed order (gh 0 then 1; sub-block a then b), so
// any kernel that feeds a warp the same steps in the same order sums the same bits, whatever its layout.
// bx: the lane's B fragments (zero but for its tile my_tile; kept by the caller across steps).
// K32: each tile's p and n halves by one m16n8k32 instead of two m16n8k16 (the same int32 sums;
// the tiled instances of gemv_mma.cu, where it measured +2.7% on Llama-8B).
// CHK false: the block scales without the NaN codes' fix-up (nvfp4_scales2; Params::scales_clean).
template <bool K32, bool XN, bool CHK, class Word, class Scale>
__device__ __forceinline__ void mma_step_core(Word word, Scale scale, const uint8_t* frag, const float* xd, int step,
                                              const q8_detail::E2m1Table& tab, int my_tile,
                                              typename MmaFrag<XN>::B (&bx)[4], int c, float& acc0, float& acc8) {
  using namespace q8_detail;
#pragma unroll
  for (int gh = 0; gh < 2; ++gh) {
    const int grp = 2 * step + gh;
    // Positive and negative magnitudes in two accumulators: two chains of 8 dependent mma
    // instead of one of 16 (the n chain's B holds -x, so the sum is cp + cn).
    int cp[4] = {0, 0, 0, 0}, cn[4] = {0, 0, 0, 0};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (my_tile == t) bx[t] = MmaFrag<XN>::load(frag + (grp * 4 + t) * 4 * MmaFrag<XN>::kBytes);
      uint32_t p0l, p0h, n0l, n0h, p8l, p8h, n8l, n8h;
      e2m1x8_pn(word(gh, t, 0), tab, p0l, p0h, n0l, n0h);
      e2m1x8_pn(word(gh, t, 1), tab, p8l, p8h, n8l, n8h);
      // The n chain's B: -x (bx .z, .w), or under XN x again (MmaFrag); the sum below is then cp - cn.
      uint32_t nbl, nbh;
      if constexpr (XN) {
        nbl = bx[t].x, nbh = bx[t].y;
      } else {
        nbl = bx[t].z, nbh = bx[t].w;
      }
      if constexpr (K32) {
        mma_s8_16832(cp, p0l, p8l, p0h, p8h, bx[t].x, bx[t].y);
        mma_s8_16832(cn, n0l, n8l, n0h, n8h, nbl, nbh);
      } else {
        mma_s8_16816(cp, p0l, p8l, bx[t].x);
        mma_s8_16816(cn, n0l, n8l, nbl);
        mma_s8_16816(cp, p0h, p8h, bx[t].y);
        mma_s8_16816(cn, n0h, n8h, nbh);
      }
    }
    int cc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) cc[j] = XN ? cp[j] - cn[j] : cp[j] + cn[j];
    // Lane (g, c): tile c = block 2 gh + (c >> 1), half h = c & 1: sub-blocks 2h, 2h + 1,
    // activation block 2 (block) + h.
    const int bb = 2 * gh + (c >> 1), h = c & 1;
    const float dx = xd[2 * (kMmaStepBlocks * step + bb) + h];
    float s0a, s0b, s8a, s8b;
    nvfp4_scales2<CHK>(scale(gh, 0), s0a, s0b);
    nvfp4_scales2<CHK>(scale(gh, 1), s8a, s8b);
    acc0 = fmaf(static_cast<float>(cc[0]), s0a * dx, acc0);
    acc0 = fmaf(static_cast<float>(cc[1]), s0b * dx, acc0);
    acc8 = fmaf(static_cast<float>(cc[2]), s8a * dx, acc8);
    acc8 = fmaf(static_cast<float>(cc[3]), s8b * dx, acc8);
  }
}

// One staged step in the tiled layout's order (16 rows x 4 blocks at st, PITCH bytes apart; kMmaRowStep by
// default): mma_step_core on the stage's words. Lane (g, c) reads word c of a 16-byte half of a block's codes of
// rows g and g + 8 (bank 4 g + c: conflict free at the 144-byte row stride).
template <int PITCH = kMmaRowStep, bool K32 = false, bool XN = false, bool CHK = true>
__device__ __forceinline__ void mma_step_acc(const uint8_t* st, const uint8_t* frag, const float* xd, int step,
                                             const q8_detail::E2m1Table& tab, int my_tile,
                                             typename MmaFrag<XN>::B (&bx)[4], int g, int c, float& acc0,
                                             float& acc8) {
  auto word = [&](int gh, int t, int r) {
    return lds32(st + (g + 8 * r) * PITCH + (2 * gh + (t >> 1)) * 36 + 4 + 16 * (t & 1) + 4 * c);
  };
  auto scale = [&](int gh, int r) { return lds32(st + (g + 8 * r) * PITCH + 36 * (2 * gh + (c >> 1))) >> (16 * (c & 1)); };
  mma_step_core<K32, XN, CHK>(word, scale, frag, xd, step, tab, my_tile, bx, c, acc0, acc8);
}

// A lane's bytes of one step in the lane-major layout (nvfp4_tiled.cuh nvfp4_lane_in_piece): its 16 code words
// in 4 vectors (word w in v[w / 4], element w % 4) and its 4 scale halfwords (u = 2 gh + r: s.x low, high, then
// s.y).
struct MmaLaneStep {
  uint4 v[4];
  uint2 s;
};
__device__ __forceinline__ uint32_t mma_lane_word(const MmaLaneStep& r, int w) {
  const uint4& v = r.v[w >> 2];
  return (w & 3) == 0 ? v.x : (w & 3) == 1 ? v.y : (w & 3) == 2 ? v.z : v.w;
}
// The step from a lane's MmaLaneStep: the same sums as mma_step_acc<.., K32> on the tiled piece it was
// permuted from.
template <bool K32 = true, bool XN = false, bool CHK = true>
__device__ __forceinline__ void mma_lane_step_acc(const MmaLaneStep& ls, const uint8_t* frag, const float* xd,
                                                  int step, const q8_detail::E2m1Table& tab, int my_tile,
                                                  typename MmaFrag<XN>::B (&bx)[4], int c, float& acc0,
                                                  float& acc8) {
  auto word = [&](int gh, int t, int r) { return mma_lane_word(ls, 8 * gh + 2 * t + r); };
  auto scale = [&](int gh, int r) {
    const uint32_t s = gh == 0 ? ls.s.x : ls.s.y;
    return r == 0 ? s & 0xFFFFu : s >> 16;
  };
  mma_step_core<K32, XN, CHK>(word, scale, frag, xd, step, tab, my_tile, bx, c, acc0, acc8);
}

// The epilogue's row scale of tile row0's row threadIdx.x (threads < kMmaRows), loaded before
// the PDL wait where Params::rs_early says so: row scales are weights, never written by a kernel,
// and loaded after the sums they were one dependent L2 / HBM round trip at the end of every CTA of
// the fused qkv / gate|up launches (H200 session 18, tg128 alternating: Llama-8B 399.1 vs 394.7,
// Qwen3-30B-A3B 403.7 vs 402.0). gemv_mma.cu and gemv_mma_tma.cu; the persistent kernel, whose
// CTAs walk tiles, keeps the late load.
__device__ __forceinline__ float mma_row_scale_early(const Params& p, int64_t row0) {
  const int64_t row = row0 + static_cast<int64_t>(threadIdx.x);
  return p.rs_early && p.row_scale != nullptr && threadIdx.x < kMmaRows && row < p.rows ? p.row_scale[row] : 1.0f;
}
// The scale of `row` (this thread's row of the tile; early: mma_row_scale_early's value).
__device__ __forceinline__ float mma_row_scale(const Params& p, float early, int64_t row) {
  return p.row_scale != nullptr ? (p.rs_early ? early : p.row_scale[row]) * p.scale : p.scale;
}

// A warp's 16 row sums after its steps: the 4 lanes c of row g (rows g and g + 8) added, then written
// to slice `slot` of the CTA's reduction buffer (red[slot 16 + 0..15]). gemv_mma.cu's 35 kernels assemble to
// the same machine code as with the lines written out (bench/sass_same.py). gemv_mma_tma.cu and _persist.cu keep
// their own copies: through it their PTX is the same but for register numbers, and ptxas then emits different
// code -- a measured kernel's change that needs a device run (session 36).
__device__ __forceinline__ void mma_warp_rows_out(float acc0, float acc8, int g, int c, float* red, int slot) {
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 2);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 1);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 2);
  if (c == 0) {
    red[slot * kMmaRows + g] = acc0;
    red[slot * kMmaRows + g + 8] = acc8;
  }
}
// Row r's sum over the nw slices, in warp order (the order every instance's bits depend on).
__device__ __forceinline__ float mma_rows_sum(const float* red, int nw, int r) {
  float v = red[r];
  for (int w = 1; w < nw; ++w) v += red[w * kMmaRows + r];
  return v;
}

}  // namespace ft::cuda::gemv_detail
