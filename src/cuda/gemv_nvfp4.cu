// NVFP4 decode GEMV on the integer path (gemv.h with xq): the kernels gemv.cu picks for
// NVFP4 instead of the generic skeleton (gemv_kernel.cuh), whose NVFP4 unit ran at 32% of
// the H200's read bandwidth dense and 18-21% for the MoE experts (benches/h200.md, run 3).
// Same math as gemv_q8.cu and its twin gemv_q8_ref (dot_nvfp4): per 16-element sub-block an
// integer sum of 2*E2M1 codes times int8 activations (dp4a), then
//   acc = fma(float(is), ue4m3_half(scale) * x.d, acc)
// (ue4m3_half is taken as nvfp4_scales' full ue4m3 with the 0.5 folded into x.d: the same product).
// gemv_nvfp4() also dispatches the plan's kernel 3, the tensor-core kernel of gemv_mma.cu
// (dense, one token, 4224+ rows: H200 runs 10-11), falling back to these. (The expert
// tensor-core kernels of H200 run 11, gate/up and down + combine in these kernels' exact
// order, measured slower and were removed; the history keeps them.)
//
// Why this shape: at 4.5 TB/s and 0.5625 byte per element the H200 affords ~4 lane
// instructions per weight element. The generic kernel spent them on per-chunk cursor work,
// unaligned shared reads (funnel shifts) and cp.async bookkeeping. Here:
//   - weights move global -> registers with 16-byte loads (L1::no_allocate: streamed once,
//     and the activations keep L1), one step ahead, then registers -> shared (STS.128) ->
//     __syncwarp; every warp is an independent worker (H200 run 4: two steps ahead was 3-30%
//     slower at every shape, more registers for nothing);
//   - optionally (plan x_smem, off: 0-10% slower on the H200, run 5) the activations of the
//     whole call are copied once per CTA into shared memory (swizzled: conflict-free 16-byte
//     reads at the lanes' 64-byte stride);
//   - a lane decodes whole 36-byte blocks from shared memory at a 9-word stride (lane l
//     reads word 9l + j: bank (9l + j) mod 32, conflict-free) -- no funnel shifts;
//   - slab kernel: a step is 32 consecutive blocks (1152 bytes) of each of the warp's R rows;
//     lane l takes block column l of all R rows, so its activation loads serve R rows;
//   - packed kernel (grouped rows of fewer than 32 blocks, the Qwen3-30B-A3B expert down
//     projection has 12): a work item is rows x slots staged at once (all 8 ranks of a
//     combined token together, so their loads are in flight together); lanes walk the
//     (row, slot, block) list and per-row sums go through shared memory in block order.
// Sums are made by one warp in a fixed order (deterministic, no atomics); the combine sums
// the ranks in order with the exact epilogue of gemv.h.
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_tiled.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

constexpr int kPackM = kNvfp4PackBlocksPerLane;  // kBlockBytes .. kPackWarpBytes: gemv_nvfp4_dot.cuh

// Launch-time constants of both kernels.
struct Nv4 {
  int64_t nb;   // blocks per row
  int n_slabs;  // slab kernel: ceil(nb / 32)
  int n_sub;    // slots per out row (combine: n_used; else 1)
  int rb;       // packed: rows per item
  int pieces;   // packed: rb * n_sub
  int xs_rows;  // activation rows staged in shared memory (0: read from global)
  int xs_row;   // their stride there: k + k / 4 bytes (codes, then scales)
};

template <int VB>
__device__ __forceinline__ void st_s(uint8_t* p, const typename VecOf<VB>::T& v) {
  *reinterpret_cast<typename VecOf<VB>::T*>(p) = v;
}

// A vector of the slab kernel's step from lane-major tiled weights (nvfp4_tiled.h "Lanes"): VB bytes of a row
// from b (bytes from the slab's start) gathered a code word or a scale halfword at a time through the layout's
// map, so that the stage holds the row-major slab the kernel's dot products read. tb: the slab's first piece
// of the tile. Slower than the tiled layout's vector loads (VB / 4 to VB / 4 + 1 loads a vector); the lanes
// layout is for the one-token tensor-core GEMV.
template <int VB>
__device__ __forceinline__ typename VecOf<VB>::T ld_lanes(const uint8_t* tb, int q, int b) {
  uint32_t u[VB / 4];
#pragma unroll
  for (int x = 0; x < VB / 4; ++x) {
    const int bx = b + 4 * x;  // the slab starts a block: bx % 36 == 0 is a block's scale word
    const uint8_t* at = tb + nvfp4_lanes_in_tile(q, bx);
    if (bx % kBlockBytes == 0)
      u[x] = uint32_t{*reinterpret_cast<const uint16_t*>(at)} |
             (uint32_t{*reinterpret_cast<const uint16_t*>(tb + nvfp4_lanes_in_tile(q, bx + 2))} << 16);
    else
      u[x] = *reinterpret_cast<const uint32_t*>(at);
  }
  typename VecOf<VB>::T v;
  memcpy(&v, u, VB);
  return v;
}

// The slab kernel's issue for lane-major tiled weights: the step's R rows (row0 in one tile) of slab `slab`.
template <int VB, int R, int kV, int kNv>
__device__ __forceinline__ void issue_lanes(typename VecOf<VB>::T (&buf)[kV], const Params& p, const Nv4& g,
                                            int64_t row0, int slab, int lane) {
  const uint8_t* tb = p.w + (row0 / kTileRows) * kTileRows * p.row_bytes +
                      static_cast<int64_t>(slab) * (kSlabBytes / kTilePiece) * kTileStep;
  const int q0 = static_cast<int>(row0 % kTileRows);
  const int64_t bl = g.nb - static_cast<int64_t>(slab) * kSlabBlocks;
  const int nv = bl >= kSlabBlocks ? kNv : static_cast<int>(bl) * kBlockBytes / VB;  // vectors a row
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int i = lane + 32 * v, q = i / nv, o = i - q * nv;
    if (q < R) buf[v] = ld_lanes<VB>(tb, q0 + q, o * VB);
  }
}

// ---- slab kernel ----------------------------------------------------------------------------
//
// Work item = (out row, R consecutive rows); its steps are (slot j < n_sub, slab). Warp gw
// takes items gw, gw + n_w, ... and streams their steps with one step of loads in flight.
template <int NT, int R, bool XS, int VB, bool PN, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB) slab_kernel(const Params p, const Nv4 g) {
  using Vec = typename VecOf<VB>::T;
  constexpr int kNv = kSlabBytes / VB;     // vectors per row of a full slab
  constexpr int kV = (R * kNv + 31) / 32;  // vectors per lane (R = 4, VB = 16: exactly 9)
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  uint8_t* xs = smem;  // XS: g.xs_rows activation rows, then the warps' stages
  uint8_t* st = smem + (XS ? g.xs_rows * g.xs_row : 0) + warp * (R * kSlabBytes);
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp, n_w = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t n_items = p.n_rg * p.n_out;
  const int64_t my_items = gw < n_items ? (n_items - gw + n_w - 1) / n_w : 0;
  const int n_sub = g.n_sub, n_slabs = g.n_slabs;
  const int n_steps = static_cast<int>(my_items) * n_sub * n_slabs;
  const bool combine = p.slot_w != nullptr;
  const q8_detail::E2m1Table tab = q8_detail::e2m1_table();

  struct Step {
    int slab, j, half;  // half: 1 for the pair's second tensor (p.w2)
    int64_t item, out, row0, slot;
  };
  auto set_slot = [&](Step& m) {
    m.slot = p.ids == nullptr ? 0 : (combine ? m.out * n_sub + m.j : m.out);
  };
  auto locate = [&](Step& m) {
    // Item counts stay below 2^32 (gemv.cu bounds rows x slots): a 32-bit division.
    const uint32_t o = static_cast<uint32_t>(m.item) / static_cast<uint32_t>(p.n_rg);
    m.half = p.pair_out > 0 && o >= p.pair_out;
    m.out = o - (m.half ? p.pair_out : 0);
    m.row0 = (m.item - static_cast<int64_t>(o) * p.n_rg) * R;
    set_slot(m);
  };
  auto advance = [&](Step& m) {
    if (++m.slab < n_slabs) return;
    m.slab = 0;
    if (++m.j < n_sub) return set_slot(m);
    m.j = 0;
    m.item += n_w;
    locate(m);
  };

  // Vector i = lane + 32 v of the step is vector o of row q (row-major over the R rows). In a
  // full slab it lies off[v] = q * row_bytes + o * VB bytes past the step's base, the same
  // every step, so it is written once here (run 8 SASS: a division by kNv and 64-bit row
  // multiplies per vector, ~200 instructions per step). Run 9's SASS: at 120-128 registers
  // ptxas still re-computes off[v] in the loop (the magic-number division by 72 included),
  // only the 64-bit multiplies went. Vectors past the R rows get INT_MAX, and rows past the
  // last (row0 + nr) fail off[v] < nr * row_bytes (o * VB < row_bytes). gemv_nvfp4 keeps
  // 4 * row_bytes below 2^31.
  // Tiled (nvfp4_tiled.h; dense, rows a multiple of 16, so a group of R rows lies in one tile
  // and every row is live): byte b of the group's row q sits nvfp4_tiled_in_tile(q, b) past the
  // group's first row in the slab's first piece -- again the same every step (a slab is 8 whole
  // pieces).
  const int rb32 = static_cast<int>(p.row_bytes);
  int off[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int i = lane + 32 * v, q = i / kNv, o = i - q * kNv;
    off[v] = i >= R * kNv ? 0x7FFFFFFF
             : p.tiled   ? static_cast<int>(nvfp4_tiled_in_tile(q, o * VB))
                         : q * rb32 + o * VB;
  }
  auto issue = [&](Vec (&buf)[kV], const Step& m) {
    if (p.tiled == 2) return issue_lanes<VB, R, kV, kNv>(buf, p, g, m.row0, m.slab, lane);
    const uint8_t* base =
        p.tiled ? p.w + nvfp4_tiled_offset(m.row0, static_cast<int64_t>(m.slab) * kSlabBytes, p.row_bytes)
                : (m.half ? p.w2 : p.w) + m.row0 * p.row_bytes + static_cast<int64_t>(m.slab) * kSlabBytes;
    if (p.ids != nullptr) base += static_cast<int64_t>(p.ids[m.slot]) * p.expert_bytes;
    const int64_t rl = p.rows - m.row0;
    const int nr = rl < R ? static_cast<int>(rl) : R;
    const int64_t bl = g.nb - static_cast<int64_t>(m.slab) * kSlabBlocks;
    if (bl >= kSlabBlocks) {
      const int lim = p.tiled ? 0x7FFFFFFF : nr * rb32;
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (off[v] < lim) buf[v] = ld_w<VB>(base + off[v]);
    } else {  // the last, partial slab: bl * 36 bytes per row (a multiple of VB, gemv_nvfp4)
      const int nv = static_cast<int>(bl) * kBlockBytes / VB;
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int i = lane + 32 * v, q = i / nv, o = i - q * nv;
        if (q < nr) buf[v] = ld_w<VB>(base + (p.tiled ? nvfp4_tiled_in_tile(q, o * VB) : q * p.row_bytes + o * VB));
      }
    }
  };
  auto store = [&](const Vec (&buf)[kV], const Step& m) {
    const int64_t bl = g.nb - static_cast<int64_t>(m.slab) * kSlabBlocks;
    if (bl >= kSlabBlocks) {  // rows are kNv vectors apart in the stage too: contiguous
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int i = lane + 32 * v;
        if (i < R * kNv) st_s<VB>(st + i * VB, buf[v]);
      }
    } else {
      const int nv = static_cast<int>(bl) * kBlockBytes / VB;
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int i = lane + 32 * v, q = i / nv, o = i - q * nv;
        if (q < R) st_s<VB>(st + q * kSlabBytes + o * VB, buf[v]);
      }
    }
  };

  float acc[R][NT];
  float comb[R];
#pragma unroll
  for (int r = 0; r < R; ++r) comb[r] = 0.0f;

  // A step's epilogue scales (row_scale x slot scale, the combine weight), loaded before its
  // dot product rather than after it, meant to take the dependent round trip (ids -> bank)
  // off the experts' critical path (one step per item). As written the product is formed at
  // once, so the warp still waits for the loads, before the dot product instead of after;
  // run 9 measured the experts within 2% of run 8. (Loading them with the weights, one step
  // ahead, held 2 x (R + 1) more registers: spills at 6 blocks per SM, ptxas -v.)
  struct Scl {
    float s[R];
    float wk;
  };
  auto load_scl = [&](Scl& c, const Step& m) {
    if (m.slab != n_slabs - 1) return;
    const float ss = slot_scale(p, m.slot, m.half);
    c.wk = combine ? p.slot_w[m.slot] : 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = m.row0 + r;
      c.s[r] = p.row_scale != nullptr && row < p.rows ? p.row_scale[row] * ss : ss;
    }
  };

  // y_early (dense, one token): lane r's row of the warp's first item, read before the PDL wait.
  const bool y_pre = NT == 1 && p.y_early && p.ids == nullptr;
  float y_old = 0.0f;
  auto epilogue = [&](const Step& m, const Scl& sc) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = acc[r][t];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
        acc[r][t] = v;
      }
    const float wk = sc.wk;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = m.row0 + r;
      if (row >= p.rows) continue;
      const float s = sc.s[r];
      if (combine) {
        const float v = round_to(p.round, __fmul_rn(acc[r][0], s));
        // The CPU combine's arithmetic, one rounding per operation (no FMA).
        comb[r] = m.j == 0 ? __fmul_rn(v, wk) : __fadd_rn(comb[r], __fmul_rn(v, wk));
        if (m.j == n_sub - 1 && lane == r)
          store_out(p.y + m.out * p.ldy + row, round_to(p.round, comb[r]), p.accumulate);
      } else if (p.ids != nullptr) {
        if (lane == r)
          store_out(p.y + (m.half ? p.y2_off : 0) + m.out * p.ldy + row, round_to(p.round, __fmul_rn(acc[r][0], s)),
                    p.accumulate);
      } else {
#pragma unroll
        for (int t = 0; t < NT; ++t)
          if (t < p.n_tok && lane == r * NT + t) {
            const float v = round_to(p.round, __fmul_rn(acc[r][t], s));
            if (y_pre && m.item == gw)
              store_acc(p.y + t * p.ldy + row, y_old, v);
            else
              store_out(p.y + t * p.ldy + row, v, p.accumulate);
          }
      }
    }
  };
  auto compute = [&](const Step& m) {
    Scl sc;
    load_scl(sc, m);
    if (m.slab == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    }
    const int c = m.slab * kSlabBlocks + lane;
    if (c < g.nb) {
      // 32-bit: a 64-bit division is a software routine, here per step on the experts (one
      // step per item). Slots stay below 65536 (gemv.cu bounds n_tok).
      const int64_t xrow = p.ids != nullptr ? static_cast<uint32_t>(m.slot) / static_cast<uint32_t>(p.x_div) : 0;
      if constexpr (XS)
        block_dot<NT, R, true, PN>(acc, st + kBlockBytes * lane, kSlabBytes, xs + xrow * g.xs_row, g.xs_row, p.k, c,
                                   p.n_tok, tab);
      else
        block_dot<NT, R, false, PN>(acc, st + kBlockBytes * lane, kSlabBytes, p.xq + xrow * p.xq_row, p.xq_row, p.k, c,
                                    p.n_tok, tab);
    }
    if (m.slab == n_slabs - 1) epilogue(m, sc);
  };

  // PDL (cuda/pdl.cuh): dense weights are never written by earlier kernels, so their first
  // step loads before the wait; expert ids, activations and outputs only after it.
  // With ids_early the ids are final before the wait too (gemv.h).
  const bool early = p.ids == nullptr || p.ids_early;
  if (!early) pdl_wait(), pdl_trigger();
  Step ahead{0, 0, 0, gw, 0, 0, 0};
  locate(ahead);
  Step m = ahead;
  if (y_pre && lane < R && gw < n_items && ahead.row0 + lane < p.rows) y_old = p.y[ahead.row0 + lane];
  Vec b0[kV] = {};
  if (n_steps > 0) issue(b0, ahead), advance(ahead);
  if (early) pdl_wait(), pdl_trigger();
  if constexpr (XS) stage_x(xs, p, g.xs_rows, g.xs_row);  // while the first slab loads
  for (int s = 0; s < n_steps; ++s) {
    __syncwarp();  // every lane is done with the previous step's stage
    store(b0, m);
    __syncwarp();
    if (s + 1 < n_steps) issue(b0, ahead), advance(ahead);
    compute(m);
    advance(m);
  }
}

// ---- packed kernel (grouped, rows of fewer than 32 blocks) -----------------------------------
//
// Work item = (out row, rb consecutive rows); piece q = rl * n_sub + j is row row0 + rl of
// slot j (combine: token out's rank j; else the out row's one slot). Piece q's blocks are
// list entries q * nb .. q * nb + nb - 1, staged at 36 * entry; lane l computes entries
// l + 32 m (m < 4). Items stream with one item of loads in flight.
template <int VB, bool XS, bool PN, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB) packed_kernel(const Params p, const Nv4 g) {
  using Vec = typename VecOf<VB>::T;
  constexpr int kV = (kPackStage / VB + 31) / 32;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  uint8_t* xs = smem;
  uint8_t* st = smem + (XS ? g.xs_rows * g.xs_row : 0) + warp * kPackWarpBytes;
  float* red = reinterpret_cast<float*>(st + kPackStage);
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp, n_w = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t n_items = p.n_rg * p.n_out;
  const int S = g.n_sub, P = g.pieces, nb = static_cast<int>(g.nb), nbt = P * nb;
  const int nvp = nb * kBlockBytes / VB, nvt = P * nvp;  // vectors per piece, per item
  const bool combine = p.slot_w != nullptr;
  const q8_detail::E2m1Table tab = q8_detail::e2m1_table();

  // This lane's list entries: piece row rl, slot j, block b (constant over items).
  int e_rl[kPackM], e_j[kPackM], e_b[kPackM];
#pragma unroll
  for (int m = 0; m < kPackM; ++m) {
    const int i = lane + 32 * m, q = i / nb;
    e_b[m] = i - q * nb;
    e_rl[m] = q / S;
    e_j[m] = q - e_rl[m] * S;
  }
  auto item_pos = [&](int64_t item, int64_t& out, int64_t& row0) {
    const uint32_t o = static_cast<uint32_t>(item) / static_cast<uint32_t>(p.n_rg);
    out = o;
    row0 = (item - static_cast<int64_t>(o) * p.n_rg) * g.rb;
  };
  auto slot_of = [&](int64_t out, int j) { return combine ? out * S + j : out; };

  // Lane q < P finds piece q's row; every lane then takes its vectors' bases by shuffle.
  auto issue = [&](Vec (&buf)[kV], int64_t item) {
    int64_t out, row0;
    item_pos(item, out, row0);
    uintptr_t base = 0;
    if (lane < P) {
      const int rl = lane / S, j = lane - rl * S;
      const int64_t row = row0 + rl;
      if (row < p.rows)
        base = reinterpret_cast<uintptr_t>(p.w + static_cast<int64_t>(p.ids[slot_of(out, j)]) * p.expert_bytes +
                                           row * p.row_bytes);
    }
    int q = 0, v = lane;
    while (v >= nvp) v -= nvp, ++q;
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const uintptr_t b = __shfl_sync(0xFFFFFFFFu, static_cast<unsigned long long>(base), q & 31);
      if (q < P && b != 0) buf[u] = ld_w<VB>(reinterpret_cast<const uint8_t*>(b) + v * VB);
      v += 32;
      while (v >= nvp) v -= nvp, ++q;
    }
  };
  auto store = [&](const Vec (&buf)[kV]) {
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = lane + 32 * u;
      if (i < nvt) st_s<VB>(st + i * VB, buf[u]);
    }
  };
  // Lane q < P: piece q's scale and combine weight (ids -> bank, row_scale, slot_w).
  struct Sw {
    float s = 0.0f, w = 0.0f, y = 0.0f;  // y: the combine's old y (y_early)
  };
  auto load_sw = [&](int64_t item) {
    int64_t out, row0;
    item_pos(item, out, row0);
    const int rl = lane / S, j = lane - rl * S;
    const int64_t row = row0 + rl;
    Sw r;
    if (lane < P && row < p.rows) {
      const int64_t slot = slot_of(out, j);
      const float ss = slot_scale(p, slot);
      r.s = p.row_scale != nullptr ? p.row_scale[row] * ss : ss;
      r.w = combine ? p.slot_w[slot] : 0.0f;
    }
    return r;
  };
  // The combine's old y of the item's row (its first lane), y_early.
  auto load_y = [&](int64_t item) {
    int64_t out, row0;
    item_pos(item, out, row0);
    const int rl = lane / S, j = lane - rl * S;
    const int64_t row = row0 + rl;
    return lane < P && row < p.rows && j == 0 ? p.y[out * p.ldy + row] : 0.0f;
  };
  // use_pre: pre holds the item's Sw, loaded earlier (the first item with ids_early: before the
  // PDL wait). By value: a pointer put it in local memory (ptxas -v: an 8-byte stack frame).
  auto compute = [&](int64_t item, bool use_pre, bool use_y, Sw pre) {
    int64_t out, row0;
    item_pos(item, out, row0);
    // The scale and combine weight before the dot products (after them they were a dependent
    // round trip, ids -> bank, on the critical path of a warp's one item; as in the slab kernel
    // the product is formed at once: run 9 within 2% of run 8).
    const int rl = lane / S, j = lane - rl * S;
    const int64_t row = row0 + rl;
    const bool live = lane < P && row < p.rows;
    const Sw sw = use_pre ? pre : load_sw(item);
    const float s = sw.s, w = sw.w;
#pragma unroll
    for (int m = 0; m < kPackM; ++m) {
      const int i = lane + 32 * m;
      if (i < nbt) {
        const int64_t xrow = static_cast<uint32_t>(slot_of(out, e_j[m])) / static_cast<uint32_t>(p.x_div);
        float a[1][1] = {{0.0f}};
        if constexpr (XS)
          block_dot<1, 1, true, PN>(a, st + kBlockBytes * i, 0, xs + xrow * g.xs_row, g.xs_row, p.k, e_b[m], 1, tab);
        else
          block_dot<1, 1, false, PN>(a, st + kBlockBytes * i, 0, p.xq + xrow * p.xq_row, p.xq_row, p.k, e_b[m], 1,
                                     tab);
        red[i] = a[0][0];
      }
    }
    __syncwarp();
    // Lane q < P finishes piece q (its blocks' sums in block order, scale, rounding): the
    // pieces' scale loads (ids -> bank, row_scale, slot_w) run in parallel across lanes; one
    // lane per row looping over the ranks serialised 2 dependent loads per rank (H200 run 5:
    // down + combine 9.95 us against 7.35 without the combine, same bytes).
    float v = 0.0f, wk = 0.0f;
    if (live) {
      const float* pr = red + lane * nb;
      float dot = 0.0f;
      for (int b = 0; b < nb; ++b) dot += pr[b];
      v = round_to(p.round, __fmul_rn(dot, s));
      if (combine) wk = w;
      else store_out(p.y + out * p.ldy + row, v, p.accumulate);
    }
    if (combine) {
      // The row's first lane sums its ranks in order, one rounding per operation (no FMA).
      float cb = 0.0f;
      for (int i = 0; i < S; ++i) {
        const int src = (rl * S + i) & 31;
        const float pj = __fmul_rn(__shfl_sync(0xFFFFFFFFu, v, src), __shfl_sync(0xFFFFFFFFu, wk, src));
        cb = i == 0 ? pj : __fadd_rn(cb, pj);
      }
      if (live && j == 0) {
        if (use_y)
          store_acc(p.y + out * p.ldy + row, pre.y, round_to(p.round, cb));
        else
          store_out(p.y + out * p.ldy + row, round_to(p.round, cb), p.accumulate);
      }
    }
    __syncwarp();  // red and the stage are rewritten for the next item
  };

  Vec buf[kV] = {};
  int64_t item = gw;
  // Grouped: the ids come from the router, final before the wait only with ids_early (gemv.h);
  // then the first item's weights, scales and combine weights all load before it.
  Sw first;
  if (p.ids_early && item < n_items) issue(buf, item), first = load_sw(item);
  const bool y_pre = combine && p.y_early;
  if (y_pre && item < n_items) first.y = load_y(item);
  pdl_wait();
  pdl_trigger();
  if (!p.ids_early && item < n_items) issue(buf, item);
  if constexpr (XS) stage_x(xs, p, g.xs_rows, g.xs_row);
  for (; item < n_items; item += n_w) {
    store(buf);
    __syncwarp();
    if (item + n_w < n_items) issue(buf, item + n_w);
    compute(item, item == gw && p.ids_early, item == gw && y_pre, first);
  }
}

// ---- launch ---------------------------------------------------------------------------------

// Resident CTAs per SM of `kernel` at `smem` bytes, cached per kernel (smem << 32 | ctas);
// above 48 KB the kernel is first allowed the opt-in maximum.
template <class K>
int ctas_per_sm(K kernel, size_t smem, std::atomic<uint64_t>& cache) {
  if (smem > static_cast<size_t>(max_smem_optin())) fail_message("cuda gemv: nvfp4 plan needs too much shared memory");
  const int blocks = cached_ctas_per_sm(kernel, smem, kWarps * 32, cache);
  if (blocks < 1) fail_message("cuda gemv: nvfp4 kernel does not fit on an SM");
  return blocks;
}

// Decoder: sign-split for 1-2 tokens; with more tokens each decoded word serves more dp4a,
// and sign-split's doubled dp4a count loses (run 8, 8 tokens, 14336x4096: 66.5 us at R 4,
// 56.3 at R 2, against run 5's byte_perm 52.1 at R 4).
template <int NT, int R, bool XS, int VB, bool PN = (NT <= 2), int MINB = 4>
void launch_slab(Params p, int64_t n_out, const Nv4& g, cudaStream_t stream) {
  auto kernel = slab_kernel<NT, R, XS, VB, PN, MINB>;
  p.n_rg = (p.rows + R - 1) / R;
  p.n_out = n_out;
  const size_t smem = static_cast<size_t>(kWarps) * R * kSlabBytes + (XS ? static_cast<size_t>(g.xs_rows) * g.xs_row : 0);
  static std::atomic<uint64_t> cache{0};
  const int ctas = ctas_per_sm(kernel, smem, cache);
  launch_pdl(kernel, warp_grid(p.n_rg * n_out, ctas), dim3(kWarps * 32), smem, stream, p, g);
}

template <int VB, bool XS, bool PN = true, int MINB = 4>
void launch_packed(Params p, int64_t n_out, const Nv4& g, cudaStream_t stream) {
  auto kernel = packed_kernel<VB, XS, PN, MINB>;
  p.n_rg = (p.rows + g.rb - 1) / g.rb;
  p.n_out = n_out;
  const size_t smem = static_cast<size_t>(kWarps) * kPackWarpBytes + (XS ? static_cast<size_t>(g.xs_rows) * g.xs_row : 0);
  static std::atomic<uint64_t> cache{0};
  const int ctas = ctas_per_sm(kernel, smem, cache);
  launch_pdl(kernel, warp_grid(p.n_rg * n_out, ctas), dim3(kWarps * 32), smem, stream, p, g);
}

// Instances: one token R = 1, 2, 4; several tokens R = 2, 4 (NT = 2, 4, 8); 4-byte vectors
// (rows not 16-byte aligned) R = 2 only. Each with and without the shared activations.
template <int NT, bool XS, int VB>
void slab_rows(const Params& p, int64_t n_out, const Nv4& g, int R, cudaStream_t s) {
  if constexpr (VB == 4) {
    (void)R;
    return launch_slab<NT, 2, XS, 4>(p, n_out, g, s);
  } else {
    if constexpr (NT == 1) {
      if (R == 1) return launch_slab<1, 1, XS, VB>(p, n_out, g, s);
    }
    if (R <= 2) return launch_slab<NT, 2, XS, VB>(p, n_out, g, s);
    return launch_slab<NT, 4, XS, VB>(p, n_out, g, s);
  }
}

// The variants of one token, 16-byte vectors, activations from global memory (the dense and
// expert decode shapes the benchmark compares): decoder (1 byte_perm, else e2m1x8_pn) and
// the launch bound's blocks per SM (4 / 5 / 6 / 8 of 128 threads: at most 128 / 102 / 80 / 64
// registers per thread).
template <int R>
void slab_variant(const Params& p, int64_t n_out, const Nv4& g, int decode, int minb, cudaStream_t s) {
  if (decode == 1) return launch_slab<1, R, false, 16, false, 4>(p, n_out, g, s);
  if (minb == 5) return launch_slab<1, R, false, 16, true, 5>(p, n_out, g, s);
  if (minb == 6) return launch_slab<1, R, false, 16, true, 6>(p, n_out, g, s);
  if (minb == 8) return launch_slab<1, R, false, 16, true, 8>(p, n_out, g, s);
  return launch_slab<1, R, false, 16, true, 4>(p, n_out, g, s);
}
void packed_variant(const Params& p, int64_t n_out, const Nv4& g, int decode, int minb, cudaStream_t s) {
  if (decode == 1) return launch_packed<16, false, false, 4>(p, n_out, g, s);
  if (minb == 5) return launch_packed<16, false, true, 5>(p, n_out, g, s);
  if (minb == 6) return launch_packed<16, false, true, 6>(p, n_out, g, s);
  if (minb == 8) return launch_packed<16, false, true, 8>(p, n_out, g, s);
  return launch_packed<16, false, true, 4>(p, n_out, g, s);
}

template <bool XS, int VB>
void slab_tokens(const Params& p, int64_t nt, int64_t n_out, const Nv4& g, int R, cudaStream_t s) {
  if (nt == 1) return slab_rows<1, XS, VB>(p, n_out, g, R, s);
  if (nt == 2) return slab_rows<2, XS, VB>(p, n_out, g, R, s);
  if (nt <= 4) return slab_rows<4, XS, VB>(p, n_out, g, R, s);
  return slab_rows<8, XS, VB>(p, n_out, g, R, s);
}

// The slab kernel at R rows: one token with 16-byte vectors and activations from global memory
// takes the plan's decoder and launch bound (slab_variant), anything else the token instances.
void launch_slab_plan(const Params& p, int64_t nt, int64_t n_out, const Nv4& g, int R, int vb, bool xs,
                      const GemvNvfp4Plan& pl, cudaStream_t s) {
  if (nt == 1 && vb == 16 && !xs) {
    if (R == 1) return slab_variant<1>(p, n_out, g, pl.decode, pl.minb, s);
    if (R == 2) return slab_variant<2>(p, n_out, g, pl.decode, pl.minb, s);
    return slab_variant<4>(p, n_out, g, pl.decode, pl.minb, s);
  }
  if (vb == 16) return xs ? slab_tokens<true, 16>(p, nt, n_out, g, R, s) : slab_tokens<false, 16>(p, nt, n_out, g, R, s);
  xs ? slab_tokens<true, 4>(p, nt, n_out, g, R, s) : slab_tokens<false, 4>(p, nt, n_out, g, R, s);
}

}  // namespace

std::atomic<int64_t> g_pair_launches{0};

bool gemv_nvfp4(const Params& p, int64_t n_tok, bool grouped, const Nvfp4Override& over, cudaStream_t stream) {
  const int n_sub = p.slot_w != nullptr ? p.n_used : 1;
  const int64_t n_out = grouped ? (p.slot_w != nullptr ? n_tok / p.n_used : n_tok) : 1;
  const int64_t nt = grouped ? 1 : n_tok;
  const int64_t nb = p.k / 64;
  // A routing in the launch (GemvArgs::route_logits) only on the lean slab kernel below.
  if (p.route_logits != nullptr && (!grouped || nt != 1 || p.slot_w != nullptr)) return false;
  GemvNvfp4Plan pl = gemv_nvfp4_plan(p.rows, p.k, nt, n_out, n_sub, grouped);
  if (over.mma_warps > 0) pl.mma_warps = pl.persist_fold = over.mma_warps;
  if (over.mma_stages > 0) pl.mma_stages = over.mma_stages;
  if (over.persist_groups > 0) pl.persist_groups = over.persist_groups;
  if (over.persist_stages > 0) pl.persist_stages = over.persist_stages;
  // The warp-fed bulk-copy mma kernel, planned or switched on (gemv_set_nvfp4_tma; -1 off).
  const bool tma_plan = pl.tma && over.tma == 0 && over.kernel < 0 && !over.mma_off;
  if (tma_plan || over.tma == 2 || (over.tma == 1 && pl.kernel == 3 && over.kernel < 0)) {
    const int w = over.tma_warps > 0 ? over.tma_warps : pl.mma_warps;
    if (gemv_nvfp4_mma_tma(p, nt, grouped, w, over.tma_chunk, over.tma_stages, stream)) return true;
  }
  // The persistent mma kernel, planned or forced (fold = the mma kernel's warps: the same bits).
  if ((pl.persist && over.kernel < 0 && !over.persist_off && !over.mma_off) || over.kernel == 4) {
    if (gemv_nvfp4_mma_persist(p, nt, grouped, pl.persist_fold, pl.persist_groups, pl.persist_stages, stream))
      return true;
  }
  // The mma kernel, planned or forced; where it declines the shape, the other kernels' plan.
  if (pl.kernel == 3 && over.mma_off) pl.kernel = 1;
  if (pl.kernel == 3 || over.kernel == 3) {
    if (over.kernel < 0 || over.kernel == 3) {
      if (gemv_nvfp4_mma(p, nt, grouped, pl.mma_warps, pl.mma_stages, stream)) return true;
    }
    if (pl.kernel == 3) pl.kernel = 1;
  }
  if (over.kernel >= 0 && over.kernel <= 2 && over.kernel != pl.kernel) {
    pl.kernel = over.kernel;
    if (pl.kernel == 2) {
      pl.rows = grouped ? gemv_nvfp4_pack_rows(nb, n_sub, p.rows) : 0;
      if (pl.rows == 0) pl.kernel = 0;
    } else if (pl.kernel == 1) {
      pl.rows = 2;
    }
  }
  if (pl.kernel == 1 && (over.rows == 1 || over.rows == 2 || over.rows == 4)) pl.rows = over.rows;
  if (over.x_smem == 1 || over.x_smem == 2) pl.x_smem = over.x_smem == 2;
  if (over.decode == 1 || over.decode == 2) pl.decode = over.decode;
  if (over.minb >= 4 && over.minb <= 8 && over.minb != 7) pl.minb = over.minb;
  if (pl.kernel == 0) return false;

  // Vector width: 16 bytes when every row, expert and (partial) slab or piece starts
  // 16-aligned (36 * nb % 16 == 0 needs nb % 4 == 0), else 4; rows off 4 bytes: generic kernel.
  auto aligned = [&](int vb) {
    return reinterpret_cast<uintptr_t>(p.w) % vb == 0 && p.row_bytes % vb == 0 &&
           (!grouped || p.expert_bytes % vb == 0) && (nb * kBlockBytes) % vb == 0;
  };
  const int vb = aligned(16) ? 16 : aligned(4) ? 4 : 0;
  // 32-bit load offsets (slab kernel) and activation-row divisions (slots < 65536).
  if (vb == 0 || p.row_bytes > (int64_t{1} << 28) || (grouped && p.x_div > 0x7FFFFFFF)) return false;

  Nv4 g{};
  g.nb = nb;
  g.n_slabs = static_cast<int>((nb + kSlabBlocks - 1) / kSlabBlocks);
  g.n_sub = n_sub;
  // Every activation row the call reads (grouped: slots / x_div of them).
  const int64_t x_rows = grouped ? (n_tok - 1) / p.x_div + 1 : nt;
  g.xs_row = static_cast<int>(p.k + p.k / 4);
  const bool xs = pl.x_smem && x_rows * g.xs_row <= kNvfp4XSmemMax;
  g.xs_rows = xs ? static_cast<int>(x_rows) : 0;
  const int R = nt > 1 && pl.rows < 2 ? 2 : pl.rows;
  // A pair (p.w2) only on the one-token slab instances, its out rows doubled; anything else
  // declines before launching (the caller then makes two calls).
  const bool pair_ok = pl.kernel == 1 && nt == 1 && vb == 16 && !xs;
  // One-token expert launches: the lean kernels where they take the plan (gemv_nvfp4_lean.cu,
  // the same bits as the slab / packed launch below).
  const bool lean = grouped && nt == 1 && vb == 16 && !xs && !over.experts_off;
  GemvNvfp4Plan lean_pl = pl;  // FT_GEMV_NVFP4_EXPERT_PLAN: the lean gate / up launches' rows and bound
  if (p.route_logits != nullptr) lean_pl.minb = gemv_nvfp4_lean_routed_minb(nb <= kSlabBlocks, lean_pl);
  if (pl.kernel == 1 && over.expert_rows > 0) lean_pl.rows = over.expert_rows, lean_pl.minb = over.expert_minb;
  if (p.w2 != nullptr) {
    if (!pair_ok) return false;
    Params q = p;
    q.pair_out = n_out;
    if (lean && gemv_nvfp4_experts(q, 2 * n_out, nb, n_sub, lean_pl, stream))
      return g_pair_launches.fetch_add(1, std::memory_order_relaxed), true;
    if (p.route_logits != nullptr) return false;
    g_pair_launches.fetch_add(1, std::memory_order_relaxed);
    launch_slab_plan(q, 1, 2 * n_out, g, R, vb, xs, pl, stream);  // pair_ok: slab_variant
    return true;
  }
  if (lean && gemv_nvfp4_experts(p, n_out, nb, n_sub, lean_pl, stream)) return true;
  if (p.route_logits != nullptr) return false;
  if (pl.kernel == 2) {
    g.rb = pl.rows;
    g.pieces = pl.rows * n_sub;
    if (vb == 16 && !xs) return packed_variant(p, n_out, g, pl.decode, pl.minb, stream), true;
    if (vb == 16) xs ? launch_packed<16, true>(p, n_out, g, stream) : launch_packed<16, false>(p, n_out, g, stream);
    else xs ? launch_packed<4, true>(p, n_out, g, stream) : launch_packed<4, false>(p, n_out, g, stream);
    return true;
  }
  if (!grouped && nt == 1 && vb == 16 && pl.kernel == 1 && !over.lean_dense_off) {
    // Activations from global memory (L1 / L2 hits), not staged in shared memory after the PDL wait
    // (gemv_set_nvfp4_override's x_smem 2 still stages them): H200 session 28 call 3, tg128
    // alternating (FT_GEMV_NVFP4_DENSE_PLAN=R,X), wo at the plan's rows: Qwen3-30B-A3B (R 1) 529.35 /
    // 529.45 / 526.69 against 523.67 / 526.63 / 526.71 tok/s staged (+0.5%), Llama-8B (R 2) 501.74 /
    // 501.12 / 501.65 against 494.03 / 494.27 / 495.00 (+1.4%); other rows slower (R 2 / 4 on Qwen3
    // ~522 / ~498, R 1 / 4 on Llama ~493 / ~478, staged); the same 64 greedy tokens.
    GemvNvfp4Plan dpl = pl;  // FT_GEMV_NVFP4_DENSE_PLAN
    bool dxs = over.x_smem == 2 && xs;
    if (over.dense_rows > 0) dpl.rows = over.dense_rows;
    if (over.dense_xs >= 0) dxs = over.dense_xs == 1 && x_rows * g.xs_row <= kNvfp4XSmemMax;
    if (!dxs) dpl.minb = gemv_nvfp4_lean_dense_minb(dpl);
    if (over.dense_minb > 0) dpl.minb = over.dense_minb;
    if (gemv_nvfp4_lean_dense(p, nb, dpl, dxs, g.xs_row, stream)) return true;
  }
  launch_slab_plan(p, nt, n_out, g, R, vb, xs, pl, stream);
  return true;
}

bool gemv_nvfp4_tiled(const Params& p, int64_t n_tok, const Nvfp4Override& over, cudaStream_t stream, bool mma_only) {
  const GemvNvfp4Plan pl = gemv_nvfp4_plan(p.rows, p.k, n_tok, 1, 1, false);
  if (n_tok == 1) {
    TiledLaunch l = gemv_nvfp4_tiled_launch(p.rows, p.k, p.after_gemv != 0, sm_count());
    for (int i = 0; i < over.n_tiled_plan; ++i) {  // FT_GEMV_NVFP4_TILED_PLAN: the whole launch, 0s the plain one's
      const Nvfp4Override::TiledShape& t = over.tiled_plan[i];
      if (t.rows != p.rows || t.k != p.k) continue;
      l = gemv_nvfp4_tiled_launch(p.rows, p.k, false, sm_count());
      if (t.warps > 0) l.warps = t.warps;
      if (t.stages > 0) l.stages = t.stages;
      l.smem = t.smem;
    }
    if (over.mma_warps > 0) l.warps = over.mma_warps;
    if (over.mma_stages > 0) l.stages = over.mma_stages;
    if (gemv_nvfp4_mma(p, 1, false, l.warps, l.stages, stream, l.smem)) return true;
  }
  if (mma_only) return false;
  if (n_tok > 1 && !over.batch_off && gemv_nvfp4_mma_batch(p, n_tok, over.batch_stages, !over.batch_wave_off, stream)) return true;
  // The slab kernel at the plan's rows (at least 2 for several tokens; 16 / R groups a tile).
  Nv4 g{};
  g.nb = p.k / 64;
  g.n_slabs = static_cast<int>((g.nb + kSlabBlocks - 1) / kSlabBlocks);
  g.n_sub = 1;
  g.xs_row = static_cast<int>(p.k + p.k / 4);
  const bool xs = pl.x_smem && n_tok * g.xs_row <= kNvfp4XSmemMax;
  g.xs_rows = xs ? static_cast<int>(n_tok) : 0;
  const int R = n_tok > 1 && pl.rows < 2 ? 2 : pl.rows;
  launch_slab_plan(p, n_tok, 1, g, R, 16, xs, pl, stream);
  return false;
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_pair_launches() { return gemv_detail::g_pair_launches.load(std::memory_order_relaxed); }
namespace {

__global__ void decode_probe_kernel(const uint32_t* in, uint32_t* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  uint32_t* o = out + 8 * i;
  q8_detail::e2m1x8_pn(in[i], q8_detail::e2m1_table(), o[0], o[1], o[2], o[3]);  // as the kernels call it
  float sw[4];
  q8_detail::nvfp4_scales(in[i], sw);
  for (int j = 0; j < 4; ++j) o[4 + j] = __float_as_uint(sw[j]);
  // The mma kernel's pair decoder (cvt of one pair on sm_89+) must agree: a mismatch poisons
  // the output the test compares.
  for (int h = 0; h < 2; ++h) {
    float a, b;
    q8_detail::nvfp4_scales2(in[i] >> (16 * h), a, b);
    if (__float_as_uint(a) != o[4 + 2 * h]) o[4 + 2 * h] = 0xDEADBEEFu;
    if (__float_as_uint(b) != o[5 + 2 * h]) o[5 + 2 * h] = 0xDEADBEEFu;
    // Without the NaN codes' fix-up (scanned weights): the same where the pair holds no code.
    if (!q8_detail::nvfp4_scales_nan((in[i] >> (16 * h)) & 0xFFFFu)) {
      q8_detail::nvfp4_scales2<false>(in[i] >> (16 * h), a, b);
      if (__float_as_uint(a) != o[4 + 2 * h]) o[4 + 2 * h] = 0xDEADBEEFu;
      if (__float_as_uint(b) != o[5 + 2 * h]) o[5 + 2 * h] = 0xDEADBEEFu;
    }
  }
}

}  // namespace

void gemv_nvfp4_decode_probe(const uint32_t* in, uint32_t* out, int n, cudaStream_t stream) {
  if (n <= 0) return;
  decode_probe_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, out, n);
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
