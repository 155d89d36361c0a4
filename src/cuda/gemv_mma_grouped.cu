// NVFP4 expert gate / up GEMV of one token on tensor cores (gemv.h, integer path, grouped, no
// combine; the gate|up pair of GemvArgs::w_pair and its routing, GemvArgs::route_logits, and SwiGLU
// tail, GemvArgs::glu_xq): gemv_mma.cu's CTA of 16 rows and its per-step math (mma_step_acc), a
// CTA per (slot, 16-row tile) of the chosen expert's rows. The sums are the dense mma kernel's
// (a warp's steps w, w + NW, .. in order, then the warps in order): fp32 reassociation against the
// twin gemv_q8_ref, not the lean slab kernel's bits.
// Why: the lean slab kernel (gemv_nvfp4_lean.cu) spends ~6 lane instructions a weight on the
// gate|up pair (H200 session 21: 4.85 M warp instructions for its 25 M weights, ~6 us of issue at
// the H200's rate) and that launch took 11.4 us of Qwen3-30B-A3B's 37.8 us layer in session 23's
// chain trace; the tensor-core decode is ~3.4 a weight (gemv_mma.cu).
// Order of a CTA: PDL wait; the routing (ROUTE: the first warp routes the logits into shared
// memory, CTA 0 writes ids and weights out) or the ids (read before the wait with ids_early);
// the first stages of its expert's rows; the activation fragments; the steps; the epilogue
// (row scale x the expert's bank scale); with glu_count the SwiGLU tail of gemv_mma.cu, per slot.
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/moe_route_warp.cuh"
#include "cuda/ops_math.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

constexpr int kRows = kMmaRows;
constexpr int kStepBlocks = kMmaStepBlocks;
constexpr int kRowStep = kMmaRowStep;
constexpr int kStageBytes = kMmaStageBytes;
constexpr int kVecPerLane = kMmaVecPerLane;

// The routing's shared memory (ROUTE): probs and order (n_expert each), then 32 ids and 32 weights.
__host__ __device__ constexpr int route_bytes(int n_expert) { return (8 * n_expert + 256 + 15) & ~15; }

template <int NW, int NS, bool ROUTE>
__global__ void __launch_bounds__(NW * 32) nvfp4_mma_grouped_kernel(const Params p, const MmaSmem sm) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int n_tiles = static_cast<int>(p.rows / kRows);
  const int o = static_cast<int>(blockIdx.x) / n_tiles, tile = static_cast<int>(blockIdx.x) - o * n_tiles;
  const bool half = p.pair_out > 0 && o >= p.pair_out;
  const int out = o - (half ? static_cast<int>(p.pair_out) : 0);
  const int64_t row0 = static_cast<int64_t>(tile) * kRows;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kStepBlocks;
  uint8_t* stages = smem + sm.stage + warp * (NS * kStageBytes);
  const int ne = ROUTE ? p.route_n_expert : 0;
  int32_t* sids = reinterpret_cast<int32_t*>(smem + sm.total + 8 * ne);  // ROUTE: after the rest
  float* sw = reinterpret_cast<float*>(sids + 32);

  int src_off[kVecPerLane], dst_off[kVecPerLane];
#pragma unroll
  for (int v = 0; v < kVecPerLane; ++v) {
    const int i = lane + 32 * v, q = i / 9, pc = i - 9 * q;
    src_off[v] = q * static_cast<int>(p.row_bytes) + 16 * pc;
    dst_off[v] = i < kStageBytes / 16 ? q * kRowStep + 16 * pc : -1;
  }
  const int my_steps = warp < n_steps ? (n_steps - warp + NW - 1) / NW : 0;
  const uint8_t* wbase = nullptr;
  auto issue = [&](int i) {
    if (i < my_steps) {
      const uint8_t* src = wbase + static_cast<int64_t>(warp + NW * i) * kRowStep;
      uint8_t* dst = stages + (i % NS) * kStageBytes;
#pragma unroll
      for (int v = 0; v < kVecPerLane; ++v)
        if (dst_off[v] >= 0) cp_async16(dst + dst_off[v], src + src_off[v]);
    }
    cp_async_commit();
  };
  auto locate = [&](int64_t id) {
    wbase = (half ? p.w2 : p.w) + id * p.expert_bytes + row0 * p.row_bytes;
  };
  const float rs = mma_row_scale_early(p, row0);  // a weight: before the wait
  const bool early = !ROUTE && p.ids_early;
  if (early) {
    locate(p.ids[out]);
#pragma unroll
    for (int i = 0; i < NS - 1; ++i) issue(i);
  }
  pdl_wait();
  pdl_trigger();
  int64_t id;
  if constexpr (ROUTE) {
    if (warp == 0) {
      route_warp::route_row_warp(p.route_logits, ne, p.route_n_used, reinterpret_cast<float*>(smem + sm.total),
                                 reinterpret_cast<int32_t*>(smem + sm.total + 4 * ne), sids, sw, p.route_fast);
      if (blockIdx.x == 0 && lane < p.route_n_used) p.route_ids[lane] = sids[lane], p.route_w[lane] = sw[lane];
    }
    __syncthreads();
    id = sids[out];
  } else {
    id = p.ids[out];
  }
  if (!early) {
    locate(id);
#pragma unroll
    for (int i = 0; i < NS - 1; ++i) issue(i);
  }
  mma_build_x(smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd),
              p.xq + static_cast<int64_t>(static_cast<uint32_t>(out) / static_cast<uint32_t>(p.x_div)) * p.xq_row, 0, 0,
              1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;

  float acc0 = 0.0f, acc8 = 0.0f;
  for (int i = 0; i < my_steps; ++i) {
    cp_async_wait(NS - 2);
    __syncwarp();
    issue(i + NS - 1);
    const uint8_t* st = stages + (i % NS) * kStageBytes;
    mma_step_acc(st, frag, xd, warp + NW * i, tab, my_tile, bx, g, c, acc0, acc8);
  }
  cp_async_wait(0);

  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 2);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 1);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 2);
  float* red = reinterpret_cast<float*>(smem + sm.red);
  if (c == 0) {
    red[warp * kRows + g] = acc0;
    red[warp * kRows + g + 8] = acc8;
  }
  __syncthreads();
  float* y = p.y + (half ? p.y2_off : 0) + static_cast<int64_t>(out) * p.ldy;
  if (threadIdx.x < kRows) {
    const int r = static_cast<int>(threadIdx.x);
    const int64_t row = row0 + r;
    float v = red[r];
    for (int w = 1; w < NW; ++w) v += red[w * kRows + r];
    float ss = p.scale;
    if (p.bank != nullptr) ss *= p.bank[id * 4 + p.bank_col + (half ? 1 : 0)];
    const float s = p.row_scale != nullptr ? (p.rs_early ? rs : p.row_scale[row]) * ss : ss;
    store_out(y + row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
  }
  if (p.glu_count == nullptr) return;
  // The SwiGLU tail of the pair (gemv_mma.cu mma_glu_tail, per slot): 2 gate and 2 up tiles a
  // 32-row block.
  __shared__ unsigned s_last;
  if (threadIdx.x < kRows) glu_fence(p.glu_acq_rel);
  __syncthreads();
  const int blk = static_cast<int>(row0 >> 5);
  unsigned* cnt = p.glu_count + static_cast<int64_t>(out) * (p.rows >> 5) + blk;
  if (threadIdx.x == 0) s_last = atomicAdd(cnt, 1u) == 3u;
  __syncthreads();
  if (s_last == 0 || threadIdx.x >= 32) return;
  glu_fence(p.glu_acq_rel);
  const int64_t at = static_cast<int64_t>(out) * p.ldy + 32 * blk + lane;
  const float gv = __ldcg(p.y + at), uv = __ldcg(p.y + p.y2_off + at);
  const float v = round_to(p.round, ops::mul_rn(ops::silu(gv), uv));
  p.glu_h[static_cast<int64_t>(out) * p.rows + 32 * blk + lane] = v;
  q8_quantize_warp(v, blk, p.rows, p.glu_xq + static_cast<int64_t>(out) * p.glu_xq_row);
  if (lane == 0) *cnt = 0u;
}

std::atomic<int64_t> g_grouped_launches{0};

template <int NW, int NS, bool ROUTE>
bool launch_grouped(const Params& p, int64_t n_out, cudaStream_t stream) {
  const MmaSmem sm = mma_smem(p.k, NW, NS, NW * kRows * 4);
  const int total = sm.total + (ROUTE ? route_bytes(p.route_n_expert) : 0);
  if (total > max_smem_optin()) return false;
  auto kernel = nvfp4_mma_grouped_kernel<NW, NS, ROUTE>;
  static std::atomic<uint64_t> cache{0};
  if (cached_ctas_per_sm(kernel, static_cast<size_t>(total), NW * 32, cache) < 1) return false;
  const dim3 grid(static_cast<unsigned>(n_out * (p.rows / kRows)));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(total), stream, p, sm);
  g_grouped_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool gemv_nvfp4_mma_grouped(const Params& p, int64_t n_out, int warps, int stages, cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  // One token's slots, no combine, whole steps and tiles, 16-byte aligned rows and experts, 32-bit
  // expert rows; a pair doubles n_out (pair_out the first half); the SwiGLU tail wants whole blocks.
  if (p.ids == nullptr || p.slot_w != nullptr || nb % kStepBlocks != 0 || p.rows % kRows != 0 ||
      reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || p.row_bytes % 16 != 0 || p.expert_bytes % 16 != 0 ||
      (p.w2 != nullptr && reinterpret_cast<uintptr_t>(p.w2) % 16 != 0) || p.row_bytes * kRows > (int64_t{1} << 30) ||
      n_out * (p.rows / kRows) > (int64_t{1} << 30) || (p.glu_count != nullptr && (p.w2 == nullptr || p.rows % 32 != 0)))
    return false;
  const bool route = p.route_logits != nullptr;
  if (route && !route_warp::warp_route_fits(p.route_n_expert, p.route_n_used)) return false;
  auto go = [&](auto nw, auto ns) {
    return route ? launch_grouped<decltype(nw)::value, decltype(ns)::value, true>(p, n_out, stream)
                 : launch_grouped<decltype(nw)::value, decltype(ns)::value, false>(p, n_out, stream);
  };
  using I4 = std::integral_constant<int, 4>;
  using I8 = std::integral_constant<int, 8>;
  using I2 = std::integral_constant<int, 2>;
  using I3 = std::integral_constant<int, 3>;
  switch (warps * 10 + stages) {
    case 42: return go(I4{}, I2{});
    case 82: return go(I8{}, I2{});
    case 83: return go(I8{}, I3{});
    default: return go(I4{}, I3{});
  }
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_mma_grouped_launches() {
  return gemv_detail::g_grouped_launches.load(std::memory_order_relaxed);
}
}  // namespace ft::cuda
