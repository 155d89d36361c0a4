// The NVFP4 tensor-core GEMV for 2..8 tokens on a tiled weight (gemv.h, integer path; dense): a batched decode
// step's projections (continuous batching), which the slab kernel took until now.
//
// Why: the slab kernel decodes every weight once per token group and runs dp4a a token, so its time grows with
// the tokens -- H100 session 51 call 5, Llama-8B gate|up (28672x4096): 8 tokens took 3.8x one token's time. Here
// a step's E2M1 words are decoded once, as in gemv_mma.cu, and the tokens share them through the mma's columns.
//
// Layout (gemv_mma.cu's, with the columns re-assigned). The one-token kernel's B column 2t + j holds tile t's
// sub-block j, so its 4 tiles add into one C. Here each tile has its own C, and column 2u + j holds token u's
// sub-block j (u < 4; tokens 4..7 take a second mma on the same A registers): lane (g, c) feeds column g -- token
// (g >> 1) + 4q, sub-block g & 1, non-zero where c >> 1 == g & 1 -- and after the mma holds token c + 4q's two
// sub-blocks of rows g and g + 8 for that tile: the one-token lane c's values for tile c. Each lane then keeps one
// accumulator pair a tile and token group, adds into it with the one-token kernel's expression in its order
// (steps, gh 0 then 1, sub-block a then b), and the four tiles meet as that kernel's two shuffles add them
// ((t0 + t1) + (t2 + t3)); the warps' sums meet in warp order at the one-token plan's warps. So every token's rows
// are bit for bit those of gemv_mma.cu's one-token launch on that token alone (tests/cuda/gemv_batch_test.cpp):
// a sequence's projections are the same batched or alone (the batch forward's other launches -- its attention,
// norms -- are their own kernels, not held to that).
//
// B fragments x only (gemv_mma.cuh MmaFrag<true>: sums p.x - n.x, the same int32) so that 8 tokens of k 14336
// fit shared memory: T x k bytes of fragments, T x k / 8 of scales.
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/cp_async.cuh"
#include "cuda/gemv.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

using Frag = MmaFrag<true>;

// NQ token groups of 4 (tokens 4q .. 4q + 3); CHK as gemv_mma.cu's (false: Params::scales_clean); LANES: the
// lane-major pieces (Params::tiled 2), copied as gemv_mma.cu's LANES instances copy them, each lane's words read
// from its own 64 bytes and tile t's scales from lane (g, t)'s 8.
template <int NW, int NS, int NQ, bool CHK, bool LANES>
__global__ void __launch_bounds__(NW * 32) nvfp4_mma_batch_kernel(const Params p, const MmaSmem sm, int n_tok) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  uint8_t* stages = smem + sm.stage + warp * (NS * kMmaStageBytes);

  // This CTA's tiles: blockIdx.x, + gridDim.x, .. (one wave: the activations' fragments are built once a CTA, not
  // once a tile). A warp takes steps warp, warp + NW, .. of each, as in a CTA of one tile, so a row's sums do not
  // depend on the grid. Its cp.async ring runs on across the tiles.
  const int64_t n_tiles = (p.rows + kMmaRows - 1) / kMmaRows;
  const int my_tiles =
      static_cast<int64_t>(blockIdx.x) < n_tiles ? static_cast<int>((n_tiles - 1 - blockIdx.x) / gridDim.x) + 1 : 0;
  const int64_t tile_stride = static_cast<int64_t>(gridDim.x) * kMmaRows * p.row_bytes;

  // The tiled layout: step s of the tile is the 2304 contiguous bytes at s * kMmaStageBytes, laid out as the stage.
  int dst_off[kMmaVecPerLane];
#pragma unroll
  for (int v = 0; v < kMmaVecPerLane; ++v) {
    const int i = lane + 32 * v, q = i / 9, o = i - 9 * q;
    dst_off[v] = i < kMmaStageBytes / 16 ? q * kMmaRowStep + 16 * o : -1;
  }
  const int my_steps = warp < n_steps ? (n_steps - warp + NW - 1) / NW : 0;
  const int n_items = my_tiles * my_steps;
  // The next copy: item is_i (step is_s of this warp's in its tile) from is_src into stage is_st.
  int is_i = 0, is_s = 0, is_st = 0;
  const uint8_t* is_tile = p.w + static_cast<int64_t>(blockIdx.x) * kMmaRows * p.row_bytes;
  const uint8_t* is_src = is_tile + warp * kMmaStageBytes;
  auto issue = [&]() {
    if (is_i < n_items) {
      const uint8_t* src = is_src;
      uint8_t* dst = stages + is_st * kMmaStageBytes;
      if constexpr (LANES) {
#pragma unroll
        for (int j = 0; j < 4; ++j) cp_async16(dst + 16 * lane + 512 * j, src + 16 * lane + 512 * j);
        if (lane < 16) cp_async16(dst + 2048 + 16 * lane, src + 2048 + 16 * lane);
      } else {
#pragma unroll
        for (int v = 0; v < kMmaVecPerLane; ++v)
          if (dst_off[v] >= 0) cp_async16(dst + dst_off[v], src + 16 * (lane + 32 * v));
      }
      is_src += NW * kMmaStageBytes;
      if (++is_s == my_steps) is_s = 0, is_tile += tile_stride, is_src = is_tile + warp * kMmaStageBytes;
    }
    ++is_i;
    is_st = is_st == NS - 1 ? 0 : is_st + 1;
    cp_async_commit();
  };

  // Weights before the PDL wait (never written by a kernel); the activations after it.
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue();
  const int tid = static_cast<int>(threadIdx.x);
  int64_t my_row = static_cast<int64_t>(blockIdx.x) * kMmaRows + (tid & (kMmaRows - 1));
  const float rs0 = p.rs_early && p.row_scale != nullptr && tid < kMmaRows * n_tok && my_row < p.rows
                        ? p.row_scale[my_row]
                        : 1.0f;
  pdl_wait();
  pdl_trigger();

  // 8 fragments a thread a batch: 8 tokens of k 4096 at 4 warps are 32 a thread (4 round trips, not 8).
  mma_build_x<true, 8>(smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd), p.xq, p.xq_row, 0, 1, n_tok, p.k,
                        nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};

  // The B column this lane feeds: token (g >> 1) + 4q, sub-block g & 1 (its k from lanes c with c >> 1 == g & 1).
  const bool feeds = (c >> 1) == (g & 1);
  const int ftok = g >> 1;
  const uint8_t* frag = smem + sm.frag + Frag::kBytes * c;
  float* red = reinterpret_cast<float*>(smem + sm.red);

  int i = 0;  // this warp's items so far (the ring's position)
  for (int j = 0; j < my_tiles; ++j) {
    float acc[NQ][4][2];  // [token group][tile][row g, g + 8]: the one-token lane t's acc0 / acc8 for token c + 4q
#pragma unroll
    for (int q = 0; q < NQ; ++q)
#pragma unroll
      for (int t = 0; t < 4; ++t) acc[q][t][0] = acc[q][t][1] = 0.0f;

    for (int si = 0; si < my_steps; ++si, ++i) {
      cp_async_wait(NS - 2);
      __syncwarp();  // every lane's copies of item i landed; item i - 1's stage is free
      issue();
      const uint8_t* st = stages + (i % NS) * kMmaStageBytes;
      const int step = warp + NW * si;
      MmaLaneStep ls;  // LANES: this lane's words; sl[t]: lane (g, t)'s scale halfwords (u = 2 gh + r)
      uint2 sl[4];
      if constexpr (LANES) {
#pragma unroll
        for (int jv = 0; jv < 4; ++jv) ls.v[jv] = *reinterpret_cast<const uint4*>(st + 16 * lane + 512 * jv);
#pragma unroll
        for (int t = 0; t < 4; ++t) sl[t] = *reinterpret_cast<const uint2*>(st + 2048 + 8 * (4 * g + t));
      }
#pragma unroll
      for (int gh = 0; gh < 2; ++gh) {
        const int grp = 2 * step + gh;
        // Rows g and g + 8: the scale words of blocks 2 gh and 2 gh + 1 (tile t: block 2 gh + (t >> 1), half t & 1).
        uint32_t sw[2][2];
        if constexpr (!LANES) {
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int b = 0; b < 2; ++b) sw[r][b] = lds32(st + (g + 8 * r) * kMmaRowStep + 36 * (2 * gh + b));
        }
        // Tile t's 16-bit scale pair of row g + 8 r (low half).
        auto scale = [&](int t, int r) {
          if constexpr (LANES) return (gh == 0 ? sl[t].x : sl[t].y) >> (16 * r);
          else return sw[r][t >> 1] >> (16 * (t & 1));
        };
        auto word = [&](int t, int r) {
          if constexpr (LANES) return mma_lane_word(ls, 8 * gh + 2 * t + r);
          else return lds32(st + (g + 8 * r) * kMmaRowStep + (2 * gh + (t >> 1)) * 36 + 4 + 16 * (t & 1) + 4 * c);
        };
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          uint32_t w[2][4];  // rows g, g + 8: p lo, p hi, n lo, n hi
#pragma unroll
          for (int r = 0; r < 2; ++r) e2m1x8_pn(word(t, r), tab, w[r][0], w[r][1], w[r][2], w[r][3]);
          float s0a, s0b, s8a, s8b;
          nvfp4_scales2<CHK>(scale(t, 0), s0a, s0b);
          nvfp4_scales2<CHK>(scale(t, 1), s8a, s8b);
#pragma unroll
          for (int q = 0; q < NQ; ++q) {
            uint2 bx = make_uint2(0, 0);
            if (feeds && ftok + 4 * q < n_tok)
              bx = Frag::load(frag + static_cast<int64_t>(ftok + 4 * q) * p.k + (grp * 4 + t) * 4 * Frag::kBytes);
            int cp[4] = {0, 0, 0, 0}, cn[4] = {0, 0, 0, 0};
            mma_s8_16832(cp, w[0][0], w[1][0], w[0][1], w[1][1], bx.x, bx.y);
            mma_s8_16832(cn, w[0][2], w[1][2], w[0][3], w[1][3], bx.x, bx.y);
            // Token c + 4q's scale of block 2 gh + (t >> 1), half t & 1: xd index 8 step + 4 gh + t.
            const int tok = c + 4 * q;
            const float dx = tok < n_tok ? xd[static_cast<int64_t>(tok) * (2 * nb) + 8 * step + 4 * gh + t] : 0.0f;
            acc[q][t][0] = fmaf(static_cast<float>(cp[0] - cn[0]), s0a * dx, acc[q][t][0]);
            acc[q][t][0] = fmaf(static_cast<float>(cp[1] - cn[1]), s0b * dx, acc[q][t][0]);
            acc[q][t][1] = fmaf(static_cast<float>(cp[2] - cn[2]), s8a * dx, acc[q][t][1]);
            acc[q][t][1] = fmaf(static_cast<float>(cp[3] - cn[3]), s8b * dx, acc[q][t][1]);
          }
        }
      }
    }

    // Each token's 16 row sums of this warp: the tiles as the one-token kernel's shuffles add its lanes.
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
      const int tok = c + 4 * q;
      if (tok < n_tok) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          red[(tok * NW + warp) * kMmaRows + g + 8 * r] =
              (acc[q][0][r] + acc[q][1][r]) + (acc[q][2][r] + acc[q][3][r]);
      }
    }
    __syncthreads();
    if (tid < kMmaRows * n_tok) {
      const int tok = tid / kMmaRows, r = tid & (kMmaRows - 1);
      if (my_row < p.rows) {
        const float v = mma_rows_sum(red + tok * NW * kMmaRows, NW, r);
        // The early scale is the first tile's; later tiles' are loaded here (weights, never written by a kernel).
        const float rs = j == 0 || !p.rs_early || p.row_scale == nullptr ? rs0 : p.row_scale[my_row];
        const float s = mma_row_scale(p, rs, my_row);
        store_out(p.y + tok * p.ldy + my_row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
      }
    }
    my_row += static_cast<int64_t>(gridDim.x) * kMmaRows;
    __syncthreads();  // red is the next tile's
  }
  cp_async_wait(0);
}

std::atomic<int64_t> g_batch_launches{0};

template <int NW, int NS, int NQ>
bool launch_batch(const Params& p, int n_tok, bool wave, cudaStream_t stream) {
  // x fragments only (T x k bytes), T rows of scales, the warps' stages, their row sums (NW x 16 a token).
  const MmaSmem sm = mma_smem(p.k, NW, NS, NW * kMmaRows * n_tok * 4, /*xn=*/true, n_tok);
  if (sm.total > max_smem_optin()) return false;
  const bool lanes = p.tiled == 2;
  auto kernel = lanes            ? nvfp4_mma_batch_kernel<NW, NS, NQ, false, true>
                : p.scales_clean ? nvfp4_mma_batch_kernel<NW, NS, NQ, false, false>
                                 : nvfp4_mma_batch_kernel<NW, NS, NQ, true, false>;
  static std::atomic<uint64_t> cache[3] = {};
  if (cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), NW * 32, cache[lanes ? 2 : p.scales_clean ? 1 : 0]) < 1)
    return false;
  // One wave (wave): each CTA walks tiles, the tiles spread evenly (every CTA ceil(tiles / resident) of them or one
  // fewer); else a CTA a tile. Why: a CTA of one 16-row tile built all its tokens' fragments for 16 rows' work, each
  // batch of them an L2 round trip after the PDL wait. H100 session 54 call 2 (`ft-bench-gemv-cuda --batch`, back to
  // back, us, a CTA a tile -> one wave): 28672x4096 at 4 / 6 / 8 tokens 34.95 -> 31.30, 49.96 -> 39.23, 62.51 ->
  // 39.45; 4096x14336 at 6 / 8 39.06 -> 30.15, 42.66 -> 32.39; the rest within 1% but 28672x4096 at 2 / 3 tokens
  // (28.42 -> 29.12, 32.75 -> 34.19) and 4096x4096 at 3 (8.66 -> 8.44). Llama-8B batch steps (ft-bench-batch,
  // prompt 32, 2 rounds alternating): B=8 6.750 / 6.759 -> 5.706 / 5.689 ms, B=4 4.123 / 4.126 -> 3.960 / 3.940,
  // B=2 3.367 / 3.337 -> 3.321 / 3.320 -- so one wave at every token count.
  const int64_t n_tiles = (p.rows + kMmaRows - 1) / kMmaRows;
  int64_t n_cta = n_tiles;
  if (wave) {
    const int ctas = cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), NW * 32,
                                        cache[lanes ? 2 : p.scales_clean ? 1 : 0]);
    const int64_t resident = static_cast<int64_t>(ctas) * sm_count();
    const int64_t per = (n_tiles + resident - 1) / resident;
    n_cta = (n_tiles + per - 1) / per;
  }
  const dim3 grid(static_cast<unsigned>(n_cta));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, sm, n_tok);
  g_batch_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

template <int NW, int NQ>
bool launch_batch_at(const Params& p, int n_tok, int stages, bool wave, cudaStream_t stream) {
  switch (stages) {
    case 2: return launch_batch<NW, 2, NQ>(p, n_tok, wave, stream);
    case 3: return launch_batch<NW, 3, NQ>(p, n_tok, wave, stream);
    default: return launch_batch<NW, 4, NQ>(p, n_tok, wave, stream);
  }
}

bool gemv_nvfp4_mma_batch(const Params& p, int64_t n_tok, int stages, bool wave, cudaStream_t stream) {
  // Tiled (lane-major ones only clean, as gemv_mma.cu's), plain: no SwiGLU tail, no norm fold (one-token
  // features); whole 4-block steps.
  if (p.tiled == 0 || (p.tiled == 2 && !p.scales_clean) || n_tok < 2 || n_tok > kGemvMaxTokens ||
      p.glu_count != nullptr || p.nq_count != nullptr || p.norm_part != nullptr ||
      (p.k / 64) % kMmaStepBlocks != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0)
    return false;
  // The one-token plan's warps, so each token's fp32 order is that launch's (the stages do not change it).
  int warps = 0, one_stages = 0;
  gemv_nvfp4_tiled_mma(p.rows, p.k, warps, one_stages);
  const int nt = static_cast<int>(n_tok);
  if (stages < 2 || stages > 4) stages = gemv_nvfp4_batch_stages(warps, nt);
  auto launch = [&](int s) {
    if (warps == 4) return nt <= 4 ? launch_batch_at<4, 1>(p, nt, s, wave, stream) : launch_batch_at<4, 2>(p, nt, s, wave, stream);
    if (warps == 8) return nt <= 4 ? launch_batch_at<8, 1>(p, nt, s, wave, stream) : launch_batch_at<8, 2>(p, nt, s, wave, stream);
    return false;
  };
  // At the table's stages, else 2 where shared memory is short (8 tokens of a long k).
  return launch(stages) || (stages != 2 && launch(2));
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_mma_batch_launches() { return gemv_detail::g_batch_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
