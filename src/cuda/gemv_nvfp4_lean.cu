// Lean one-token NVFP4 GEMV kernels (gemv.h, integer path), the same sums as the general
// kernels of gemv_nvfp4.cu in the same order, so the same bits (tests/cuda/gemv_lean_test.cpp:
// memcmp against them with the lean kernels off):
//   - lean_slab_kernel: the slab kernel's one-token launches -- grouped without a combine (expert
//     gate or up, the gate|up pair of GemvArgs::w_pair) and dense (row-major, activations from
//     global or shared memory): a warp's work item is R rows (of one slot's expert), lane l takes
//     block l of each 32-block slab of the R rows (block_dot_words), the lanes' sums meet in the
//     slab kernel's 32-lane tree;
//   - experts_packed_kernel: the packed kernel's combine with one row per item (the expert down
//     projection + combine): lane l takes entries l, l + 32, .. of the item's S x NB (slot,
//     block) list, a slot's blocks are summed in block order, the slots in rank order.
// Why: H200 session 21, ncu of a Qwen3-30B-A3B decode step (bench/session21/h200_a.sh): the
// slab kernel's pair launch ran 5.45 M warp instructions for 25 M weights (887 a work item of
// 2 rows x 32 blocks, where the block math is ~300), the packed combine 3.53 M for 12.6 M (1,722
// an item of 8 x 12 blocks), the dense wo 2.32 M for 8.4 M: the general kernels' item walk
// (64-bit Step bookkeeping, runtime divisions, flags for layouts these launches never have) and
// the E2M1 table re-created from a uniform register before each PRMT (51 IMAD.U32 an item). At
// the H200's issue rate those counts alone take ~5.4, ~3.5 and ~2.3 us; the launches ran 14.6,
// 11.2 and 7.0 us (serialised) with 28-37% of issue slots busy. Here the walk is 32-bit with
// the shapes as template constants, and the table comes from memory (a value ptxas cannot
// re-create). Call 2: the expert launches 10.4 and 8.4 us, Qwen3-30B-A3B tg128 +8.1%. Call 7
// (bench/sass_mix.py): the gate|up launch still runs 4.85 M instructions with its routing (789 an
// item; ~20% fewer than the slab kernel's), part of the table still copied from a uniform register.
#include <atomic>
#include <climits>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/cp_async.cuh"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/l2_ahead.cuh"
#include "cuda/moe_route_warp.cuh"
#include "cuda/norm_fold.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

// kBlockBytes, kSlabBytes, kPackWarpBytes (the packed kernel's shared memory a warp, kept so that
// the same CTAs fit an SM): gemv_nvfp4_dot.cuh.

// Not const: a value the compiler must load (a constant is re-created before every PRMT).
__device__ uint32_t g_e2m1_tab[2] = {kMag0, kMag1};
__device__ __forceinline__ E2m1Table table_from_memory() { return {g_e2m1_tab[0], g_e2m1_tab[1]}; }

// ---- slab: expert gate / up (grouped, no combine) and dense -----------------------------------

// Activations copied to shared memory (XS, dense only; gemv_nvfp4.cu's stage_x layout): xs_row
// bytes at the start of the CTA's shared memory, the warps' rings after them. A warp's steps
// (item, slab) stream through a 2-stage cp.async ring whose first two steps are issued at once:
// a warp's one or two items (the expert launches, one wave) or an item's two slabs (k 4096) are
// all in flight before the first is computed (the slab kernel loads one step ahead, so a second
// item's ids and weights were two dependent round trips after the first's).
// ROUTE (grouped, one token; Params::route_logits): the CTA's first warp routes the router's
// logits (route_warp::route_row_warp, the router's own arithmetic) into shared memory before the
// first loads, CTA 0 writes the ids and weights out for the down projection; the shared memory
// starts with that routing (route_smem_bytes).
__host__ __device__ constexpr int route_smem_bytes(int n_expert) { return (8 * n_expert + 256 + 15) & ~15; }

// An item's slot scale where the kernel loads it with the item (SS below).
template <bool SS>
struct SlotScale {};
template <>
struct SlotScale<true> {
  float ss;
};

// XR (ROUTE, one slab: nb <= 32): lane l's activation block (its 64 codes and scales, 5 vectors:
// one token, so every slot's row 0) is loaded into registers right after the PDL wait, while warp
// 0 routes and the first weights stream in, rather than after each step's weights landed (one L2
// round trip off the launch's critical path). H200 session 27 call 1, Qwen3-30B-A3B tg128
// alternating: 500.22 / 501.74 against 491.58 / 492.49 tok/s (+1.8%), the same 64 greedy tokens.
// SS (with XR): the item's slot scale (its expert's bank entry) loaded when the item is located --
// before its weights' copies -- rather than after they landed: one more round trip off the critical
// path. H200 session 27 call 2, Qwen3-30B-A3B tg128 alternating (both with XR): 513.37 / 511.99 /
// 509.90 / 513.45 against 498.61 / 497.14 / 501.06 / 500.64 tok/s (+2.5%), the same 64 tokens.
// NQ (dense; Params::nq_count): the norm fold's producer tail (after the loop below); its own
// instances, so the plain ones keep their code (the tail in the shared instance slowed Llama-8B's
// decode: H200 session 33 calls 1-2, see gemv_mma.cu's FOLD).
// The tail by thread-block clusters instead (a 32-row block's CTAs meeting in distributed shared memory, no
// ticket, no L2 read-back; the same bytes) lost: H200 session 36 call 1, Llama-8B tg128 alternating with the
// FFN fold on, 495.67 / 498.46 against the ticket's 508.99 / 505.52 tok/s (-2.1%). Removed in session 37.
// A CTA of 16 warps holding a whole 32-row block (its rows meeting in shared memory: no ticket, no read-back)
// was no faster than the ticket: H100 session 38 call 1, Llama-8B tg128 alternating, 440.52 / 442.14 against
// 440.84 / 439.76 tok/s, both below the default's 445.74 / 445.17 (the FFN norm as a launch). Removed.
// PF (dense; Params::l2a): after its first copies the CTA streams its share of the L2-ahead ranges
// (l2_ahead.cuh) before the PDL wait -- wo's launch, resident under the attention kernel, fetching the
// head of the FFN's gate|up while the HBM idles. Own instances: the plain ones keep their code.
template <int R, int MINB, bool GROUPED, bool XS, bool ROUTE = false, bool XR = false, bool SS = false, bool NQ = false,
          bool PF = false>
__global__ void __launch_bounds__(kWarps * 32, MINB) lean_slab_kernel(const Params p, const int nb, const int xs_row) {
  static_assert(!(GROUPED && XS), "grouped launches read their activations from global memory");
  static_assert(!ROUTE || GROUPED, "a routing needs the grouped mode");
  static_assert(!XR || ROUTE, "activations in registers only with a routing (one token)");
  static_assert(!SS || XR, "the early slot scale only with XR");
  constexpr int kNv = kSlabBytes / 16;      // vectors a row of a full slab
  constexpr int kV = (R * kNv + 31) / 32;  // vectors a lane
  constexpr int kStage = R * kSlabBytes;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  uint8_t* xs = smem;
  const int ne = ROUTE ? p.route_n_expert : 0;
  int32_t* sids = reinterpret_cast<int32_t*>(smem + 8 * ne);  // ROUTE: the routed ids, then weights
  uint8_t* ring = smem + (XS ? xs_row : 0) + (ROUTE ? route_smem_bytes(ne) : 0) + warp * (2 * kStage);
  const int gw = static_cast<int>(blockIdx.x) * kWarps + warp, n_w = static_cast<int>(gridDim.x) * kWarps;
  const int n_rg = static_cast<int>(p.n_rg), n_items = n_rg * static_cast<int>(p.n_out);
  const int n_slabs = (nb + kSlabBlocks - 1) / kSlabBlocks;
  const int my_items = gw < n_items ? (n_items - gw + n_w - 1) / n_w : 0;
  const int n_steps = my_items * n_slabs;
  const int rb32 = static_cast<int>(p.row_bytes), rows = static_cast<int>(p.rows);
  const E2m1Table tab = table_from_memory();
  // Vector i = lane + 32 v of a full slab: row q = i / kNv, piece o; the same every slab.
  int off[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    const int i = lane + 32 * v, q = i / kNv, o = i - q * kNv;
    off[v] = i >= R * kNv ? INT_MAX : q * rb32 + 16 * o;
  }

  struct Item : SlotScale<SS> {  // SS: + ss, the slot scale
    const uint8_t* base;  // row row0 (of the slot's expert)
    int out, row0, nr, half;
  };
  auto locate = [&](int item) {
    Item m;
    const uint32_t o = static_cast<uint32_t>(item) / static_cast<uint32_t>(n_rg);
    m.half = p.pair_out > 0 && o >= static_cast<uint32_t>(p.pair_out);
    m.out = static_cast<int>(o) - (m.half ? static_cast<int>(p.pair_out) : 0);
    m.row0 = (item - static_cast<int>(o) * n_rg) * R;
    m.nr = min(R, rows - m.row0);
    m.base = (m.half ? p.w2 : p.w) + static_cast<int64_t>(m.row0) * p.row_bytes;
    if constexpr (GROUPED) m.base += static_cast<int64_t>(ROUTE ? sids[m.out] : p.ids[m.out]) * p.expert_bytes;
    if constexpr (SS)
      m.ss = p.bank != nullptr ? p.scale * p.bank[static_cast<int64_t>(sids[m.out]) * 4 + p.bank_col + m.half] : p.scale;
    return m;
  };
  // Slab sl of item m into stage st: full slabs as kNv vectors a row, rows contiguous; the last,
  // partial one bl * 36 bytes a row (a multiple of 16: nb % 4 == 0) at kSlabBytes a row. Rows
  // past the item's last are not copied (their sums are never stored).
  auto copy = [&](uint8_t* st, const Item& m, int sl) {
    const uint8_t* b = m.base + sl * kSlabBytes;
    const int bl = nb - sl * kSlabBlocks;
    if (bl >= kSlabBlocks) {
      const int lim = m.nr * rb32;
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (off[v] < lim) cp_async16(st + 16 * (lane + 32 * v), b + off[v]);
    } else {
      const int nv = bl * kBlockBytes / 16;
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        const int i = lane + 32 * v, q = i / nv, o = i - q * nv;
        if (q < m.nr) cp_async16(st + q * kSlabBytes + 16 * o, b + q * rb32 + 16 * o);
      }
    }
  };
  // The issue cursor: step qi is slab isl of the warp's item number iit (item mi). Stage k of
  // the ring holds steps k, k + 2, ..; it_k the item of the step in it (two named copies, not an
  // array: a dynamically indexed one lives in local memory).
  Item mi{}, it0{}, it1{};
  int qi = 0, isl = 0, iit = 0;
  auto issue = [&](Item& slot, uint8_t* st) {
    if (qi < n_steps) {
      if (isl == 0) mi = locate(gw + iit * n_w);
      slot = mi;
      copy(st, mi, isl);
      if (++isl == n_slabs) isl = 0, ++iit;
    }
    cp_async_commit();  // empty groups too: the wait counts stay uniform
    ++qi;
  };

  // Dense weights are never written by earlier kernels, so the first two steps load before the
  // PDL wait; grouped ones only with ids_early (the ids may come from the launch right before: the
  // router). Dense with y_early: lane r's row of the first item, read before the wait too.
  const bool early = !GROUPED || (p.ids_early && !ROUTE);
  const bool y_pre = !GROUPED && p.y_early;
  float y_old = 0.0f;
  if (early) {
    issue(it0, ring);
    issue(it1, ring + kStage);
    if (y_pre && n_steps > 0 && lane < it0.nr) y_old = p.y[it0.row0 + lane];
  }
  if constexpr (PF && !GROUPED) l2_ahead_share(p.l2a, blockIdx.x, gridDim.x);
  // NQ: the norm weights of the warp's first item's block (its tail's, norm_fold::weight_of), a weight
  // too; the per-warp form's later items load theirs in the tail.
  float nq_wv = 0.0f;
  if constexpr (!GROUPED && NQ) {
    if (my_items > 0) nq_wv = norm_fold::weight_of(p.nq_w, (gw * R) >> 5);
  }
  pdl_wait();
  pdl_trigger();
  uint4 xr[5];
  if constexpr (XR) {
    if (lane < nb) {
      xr[4] = __ldg(reinterpret_cast<const uint4*>(p.xq + p.k) + lane);
#pragma unroll
      for (int s = 0; s < 4; ++s) xr[s] = __ldg(reinterpret_cast<const uint4*>(p.xq + 64 * lane + 16 * s));
    }
  }
  if constexpr (ROUTE) {  // every thread of the CTA: a barrier
    float* sw = reinterpret_cast<float*>(sids + 32);
    if (warp == 0)
      route_warp::route_row_warp(p.route_logits, ne, p.route_n_used, reinterpret_cast<float*>(smem),
                                 reinterpret_cast<int32_t*>(smem + 4 * ne), sids, sw, p.route_fast);
    __syncthreads();
    if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < p.route_n_used)
      p.route_ids[threadIdx.x] = sids[threadIdx.x], p.route_w[threadIdx.x] = sw[threadIdx.x];
  }
  if constexpr (XS) stage_x(xs, p, 1, xs_row);  // every thread of the CTA, then a barrier
  if (n_steps == 0) return;
  if (!early) issue(it0, ring), issue(it1, ring + kStage);

  float acc[R][1];
  float s[R];
  const uint8_t* x0 = nullptr;
  int csl = 0;
  bool first = true;
  // Step q from stage st (item m), then step q + 2 issued into it.
  auto step = [&](uint8_t* st, Item& m) {
    cp_async_wait(1);  // this step landed (the next may still be in flight)
    __syncwarp();
    if (csl == 0) {
      // The item's epilogue scales (row_scale x slot scale), as the slab kernel forms them.
      float ss;
      if constexpr (SS)
        ss = m.ss;
      else
        ss = !ROUTE              ? slot_scale(p, m.out, m.half)
             : p.bank != nullptr ? p.scale * p.bank[static_cast<int64_t>(sids[m.out]) * 4 + p.bank_col + m.half]
                                 : p.scale;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = m.row0 + r;
        s[r] = p.row_scale != nullptr && row < rows ? p.row_scale[row] * ss : ss;
        acc[r][0] = 0.0f;
      }
      x0 = XS ? xs
              : p.xq + (GROUPED ? static_cast<int64_t>(static_cast<uint32_t>(m.out) / static_cast<uint32_t>(p.x_div)) *
                                      p.xq_row
                                : 0);
    }
    const int c = csl * kSlabBlocks + lane;
    if constexpr (XR) {
      if (c < nb) {
        const uint8_t* sb = st + kBlockBytes * lane;
        block_dot_wx<1, R, true>(
            acc, [&](int r, int i) { return lds32(sb + r * kSlabBytes + 4 * i); }, [&](int) { return xr[4]; },
            [&](int, int s) { return xr[s]; }, 1, tab);
      }
    } else if (c < nb) {
      block_dot<1, R, XS, true>(acc, st + kBlockBytes * lane, kSlabBytes, x0, XS ? xs_row : p.xq_row, p.k, c, 1, tab);
    }
    if (++csl == n_slabs) {
      csl = 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float v = acc[r][0];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
        acc[r][0] = v;
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (lane == r && r < m.nr) {
          float* y = p.y + (m.half ? p.y2_off : 0) + static_cast<int64_t>(m.out) * p.ldy + m.row0 + r;
          const float v = round_to(p.round, __fmul_rn(acc[r][0], s[r]));
          if (y_pre && first)
            store_acc(y, y_old, v);
          else
            store_out(y, v, p.accumulate);
        }
      first = false;
    }
    __syncwarp();  // every lane is done with the stage
    issue(m, st);  // the step after next into it
  };
  for (int q = 0; q < n_steps; q += 2) {
    step(ring, it0);
    if (q + 1 < n_steps) step(ring + kStage, it1);
  }
  // Dense with Params::nq_count (the norm fold's producer, norm_fold.h; rows % 32 == 0, R | 32):
  // after all its items are stored, the warp counts each item's rows into its 32-row block; the warp
  // completing a block reads its 32 rows back from L2 and writes their Q8 and sum of squares.
  // A CTA whose warps hold one item each (its 4R rows: a quarter, half or whole of a block) counts
  // once for them all after a barrier; others warp by warp. (The same speed on Llama-8B's wo: H200
  // session 33 call 2, tg128 alternating, per CTA 507.4 / 509.8 / 509.5, per warp 509.2 / 508.2 / 508.9.)
  if constexpr (!GROUPED && NQ) {
    {
      const int n_full = static_cast<int>(blockIdx.x + 1) * kWarps;
      if (n_items <= n_w && n_full <= n_items) {  // uniform in the CTA: no warp left early
        __syncthreads();  // the warps' rows (block_done's release carries them)
        if (warp != 0) return;
        const int row0 = static_cast<int>(blockIdx.x) * kWarps * R, blk = row0 >> 5;
        if (norm_fold::block_done(p.nq_count, blk, kWarps * R)) {  // warp 0's first item: nq_wv's block
          const float y = __ldcg(p.y + 32 * static_cast<int64_t>(blk) + lane);
          norm_fold::block_warp(y, nq_wv, blk, p.rows, p.nq_xq, p.nq_part);
        }
        return;
      }
      __syncwarp();
      for (int it = 0; it < my_items; ++it) {
        const int row0 = (gw + it * n_w) * R, nr = min(R, rows - row0), blk = row0 >> 5;
        if (norm_fold::block_done(p.nq_count, blk, nr)) {
          const float y = __ldcg(p.y + 32 * static_cast<int64_t>(blk) + lane);
          norm_fold::block_warp(y, it == 0 ? nq_wv : norm_fold::weight_of(p.nq_w, blk), blk, p.rows, p.nq_xq,
                                p.nq_part);
        }
      }
    }
  }
}

// ---- down + combine (packed kernel's combine, one row an item) ------------------------------

template <int NB, int S, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB) experts_packed_kernel(const Params p) {
  constexpr int kE = NB * S;                   // (slot, block) entries an item
  constexpr int kM = (kE + 31) / 32;           // entries a lane
  constexpr int kNvp = NB * kBlockBytes / 16;  // vectors a slot's row
  constexpr int kNvt = S * kNvp;
  constexpr int kV = (kNvt + 31) / 32;
  static_assert(kE <= 32 * kNvfp4PackBlocksPerLane && S <= 32 && (NB * kBlockBytes) % 16 == 0, "packed shape");
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  uint8_t* st = smem + warp * kPackWarpBytes;
  float* red = reinterpret_cast<float*>(st + kPackStage);
  const int gw = static_cast<int>(blockIdx.x) * kWarps + warp, n_w = static_cast<int>(gridDim.x) * kWarps;
  const int rows = static_cast<int>(p.rows), n_items = rows * static_cast<int>(p.n_out);
  const E2m1Table tab = table_from_memory();
  // This lane's vectors (slot vq, piece vo) and entries (slot eq, block eb): constants.
  int vq[kV], vo[kV], eq[kM], eb[kM];
#pragma unroll
  for (int u = 0; u < kV; ++u) vq[u] = (lane + 32 * u) / kNvp, vo[u] = lane + 32 * u - vq[u] * kNvp;
#pragma unroll
  for (int m = 0; m < kM; ++m) eq[m] = (lane + 32 * m) / NB, eb[m] = lane + 32 * m - eq[m] * NB;

  struct Item {
    int out, row;
    uintptr_t base;  // lane j < S: slot j's row
    float s, w, y;   // lane j < S: its scale and combine weight; lane 0: the old y (y_early)
  };
  auto locate = [&](int item) {
    Item m;
    m.out = static_cast<int>(static_cast<uint32_t>(item) / static_cast<uint32_t>(rows));
    m.row = item - m.out * rows;
    m.base = 0;
    m.s = m.w = m.y = 0.0f;
    if (lane < S) {
      const int64_t slot = static_cast<int64_t>(m.out) * S + lane;
      m.base = reinterpret_cast<uintptr_t>(p.w + static_cast<int64_t>(p.ids[slot]) * p.expert_bytes +
                                           static_cast<int64_t>(m.row) * p.row_bytes);
      const float ss = slot_scale(p, slot);
      m.s = p.row_scale != nullptr ? p.row_scale[m.row] * ss : ss;
      m.w = p.slot_w[slot];
    }
    return m;
  };
  auto issue = [&](uint4 (&buf)[kV], const Item& m) {
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const uintptr_t b = __shfl_sync(0xFFFFFFFFu, static_cast<unsigned long long>(m.base), vq[u] & 31);
      if (lane + 32 * u < kNvt) buf[u] = ld_w<16>(reinterpret_cast<const uint8_t*>(b) + 16 * vo[u]);
    }
  };

  int item = gw;
  uint4 buf[kV] = {};
  Item m{};
  // With ids_early the first item's weights, scales and combine weights load before the wait,
  // with y_early its old y too.
  const bool y_pre = p.y_early != 0;
  auto start = [&]() {
    m = locate(item);
    issue(buf, m);
    if (y_pre && lane == 0) m.y = p.y[static_cast<int64_t>(m.out) * p.ldy + m.row];
  };
  if (p.ids_early && item < n_items) start();
  pdl_wait();
  pdl_trigger();
  if (item >= n_items) return;
  if (!p.ids_early) start();
  bool first = true;
  for (;;) {
#pragma unroll
    for (int u = 0; u < kV; ++u)
      if (lane + 32 * u < kNvt) *reinterpret_cast<uint4*>(st + 16 * (lane + 32 * u)) = buf[u];
    __syncwarp();
    Item nx = m;
    const bool more = item + n_w < n_items;
    if (more) nx = locate(item + n_w), issue(buf, nx);
#pragma unroll
    for (int e = 0; e < kM; ++e) {
      const int i = lane + 32 * e;
      if (i < kE) {
        const int64_t xrow =
            static_cast<uint32_t>(m.out * S + eq[e]) / static_cast<uint32_t>(p.x_div);
        float a[1][1] = {{0.0f}};
        block_dot<1, 1, false, true>(a, st + kBlockBytes * i, 0, p.xq + xrow * p.xq_row, p.xq_row, p.k, eb[e], 1, tab);
        red[i] = a[0][0];
      }
    }
    __syncwarp();
    // Lane j < S: slot j's blocks in block order, its scale and rounding; lane 0 the ranks in
    // order, one rounding per operation (no FMA): the CPU combine's arithmetic.
    float v = 0.0f, wk = 0.0f;
    if (lane < S) {
      const float* pr = red + lane * NB;
      float dot = 0.0f;
#pragma unroll
      for (int b = 0; b < NB; ++b) dot += pr[b];
      v = round_to(p.round, __fmul_rn(dot, m.s));
      wk = m.w;
    }
    float cb = 0.0f;
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const float pj = __fmul_rn(__shfl_sync(0xFFFFFFFFu, v, i), __shfl_sync(0xFFFFFFFFu, wk, i));
      cb = i == 0 ? pj : __fadd_rn(cb, pj);
    }
    if (lane == 0) {
      float* y = p.y + static_cast<int64_t>(m.out) * p.ldy + m.row;
      if (first && y_pre)
        store_acc(y, m.y, round_to(p.round, cb));
      else
        store_out(y, round_to(p.round, cb), p.accumulate);
    }
    __syncwarp();  // red and the stage are rewritten for the next item
    if (!more) break;
    item += n_w;
    m = nx;
    first = false;
  }
}

// ---- launch ---------------------------------------------------------------------------------

std::atomic<int64_t> g_expert_launches{0}, g_dense_launches{0}, g_route_launches{0}, g_ahead_launches{0};

template <int R, int MINB, bool GROUPED = true, bool XS = false, bool ROUTE = false, bool XR = false, bool SS = false,
          bool NQ = false, bool PF = false>
bool slab_lean(Params p, int64_t n_out, int nb, int xs_row, cudaStream_t s) {
  p.n_rg = (p.rows + R - 1) / R;
  p.n_out = n_out;
  auto kernel = lean_slab_kernel<R, MINB, GROUPED, XS, ROUTE, XR, SS, NQ, PF>;
  static std::atomic<uint64_t> cache{0};
  const size_t smem = static_cast<size_t>(kWarps) * 2 * R * kSlabBytes + (XS ? xs_row : 0) +
                      (ROUTE ? route_smem_bytes(p.route_n_expert) : 0);
  const int ctas = cached_ctas_per_sm(kernel, smem, kWarps * 32, cache);
  if (ctas < 1) return false;
  const dim3 grid = warp_grid(p.n_rg * n_out, ctas);
  launch_pdl(kernel, grid, dim3(kWarps * 32), smem, s, p, nb, xs_row);
  (GROUPED ? g_expert_launches : g_dense_launches).fetch_add(1, std::memory_order_relaxed);
  if (NQ) note_nq_tail();
  return true;
}

template <int NB, int S, int MINB>
bool packed_expert(Params p, int64_t n_out, cudaStream_t s) {
  p.n_rg = p.rows;
  p.n_out = n_out;
  auto kernel = experts_packed_kernel<NB, S, MINB>;
  static std::atomic<uint64_t> cache{0};
  const size_t smem = static_cast<size_t>(kWarps) * kPackWarpBytes;
  const int ctas = cached_ctas_per_sm(kernel, smem, kWarps * 32, cache);
  if (ctas < 1) return false;
  launch_pdl(kernel, warp_grid(p.rows * n_out, ctas), dim3(kWarps * 32), smem, s, p);
  g_expert_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The grouped lean slab instance of the plan's rows and blocks an SM; false for any other.
template <bool ROUTE, bool XR = false, bool SS = false>
bool slab_grouped(const Params& p, int64_t n_out, int nb, const GemvNvfp4Plan& pl, cudaStream_t stream) {
  switch (pl.rows * 10 + pl.minb) {
    case 14: return slab_lean<1, 4, true, false, ROUTE, XR, SS>(p, n_out, nb, 0, stream);
    case 16: return slab_lean<1, 6, true, false, ROUTE, XR, SS>(p, n_out, nb, 0, stream);
    case 24: return slab_lean<2, 4, true, false, ROUTE, XR, SS>(p, n_out, nb, 0, stream);
    case 26: return slab_lean<2, 6, true, false, ROUTE, XR, SS>(p, n_out, nb, 0, stream);
    case 44: return slab_lean<4, 4, true, false, ROUTE, XR, SS>(p, n_out, nb, 0, stream);
    default: return false;
  }
}

}  // namespace

bool gemv_nvfp4_experts(const Params& p, int64_t n_out, int64_t nb, int n_sub, const GemvNvfp4Plan& pl,
                        cudaStream_t stream) {
  // 32-bit item walk; 16-byte vectors (gemv_nvfp4 checked the alignment); the sign-split decoder.
  if (p.ids == nullptr || pl.decode != 2 || nb % 4 != 0 || p.rows * n_out * n_sub > (int64_t{1} << 30) ||
      p.row_bytes * 4 > (int64_t{1} << 30))
    return false;
  if (p.route_logits != nullptr) {  // one token's routing in the launch (gemv_nvfp4 checked the rest)
    if (pl.kernel != 1 || p.slot_w != nullptr || p.route_n_used * (p.w2 != nullptr ? 2 : 1) != n_out ||
        !route_warp::warp_route_fits(p.route_n_expert, p.route_n_used))
      return false;
    // One token: every slot reads activation row 0 (x_div = n_used); in registers where one slab
    // covers the row (XR).
    const bool xr = nb <= kSlabBlocks && p.x_div >= p.route_n_used;
    if (!(xr ? slab_grouped<true, true, true>(p, n_out, static_cast<int>(nb), pl, stream)
             : slab_grouped<true>(p, n_out, static_cast<int>(nb), pl, stream)))
      return false;
    g_route_launches.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (pl.kernel == 1 && p.slot_w == nullptr) return slab_grouped<false>(p, n_out, static_cast<int>(nb), pl, stream);
  if (pl.kernel == 2 && p.slot_w != nullptr && pl.rows == 1 && n_sub == 8 && pl.minb == 4) {
    switch (nb) {
      case 8: return packed_expert<8, 8, 4>(p, n_out, stream);
      case 12: return packed_expert<12, 8, 4>(p, n_out, stream);
      case 16: return packed_expert<16, 8, 4>(p, n_out, stream);
      default: return false;
    }
  }
  return false;
}

namespace {
// The dense instance of the plan's rows, bound and activations (NQ: with the norm fold's tail).
template <bool NQ>
bool dense_lean(const Params& p, int n, const GemvNvfp4Plan& pl, bool xs, int xs_row, cudaStream_t stream) {
  switch (pl.rows * 100 + pl.minb * 10 + (xs ? 1 : 0)) {
    case 140: return slab_lean<1, 4, false, false, false, false, false, NQ>(p, 1, n, 0, stream);
    case 141: return slab_lean<1, 4, false, true, false, false, false, NQ>(p, 1, n, xs_row, stream);
    case 240: return slab_lean<2, 4, false, false, false, false, false, NQ>(p, 1, n, 0, stream);
    case 241: return slab_lean<2, 4, false, true, false, false, false, NQ>(p, 1, n, xs_row, stream);
    case 440: return slab_lean<4, 4, false, false, false, false, false, NQ>(p, 1, n, 0, stream);
    // The global-activation form's plan (gemv_nvfp4.cu: 8 blocks an SM since H200 session 30).
    case 180: return slab_lean<1, 8, false, false, false, false, false, NQ>(p, 1, n, 0, stream);
    case 280: return slab_lean<2, 8, false, false, false, false, false, NQ>(p, 1, n, 0, stream);
    case 441: return slab_lean<4, 4, false, true, false, false, false, NQ>(p, 1, n, xs_row, stream);
    default: return false;
  }
}
}  // namespace

bool gemv_nvfp4_lean_dense(const Params& p, int64_t nb, const GemvNvfp4Plan& pl, bool xs, int xs_row,
                           cudaStream_t stream) {
  if (p.ids != nullptr || p.tiled || pl.decode != 2 || nb % 4 != 0 || p.rows > (int64_t{1} << 30) ||
      p.row_bytes * 4 > (int64_t{1} << 30))
    return false;
  const int n = static_cast<int>(nb);
  if (!p.l2a.empty() && p.nq_count == nullptr && !xs) {  // the L2-ahead instances (PF)
    bool done = false;
    switch (pl.rows * 10 + pl.minb) {
      case 18: done = slab_lean<1, 8, false, false, false, false, false, false, true>(p, 1, n, 0, stream); break;
      case 28: done = slab_lean<2, 8, false, false, false, false, false, false, true>(p, 1, n, 0, stream); break;
      default: break;  // the others ignore the hint
    }
    if (done) {
      g_ahead_launches.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  return p.nq_count != nullptr ? dense_lean<true>(p, n, pl, xs, xs_row, stream)
                                : dense_lean<false>(p, n, pl, xs, xs_row, stream);
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_route_launches() { return gemv_detail::g_route_launches.load(std::memory_order_relaxed); }
int64_t gemv_nvfp4_lean_dense_launches() { return gemv_detail::g_dense_launches.load(std::memory_order_relaxed); }
int64_t gemv_nvfp4_l2_ahead_launches() { return gemv_detail::g_ahead_launches.load(std::memory_order_relaxed); }
int64_t gemv_nvfp4_experts_launches() { return gemv_detail::g_expert_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
