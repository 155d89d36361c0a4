// One-token MoE experts in one persistent launch (moe_decode_fused.h): phase 1 computes gate and
// up rows and their SwiGLU + Q8 blocks, phase 2 the down rows and the combine, after a counter
// says every phase-1 unit is done.
//
// Grid: one CTA of 8 warps per SM (the shared memory, Layout, takes up to ~215 KB), all resident: the
// phase-2 wait spins, so every CTA must be running (a CTA that has not started cannot trigger
// the next launch, and the launches before this one end on their own, so all CTAs do start).
//
// Phase 1 unit u = (slot j, 32-row block b of n_ff): warp w stages gate rows and up rows
// 32b + 4w .. 32b + 4w + 3 of expert ids[j] (4 x 1152 bytes each: one 32-block slab a row) and
// computes them as the slab kernel does (lane l: block l of the 4 rows, block_dot; the 32-lane
// xor tree; scale; rounding). The CTA's 32 gate and 32 up values meet in shared memory; warp 0
// forms SwiGLU (glu.cu's swiglu1) and quantises the block (q8_quantize_warp: quantize_act_q8's
// bytes) into xq_mid row j, then counts the unit done (fence, then atomicAdd on sync[0]).
// CTA c takes units c, c + grid, ...; where a CTA has two and they fit (Qwen3-30B-A3B: 192 units,
// 132 SMs) both are copied in at the start, beside the down rows, so every weight byte of the
// launch is requested right after the PDL wait.
// Phase 2 item = down row r (all n_used ranks, the packed kernel's item at one row): warp gw
// takes rows gw and gw + 8 grid. Both items' weights (n_used pieces of nb blocks) are copied
// into shared memory with the first phase-1 unit, right after the PDL wait. When sync[0] reaches
// the unit count the CTA copies the mid activations (past L1: written in this launch) into
// shared memory in the packed kernel's swizzled layout, and each warp computes its rows as the
// packed combine does (block partials in block order by the piece's lane, scale, rounding, ranks
// summed in order by lane 0, added into y).
// The last CTA to finish puts both counters back to zero for the next call.
#include "cuda/moe_decode_fused.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/ops_math.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

using gemv_detail::block_dot;
using gemv_detail::xs_chunk;

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRowsA = 4;                            // gate (and up) rows a warp: 8 x 4 = one Q8 block of 32
constexpr int kBlock = 36;                           // NVFP4 block bytes
constexpr int kSlab = 32 * kBlock;                   // a gate / up row's stage (<= 32 blocks)
constexpr int kStageA = 2 * kRowsA * kSlab;          // a warp's gate + up rows: 9,216 bytes
constexpr int kEntries = 128;                        // phase-2 (piece, block) entries an item (lane l: l + 32 m)
constexpr int kItemsB = 2;                           // down rows a warp
constexpr int kMaxUsed = 8;
constexpr int kMaxFf = 1024;                         // n_used * n_ff / 64 <= kEntries at 8 ranks
constexpr int kMaxASlots = 2;                        // phase-1 units a CTA can hold at once

// Shared memory, laid out at launch: a_slots phase-1 stages a warp (a CTA's units all requested
// at once where two fit: Qwen3-30B-A3B's 192 units on 132 SMs, 214 KB), the warps' two down
// items (n_used pieces of nb blocks each), the partial sums, the gate / up values, the staged mid
// activations.
struct Layout {
  int a_slots = 1;
  int stage_b = 0;  // bytes an item: n_used * nb_b * 36
  int b = 0, red = 0, vals = 0, xs = 0;
  size_t total = 0;
};
Layout layout(int a_slots, int64_t n_used, int64_t n_ff, int64_t mid_row) {
  Layout l;
  l.a_slots = a_slots;
  l.stage_b = static_cast<int>(n_used * (n_ff / 64) * kBlock);
  l.b = kWarps * kStageA * a_slots;
  l.red = l.b + kWarps * kItemsB * l.stage_b;
  l.vals = l.red + kWarps * kEntries * 4;
  l.xs = l.vals + 2 * 32 * 4;
  l.total = static_cast<size_t>(l.xs) + static_cast<size_t>(n_used * mid_row);
  return l;
}

struct Fused {
  const uint8_t *wg, *wu, *wd;
  int64_t gu_row, gu_exp, d_row, d_exp;
  int k_in, n_ff, n_out, n_used;
  const int32_t* ids;
  const float* slot_w;
  const float* bank;
  float scale;
  const uint8_t* xq;
  uint8_t* xq_mid;
  int mid_row;
  float* y;
  Round round;
  unsigned* sync;
  Layout l;
};

__device__ __forceinline__ float bank_scale(const Fused& f, int64_t e, int col) {
  return f.bank != nullptr ? f.scale * f.bank[e * 4 + col] : f.scale;
}

__global__ void __launch_bounds__(kThreads, 1) moe_fused_kernel(const Fused f) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int G = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  const int nb_a = f.k_in / 64, nb_b = f.n_ff / 64, S = f.n_used;
  const int blocks_ff = f.n_ff / 32, n_units = S * blocks_ff;
  const q8_detail::E2m1Table tab = q8_detail::e2m1_table();
  const Layout& L = f.l;
  float* red = reinterpret_cast<float*>(smem + L.red) + warp * kEntries;
  float* vals = reinterpret_cast<float*>(smem + L.vals);  // [0, 32): gate, [32, 64): up
  uint8_t* xs = smem + L.xs;

  // The router's ids and Q8 row come from the launch before.
  pdl_wait();
  pdl_trigger();

  // Phase-1 copies of unit u into A slot a: this warp's 4 gate rows, then its 4 up rows, kSlab apart.
  const int nva = nb_a * kBlock / 16;  // 16-byte vectors a gate / up row
  auto issue_a = [&](int u, int a) {
    const int j = u / blocks_ff, b = u - j * blocks_ff;
    const int64_t e = f.ids[j];
    const int64_t r0 = 32 * static_cast<int64_t>(b) + kRowsA * warp;
    uint8_t* st = smem + (a * kWarps + warp) * kStageA;
    for (int i = lane; i < 2 * kRowsA * nva; i += 32) {
      const int q = i / nva, o = i - q * nva;  // q: tensor * 4 + row
      const uint8_t* w = q < kRowsA ? f.wg : f.wu;
      const int r = q & (kRowsA - 1);
      cp_async16(st + q * kSlab + 16 * o, w + e * f.gu_exp + (r0 + r) * f.gu_row + 16 * o);
    }
  };
  // Phase-2 copies of item k (row gw + k * n_w): piece q (rank q) at q * nb_b * 36 of its stage.
  const int gw = c * kWarps + warp, n_w = G * kWarps;
  const int nvb = nb_b * kBlock / 16;  // 16-byte vectors a piece
  auto issue_b = [&](int k) {
    const int64_t row = gw + static_cast<int64_t>(k) * n_w;
    if (row >= f.n_out) return;
    uint8_t* st = smem + L.b + (warp * kItemsB + k) * L.stage_b;
    for (int i = lane; i < S * nvb; i += 32) {
      const int q = i / nvb, o = i - q * nvb;
      cp_async16(st + q * nb_b * kBlock + 16 * o,
                 f.wd + static_cast<int64_t>(f.ids[q]) * f.d_exp + row * f.d_row + 16 * o);
    }
  };

  // Copy groups, oldest first: this CTA's first a_slots units (one group each, empty where it
  // has fewer), both down items, then one group per later unit, issued into the slot its unit
  // i - a_slots has just left. Unit i's group has (committed - 1 - its index) groups after it.
  const int A = L.a_slots;
  const int my_units = c < n_units ? (n_units - c + G - 1) / G : 0;
  for (int i = 0; i < A; ++i) {
    if (i < my_units) issue_a(c + i * G, i);
    cp_async_commit();
  }
  for (int k = 0; k < kItemsB; ++k) issue_b(k);
  cp_async_commit();
  const int later = my_units > A ? my_units - A : 0;

  for (int i = 0; i < my_units; ++i) {
    const int committed = A + 1 + (i < later ? i : later);
    const int idx = i < A ? i : i + 1;
    cp_async_wait(committed - 1 - idx);
    __syncwarp();
    const int u = c + i * G;
    const uint8_t* st_a = smem + ((i % A) * kWarps + warp) * kStageA;
    const int j = u / blocks_ff, b = u - j * blocks_ff;
    const int64_t e = f.ids[j];
    float ag[kRowsA][1], au[kRowsA][1];
#pragma unroll
    for (int r = 0; r < kRowsA; ++r) ag[r][0] = au[r][0] = 0.0f;
    if (lane < nb_a) {
      block_dot<1, kRowsA, false>(ag, st_a + kBlock * lane, kSlab, f.xq, 0, f.k_in, lane, 1, tab);
      block_dot<1, kRowsA, false>(au, st_a + kRowsA * kSlab + kBlock * lane, kSlab, f.xq, 0, f.k_in, lane, 1, tab);
    }
#pragma unroll
    for (int r = 0; r < kRowsA; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        ag[r][0] += __shfl_xor_sync(0xFFFFFFFFu, ag[r][0], o);
        au[r][0] += __shfl_xor_sync(0xFFFFFFFFu, au[r][0], o);
      }
    __syncwarp();  // every lane has read this stage: the unit A slots on may be copied into it
    if (i + A < my_units) issue_a(c + (i + A) * G, i % A), cp_async_commit();
    if (lane < kRowsA) {
      float g = ag[0][0], v = au[0][0];
#pragma unroll
      for (int r = 1; r < kRowsA; ++r)
        if (lane == r) g = ag[r][0], v = au[r][0];
      vals[kRowsA * warp + lane] = round_to(f.round, __fmul_rn(g, bank_scale(f, e, 0)));
      vals[32 + kRowsA * warp + lane] = round_to(f.round, __fmul_rn(v, bank_scale(f, e, 1)));
    }
    __syncthreads();
    if (warp == 0) {
      const float h = round_to(f.round, ops::mul_rn(ops::silu(vals[lane]), vals[32 + lane]));
      q8_quantize_warp(h, b, f.n_ff, f.xq_mid + static_cast<int64_t>(j) * f.mid_row);
      __threadfence();
      __syncwarp();
      if (lane == 0) atomicAdd(f.sync, 1u);
    }
    __syncthreads();  // vals is rewritten by the next unit
  }

  // Phase 2: every unit done, then the mid activations into shared memory.
  if (threadIdx.x == 0) {
    // A unit that never comes (a bug, or a counter not left at zero) traps after ~1 s instead
    // of hanging the stream: a launch error the caller sees.
    const long long t0 = clock64();
    unsigned v = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f.sync) : "memory");
      if (v >= static_cast<unsigned>(n_units)) break;
      if (clock64() - t0 > (1ll << 31)) __trap();
    }
    __threadfence();
  }
  __syncthreads();
  {
    const int per_row = f.mid_row / 16, k16 = f.n_ff / 16;
    for (int i = static_cast<int>(threadIdx.x); i < S * per_row; i += kThreads) {
      const int t = i / per_row, jj = i - t * per_row;
      const uint4 v = __ldcg(reinterpret_cast<const uint4*>(f.xq_mid + static_cast<int64_t>(t) * f.mid_row) + jj);
      const int d = jj < k16 ? xs_chunk(jj >> 2, jj & 3) : jj;
      *reinterpret_cast<uint4*>(xs + t * f.mid_row + 16 * d) = v;
    }
  }
  cp_async_wait(0);
  __syncthreads();

  const int nbt = S * nb_b;
  for (int k = 0; k < kItemsB; ++k) {
    const int64_t row = gw + static_cast<int64_t>(k) * n_w;
    if (row >= f.n_out) break;
    const uint8_t* st = smem + L.b + (warp * kItemsB + k) * L.stage_b;
#pragma unroll
    for (int m = 0; m < kEntries / 32; ++m) {
      const int i = lane + 32 * m;
      if (i < nbt) {
        const int q = i / nb_b, bb = i - q * nb_b;
        float a[1][1] = {{0.0f}};
        block_dot<1, 1, true>(a, st + kBlock * i, 0, xs + q * f.mid_row, f.mid_row, f.n_ff, bb, 1, tab);
        red[i] = a[0][0];
      }
    }
    __syncwarp();
    float v = 0.0f, wk = 0.0f;
    if (lane < S) {
      float dot = 0.0f;
      for (int bb = 0; bb < nb_b; ++bb) dot += red[lane * nb_b + bb];
      v = round_to(f.round, __fmul_rn(dot, bank_scale(f, f.ids[lane], 2)));
      wk = f.slot_w[lane];
    }
    float cb = 0.0f;
    for (int i = 0; i < S; ++i) {
      const float pj = __fmul_rn(__shfl_sync(0xFFFFFFFFu, v, i), __shfl_sync(0xFFFFFFFFu, wk, i));
      cb = i == 0 ? pj : __fadd_rn(cb, pj);
    }
    if (lane == 0) f.y[row] = __fadd_rn(f.y[row], round_to(f.round, cb));
    __syncwarp();  // red is rewritten by the next item
  }

  // The last CTA out leaves the counters at zero.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(f.sync + 1, 1u) == static_cast<unsigned>(G) - 1u) {
      f.sync[0] = 0;
      f.sync[1] = 0;
      __threadfence();
    }
  }
}

std::atomic<int64_t> g_launches{0};

int grid_size() { return gemv_detail::sm_count(); }

// The layout of a call: two phase-1 stages a warp where some CTA has two units and they fit.
Layout plan(const MoeFusedDecodeArgs& a) {
  const int64_t mid_row = act_q8_row_bytes(a.n_ff);
  const int64_t n_units = a.n_used * a.n_ff / 32;
  const size_t limit = static_cast<size_t>(gemv_detail::max_smem_optin());
  // FT_MOE_FUSED_A_SLOTS=1: one phase-1 stage a warp (the later unit copied after the first is
  // done; 135 KB instead of 214 KB at Qwen3-30B-A3B's shape) -- a measurement switch.
  static const bool one_slot = [] {
    const char* e = std::getenv("FT_MOE_FUSED_A_SLOTS");
    return e != nullptr && std::string(e) == "1";
  }();
  if (n_units > grid_size() && !one_slot) {
    const Layout two = layout(kMaxASlots, a.n_used, a.n_ff, mid_row);
    if (two.total <= limit) return two;
  }
  return layout(1, a.n_used, a.n_ff, mid_row);
}

}  // namespace

bool moe_fused_decode_supported(const MoeFusedDecodeArgs& a) {
  if (!bulk_copy_supported()) return false;  // sm_90+: the shared memory and the tested target
  const int64_t nb_a = a.n_embd / 64, nb_b = a.n_ff / 64;
  auto al16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // Gate / up rows of exactly one 32-block slab: where the three launches' pair runs on the slab
  // kernel (fewer blocks go to the packed kernel, another summation order); down on the packed
  // kernel, whose per-row sums this kernel repeats.
  if (nb_a != 32 || a.n_ff % 256 != 0 || a.n_ff > kMaxFf || a.n_used < 1 || a.n_used > kMaxUsed ||
      a.n_used * nb_b > kEntries || gemv_nvfp4_plan(a.n_embd, a.n_ff, 1, 1, a.n_used, true).kernel != 2)
    return false;
  if (a.gu_row_bytes != nb_a * kBlock || a.down_row_bytes != nb_b * kBlock || a.gu_expert_bytes % 16 != 0 ||
      a.down_expert_bytes % 16 != 0 || !al16(a.w_gate) || !al16(a.w_up) || !al16(a.w_down) || !al16(a.xq) ||
      !al16(a.xq_mid))
    return false;
  if (a.ids == nullptr || a.slot_w == nullptr || a.xq == nullptr || a.xq_mid == nullptr || a.y == nullptr ||
      a.sync == nullptr)
    return false;
  if (plan(a).total > static_cast<size_t>(gemv_detail::max_smem_optin())) return false;
  // Two down rows a warp cover the rows.
  return a.n_embd <= int64_t{kItemsB} * kWarps * grid_size();
}

void moe_fused_decode(const MoeFusedDecodeArgs& a, cudaStream_t s) {
  if (!moe_fused_decode_supported(a))
    fail_message("moe_fused_decode: needs sm_90+, NVFP4 experts with n_embd == 2048, n_ff % 256 == 0 "
                 "and <= 1024, n_used <= 8, unpadded 16-byte aligned rows and every buffer set (n_embd = " +
                 std::to_string(a.n_embd) + ", n_ff = " + std::to_string(a.n_ff) + ", n_used = " +
                 std::to_string(a.n_used) + ")");
  Fused f{};
  f.wg = a.w_gate;
  f.wu = a.w_up;
  f.wd = a.w_down;
  f.gu_row = a.gu_row_bytes;
  f.gu_exp = a.gu_expert_bytes;
  f.d_row = a.down_row_bytes;
  f.d_exp = a.down_expert_bytes;
  f.k_in = static_cast<int>(a.n_embd);
  f.n_ff = static_cast<int>(a.n_ff);
  f.n_out = static_cast<int>(a.n_embd);
  f.n_used = a.n_used;
  f.ids = a.ids;
  f.slot_w = a.slot_w;
  f.bank = a.bank;
  f.scale = a.scale;
  f.xq = static_cast<const uint8_t*>(a.xq);
  f.xq_mid = static_cast<uint8_t*>(a.xq_mid);
  f.mid_row = static_cast<int>(act_q8_row_bytes(a.n_ff));
  f.y = a.y;
  f.round = a.round;
  f.sync = a.sync;
  f.l = plan(a);
  const size_t smem = f.l.total;
  static std::atomic<uint64_t> cache{0};
  if (gemv_detail::cached_ctas_per_sm(moe_fused_kernel, smem, kThreads, cache) < 1)
    fail_message("moe_fused_decode: a CTA of " + std::to_string(smem) + " bytes of shared memory does not fit an SM");
  launch_pdl(moe_fused_kernel, dim3(static_cast<unsigned>(grid_size())), dim3(kThreads), smem, s, f);
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

int64_t moe_fused_decode_launches() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace ft::cuda
