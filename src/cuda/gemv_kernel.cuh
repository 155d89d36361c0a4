// The decode GEMV skeleton shared by the float path (gemv_float.cu) and the integer path
// (gemv_q8.cu): work lists and slot bookkeeping, the cp.async staging pipeline, the
// cross-lane reduction and the epilogue (scale, rounding, accumulate, MoE combine). A
// Policy supplies compute(): one staged chunk of the warp's rows times the activations.
//
// A CTA is 4 independent warps. Within a warp, `lpr` lanes share a row (lane kl of them takes
// unit kl of every chunk) and the 32 / lpr "row slices" take different rows; each lane
// carries R rows (slice rs, row r: staged row r * ns + rs) so every activation value it
// loads serves R rows. lpr < 32 keeps all lanes busy when k is short (Qwen3-30B-A3B's expert
// down projection has 12 NVFP4 blocks per row).
//
// Staging: the warp copies its rows' chunk bytes global -> shared with cp.async (16-, 8- or
// 4-byte vectors, coalesced), `stages` chunks in flight; the block formats (36, 34, 17, 210
// bytes) are not vector-aligned per block, but a chunk is, so staging turns a strided
// per-block read into a streaming one. Each staged row-chunk takes `cbp` bytes (padding
// keeps the compute reads of different row slices on different banks and lets decoders
// read a word past their last byte).
#pragma once

#include <cstdint>

#include "cuda/cp_async.cuh"
#include "cuda/l2_ahead.h"
#include "cuda/round.cuh"

namespace ft::cuda::gemv_detail {

constexpr int kWarps = 4;  // warps per CTA

struct Params {
  const uint8_t* w;
  int64_t row_bytes, k, rows;
  const float* x;  // float path
  int64_t ldx;
  const uint8_t* xq;  // integer path
  int64_t xq_row;
  int n_tok;
  float* y;
  int64_t ldy;
  const float* row_scale;
  float scale;
  Round round;
  const int32_t* ids;
  int64_t expert_bytes, x_div;
  const float* bank;
  int bank_col;
  const float* slot_w;
  int n_used;
  int accumulate;
  // Grouped pair (GemvArgs::w_pair): out rows >= pair_out are out row - pair_out of the tensor
  // at w2, written y2_off floats further, bank column + 1. pair_out 0: no pair.
  const uint8_t* w2;
  int64_t y2_off, pair_out;
  // Grouped (GemvArgs::ids_early): the ids may be read before the PDL wait; accumulate
  // (GemvArgs::y_early): y too (NVFP4 slab / lean / packed kernels, the tiled mma kernel).
  int ids_early, y_early;
  // gemv_mma.cu / gemv_mma_tma.cu read their rows' row_scale before the PDL wait
  // (gemv_mma.cuh mma_row_scale_early); 0 (FT_GEMV_RS_EARLY=0): in the epilogue, after the sums.
  int rs_early;
  // NVFP4 in the tiled layout (cuda/nvfp4_tiled.h): gemv_mma.cu, gemv_mma_tma.cu, the slab kernel.
  int tiled;  // 2: lane-major (GemvArgs::lanes)
  // GemvArgs::route_logits (the lean slab kernel routes in its CTAs; route_n_used = the slots).
  const float* route_logits;
  int route_n_expert, route_n_used;
  int route_fast;  // route_warp::route_row_warp's `fast` argument (moe_route_fast())
  int32_t* route_ids;
  float* route_w;
  // GemvArgs::glu_xq (a dense gate|up, gemv_mma.cu): SwiGLU + Q8 of each finished 32-row block,
  // by the CTA that completes it (glu_count: zeroed counters, one a block, reset by that CTA).
  uint8_t* glu_xq;
  float* glu_h;
  unsigned* glu_count;
  int64_t glu_xq_row;
  // With glu_*: the CTAs take the tiles in SwiGLU block order (gemv_mma.cu GO; FT_GLU_ORDER=0: row order).
  int glu_order;
  // GemvArgs::scales_clean (the tensor-core kernels' scale decoder). Here, in glu_order's padding: Params
  // kept its size and every other field its offset (the kernels' PTX then changes nowhere else).
  int scales_clean;
  // GemvArgs::nq_* (dense, one token; gemv_mma.cu and the lean dense kernel): the norm fold's
  // producer tail (norm_fold.cuh) on each finished 32-row block of y.
  const float* nq_w;
  uint8_t* nq_xq;
  double* nq_part;
  unsigned* nq_count;
  // GemvArgs::norm_part (gemv_mma.cu): xq's block scales are raw, made those of the row / rms.
  const double* norm_part;
  float norm_eps;
  int after_gemv;  // GemvArgs::after_gemv (the tiled one-token launch plan)
  L2Ahead l2a;     // GemvArgs::l2_ahead (the lean dense kernel's instances that take it)
  // Launch plan (gemv_tuning.h).
  int64_t n_rg;    // row groups per out row: ceil(rows / (R * 32 / lanes))
  int64_t n_out;   // out rows: 1 (dense), slots (grouped), tokens (combine)
  int lpr_log2;    // lanes per row = 1 << lpr_log2 (2..5)
  int vb;          // cp.async vector bytes (16, 8, 4); 0: synchronous byte copies
  int stages;      // chunks in flight per warp (1..4)
  int cbp;         // shared bytes per staged row-chunk
  int chunk_elems, chunk_bytes;
};

// Copies bytes [off, off + nbytes) of the warp's n_rows rows (row0 + q, q < n_rows) into
// stage + q * cbp. Vectors are spread over the lanes across rows, so short chunks still use
// the whole warp.
__device__ __forceinline__ void stage_rows(uint8_t* stage, const uint8_t* w, const Params& p, int64_t row0,
                                           int n_rows, int64_t off, int nbytes, int lane) {
  const int64_t rows_left = p.rows - row0;
  const int nr = static_cast<int>(rows_left < n_rows ? (rows_left > 0 ? rows_left : 0) : n_rows);
  int tail_from = 0;
  const int nv = p.vb > 0 ? nbytes / p.vb : 0;
  if (nv > 0) {
    tail_from = nv * p.vb;
    // Vector i = lane + 32 m is vector v of row q (i = q * nv + v), stepped without a
    // division: a per-vector division cost ~1 instruction per weight element (H200 run 2).
    int q = 0, v = lane;
    while (v >= nv) v -= nv, ++q;
    while (q < nr) {
      const uint8_t* src = w + (row0 + q) * p.row_bytes + off + v * p.vb;
      uint8_t* dst = stage + q * p.cbp + v * p.vb;
      if (p.vb == 16) cp_async16(dst, src);
      else if (p.vb == 8) cp_async8(dst, src);
      else cp_async4(dst, src);
      v += 32;
      while (v >= nv) v -= nv, ++q;
    }
  }
  // Ragged tail (or everything, without vectors): synchronous bytes.
  if (tail_from < nbytes) {
    const int nt = nbytes - tail_from;
    for (int i = lane; i < nt * nr; i += 32) {
      const int q = i / nt, b = tail_from + (i - q * nt);
      stage[q * p.cbp + b] = w[(row0 + q) * p.row_bytes + off + b];
    }
  }
}

// y = v, or y += v (an fp32 add of the rounded result, never fused with its product).
__device__ __forceinline__ void store_out(float* y, float v, int accumulate) {
  *y = accumulate ? __fadd_rn(*y, v) : v;
}
// y += v with y's value read earlier (GemvArgs::y_early): the same add.
__device__ __forceinline__ void store_acc(float* y, float y_old, float v) { *y = __fadd_rn(y_old, v); }

// A position in a warp's work list. A warp takes the row groups ("groups") gw, gw + n_w,
// gw + 2 n_w, ... of all out rows; each group runs n_sub sub-slots (the ranks of a combined
// token, else 1) of n_chunks chunks. Cursors step through it without per-item divisions.
struct Cursor {
  int c, j;           // chunk, sub-slot
  int64_t gi;         // group
  int64_t out, row0;  // out row (token, slot or combined token) and first row of the group
  int64_t slot;       // token-slot (grouped) or 0
};
__device__ __forceinline__ void cursor_slot(Cursor& m, const Params& p) {
  m.slot = p.ids == nullptr ? 0 : (p.slot_w != nullptr ? m.out * p.n_used + m.j : m.out);
}
__device__ __forceinline__ void cursor_group(Cursor& m, const Params& p, int rw) {
  // Group counts stay below 2^32 (gemv.cu bounds slots and rows): a 32-bit division.
  const uint32_t o = static_cast<uint32_t>(m.gi) / static_cast<uint32_t>(p.n_rg);
  m.out = o;
  m.row0 = (m.gi - static_cast<int64_t>(o) * p.n_rg) * rw;
  cursor_slot(m, p);
}
__device__ __forceinline__ void cursor_next(Cursor& m, const Params& p, int n_chunks, int n_sub, int64_t n_w, int rw) {
  if (++m.c < n_chunks) return;
  m.c = 0;
  if (++m.j < n_sub) return cursor_slot(m, p);
  m.j = 0;
  m.gi += n_w;
  cursor_group(m, p, rw);
}

// Policy: static int64_t data_bytes(const Params&) -- bytes of a row's payload;
//         template <int NT, int R> static void compute(acc, stage, p, xrow, c, kl, ns)
//         -- acc[r][t] += staged chunk c of the lane's R rows . activations.
//
// Persistent streaming: the grid holds about as many warps as fit on the GPU and each warp
// walks its work list with `stages` chunk copies in flight, so loads and arithmetic overlap
// in steady state. (A grid of one row group per warp ran in ~1.1 waves on the H200 -- all
// warps loading, then all computing -- and reached 33% of the read bandwidth for NVFP4.)
// Every row's sum is made by one warp in a fixed order: deterministic, no atomics; the
// MoE combine walks a token's ranks in order inside one warp.
template <class Policy, int NT, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int lpr = 1 << p.lpr_log2, ns = 32 >> p.lpr_log2;
  const int rs = lane >> p.lpr_log2, kl = lane & (lpr - 1);
  const int rw = R * ns;  // rows of a group
  const int S = p.stages;
  uint8_t* stages = smem + warp * S * rw * p.cbp;

  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp, n_w = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t n_groups = p.n_rg * p.n_out;
  const bool combine = p.slot_w != nullptr;
  const int n_sub = combine ? p.n_used : 1;
  const int n_chunks = static_cast<int>((p.k + p.chunk_elems - 1) / p.chunk_elems);
  const int64_t my_groups = gw < n_groups ? (n_groups - gw + n_w - 1) / n_w : 0;
  const int n_items = static_cast<int>(my_groups) * n_sub * n_chunks;
  const int64_t data_bytes = Policy::data_bytes(p);

  auto issue = [&](const Cursor& m, int it) {
    const uint8_t* w = p.ids != nullptr ? p.w + static_cast<int64_t>(p.ids[m.slot]) * p.expert_bytes : p.w;
    const int64_t off = static_cast<int64_t>(m.c) * p.chunk_bytes;
    const int64_t left = data_bytes - off;
    stage_rows(stages + (it % S) * rw * p.cbp, w, p, m.row0, rw, off,
               static_cast<int>(left < p.chunk_bytes ? left : p.chunk_bytes), lane);
  };

  float acc[R][NT];
  float comb[R];
#pragma unroll
  for (int r = 0; r < R; ++r) comb[r] = 0.0f;

  // Item it lives in stage it % S, with S - 1 items in flight ahead of the one being
  // computed. Every iteration commits one group (possibly empty), so waiting for "at most
  // S - 1 pending" means item it has landed.
  Cursor ahead{0, 0, gw, 0, 0, 0};
  cursor_group(ahead, p, rw);
  Cursor m = ahead;
  for (int i = 0; i < S - 1; ++i) {
    if (i < n_items) issue(ahead, i);
    cp_async_commit();
    cursor_next(ahead, p, n_chunks, n_sub, n_w, rw);
  }
  for (int it = 0; it < n_items; ++it) {
    const int nxt = it + S - 1;
    if (nxt < n_items) issue(ahead, nxt);
    cp_async_commit();
    cursor_next(ahead, p, n_chunks, n_sub, n_w, rw);
    cp_async_wait(S - 1);
    __syncwarp();
    if (m.c == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    }
    const int64_t xrow = p.ids != nullptr ? m.slot / p.x_div : 0;
    Policy::template compute<NT, R>(acc, stages + (it % S) * rw * p.cbp + rs * p.cbp, p, xrow, m.c, kl, ns);
    __syncwarp();  // the stage is refilled in a later iteration
    const Cursor cur = m;
    cursor_next(m, p, n_chunks, n_sub, n_w, rw);
    if (cur.c != n_chunks - 1) continue;

    // Group done: sum the lanes of each row slice (fixed order), then the slice's lane 0
    // applies the epilogue to its R rows.
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = acc[r][t];
        for (int o = lpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
        acc[r][t] = v;
      }
    if (kl != 0) continue;
    float slot_scale = p.scale;
    if (p.ids != nullptr && p.bank != nullptr) slot_scale *= p.bank[static_cast<int64_t>(p.ids[cur.slot]) * 4 + p.bank_col];
    const float wk = combine ? p.slot_w[cur.slot] : 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = cur.row0 + r * ns + rs;
      if (row >= p.rows) continue;
      const float s = p.row_scale != nullptr ? p.row_scale[row] * slot_scale : slot_scale;
      if (combine) {
        const float v = round_to(p.round, __fmul_rn(acc[r][0], s));
        // The CPU combine's arithmetic, one rounding per operation (no FMA).
        comb[r] = cur.j == 0 ? __fmul_rn(v, wk) : __fadd_rn(comb[r], __fmul_rn(v, wk));
        if (cur.j == n_sub - 1) store_out(p.y + cur.out * p.ldy + row, round_to(p.round, comb[r]), p.accumulate);
      } else if (p.ids != nullptr) {
        store_out(p.y + cur.out * p.ldy + row, round_to(p.round, __fmul_rn(acc[r][0], s)), p.accumulate);
      } else {
#pragma unroll
        for (int t = 0; t < NT; ++t)
          if (t < p.n_tok) store_out(p.y + t * p.ldy + row, round_to(p.round, __fmul_rn(acc[r][t], s)), p.accumulate);
      }
    }
  }
}

}  // namespace ft::cuda::gemv_detail
