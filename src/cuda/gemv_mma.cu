// NVFP4 decode GEMV on tensor cores (gemv.h, integer path with xq; one token, dense): the
// integer dot products of gemv_q8_ref's dot_nvfp4 by mma.sync.m16n8k16.s32.s8.s8.s32 instead
// of dp4a. 2 x E2M1 is an integer in {-12..12} and the act_q8 codes are int8, so the tensor
// cores give the same exact int32 sub-block sums as dp4a; the fp32 epilogue per sub-block is
// the twin's term, fma(float(is), ue4m3_half * x.d, acc), summed in another order (lanes,
// then warps: fp32 reassociation only).
//
// Why: the slab kernel (gemv_nvfp4.cu) spends ~4.4-4.6 lane instructions per weight (H200 runs
// 8-9: 2 dp4a per 4 weights after the sign split, per-row scale work on every lane), and the
// H200 issues ~4 per weight at full read bandwidth. Here a warp owns 16 rows and one mma
// multiplies 16 rows x 16 k: the dot product is 0.25 instruction per weight (p and n
// halves), the decode ~0.9, the scale epilogue ~0.5 (every lane's accumulators are useful).
// Measured (H200 run 10, ncu, 14336x4096 at 4 warps / 2 stages): 6.30 M warp instructions
// against the slab kernel's 8.48 M, i.e. 3.4 lane instructions per weight, not the ~2 counted
// above: integer index arithmetic (IADD3, IMAD, LEA, VIADD: 377 of the kernel's 1120 static
// SASS instructions, against 72 PRMT and 32 IMMA) is the next thing to cut. 13.60 us (53% of
// read bandwidth) against the slab's 14.80.
// Session 12 (H200, ncu of a Llama-8B decode step, 28672x4096 at 4 warps / 2 stages): the ALU
// pipe was the busiest (52% of cycles: PRMT / LOP3 / SHF 66 / 49 / 44 a warp step), math-pipe
// throttle and not-selected the top stalls, the FMA pipe at 9-15%. Moving the decoder's shifts
// and sign flips to the FMA pipe (mul.hi / mad, the complement through a reversed table) and
// giving the copies one base pointer a lane halved the ALU share (52% -> 25%), yet the kernel ran
// 3-10% slower (dep 24.9-25.5 us vs 24.1; Llama-8B 388 vs 397 tok/s; a row-per-lane copy mapping
// 30% slower, its copies filling the LSU queue). So the issue slots are not what holds this kernel
// near 60% of read bandwidth; the code stayed as it was (the trial: bench/session12, benches/h200.md).
// Session 13: nor is it the memory-level parallelism of the ring. One cp.async.bulk.prefetch.L2 of
// the CTA's whole tile (16 contiguous rows) at its start, before pdl_wait, made every shape slower
// (28672x4096 23.5 -> 28.3 us, 14336x4096 13.7 -> 17.0; Llama-8B tg128 345 vs 388 tok/s); a warp
// streaming its own contiguous steps by bulk copies (gemv_mma_tma.cu) wins only at k <= 2048.
//
// Layout. A CTA of NW warps owns a 16-row tile; warp w streams the steps w, w + NW, ... of
// the row (a step = 4 NVFP4 blocks = 144 bytes of each of the 16 rows, cp.async into an NS-deep
// ring of 16 x 144-byte stages), and the warps' row sums meet in shared memory in warp order.
// In a stage, lane (g = lane / 4, c = lane % 4) reads word c of a 16-byte "tile" (half a
// block's codes: 2 sub-blocks, c < 2 the first) of rows g and g + 8 (bank 4g + c: conflict
// free at the 144-byte row stride). e2m1x8_pn splits each word into positive / negative
// magnitudes, lo / hi nibbles: mma A operands {p_lo(g), p_lo(g + 8)} etc., exactly the
// m16n8k16 A fragment (row g / g + 8, k = 4c..4c + 3).
// Columns: 4 tiles (2 blocks, a "group") accumulate into one C; tile t's activations sit in
// B columns 2t (sub-block of lanes c < 2) and 2t + 1 (c >= 2), zero elsewhere, so after the
// group C[row][2t + j] is the integer sum of tile t's sub-block j, and lane (g, c) holds tile
// c's two sub-blocks of rows g and g + 8: all 32 lanes do useful epilogue work. B column n is
// supplied by lanes 4n..4n + 3, so each lane feeds at most one tile: its fragments (x, and -x
// for the negative magnitudes) are built once per CTA in shared memory (x_frag) and loaded
// by a predicated LDS.128 per tile; the other tiles' B registers stay zero.
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/norm_fold.cuh"
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

// Params::glu_xq, dense (a gate|up of rows 2 n_ff, gate rows first): the CTA counts its stored
// 16-row tile into its 32-row block's counter; the CTA completing the block (2 gate and 2 up
// tiles) has its first warp read the block's 32 gate and 32 up sums back from L2 and write their
// SwiGLU and its Q8 block -- swiglu_q8's arithmetic, the same bytes -- then re-arm the counter.
// The classic fence / ticket: the storing threads fence before thread 0 counts, the last CTA's
// warp fences before it reads. Why: the SwiGLU launch between Llama-8B's gate|up and down took
// ~4 us a layer in H200 session 23's chain trace; session 24 calls 1-3, tg128 alternating,
// FT_GLU_FUSED=0 / on: 461.2, 462.7 / 470.4, 470.6 and 472.9, 469.0 / 478.3, 480.8 tok/s (+1.9%).
// The same tail per warp in the lean MoE gate|up pair (its CTAs 4 warps of 1-2 items, one wave)
// cost more than the launch it saved (Qwen3-30B-A3B 455-475 against 471-494) and was dropped.
__device__ __forceinline__ void mma_glu_tail(const Params& p, int64_t row0) {
  static_assert(kRows == 16, "a 32-row block of each half is two tiles");
  __shared__ unsigned s_last;
  if (threadIdx.x < kRows) __threadfence();  // the threads that stored
  __syncthreads();
  const int64_t n_ff = p.rows / 2;
  const int blk = static_cast<int>((row0 < n_ff ? row0 : row0 - n_ff) >> 5);
  if (threadIdx.x == 0) s_last = atomicAdd(p.glu_count + blk, 1u) == 3u;
  __syncthreads();
  if (s_last == 0 || threadIdx.x >= 32) return;
  __threadfence();
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t at = 32 * static_cast<int64_t>(blk) + lane;
  const float g = __ldcg(p.y + at), u = __ldcg(p.y + n_ff + at);
  const float v = round_to(p.round, ops::mul_rn(ops::silu(g), u));
  p.glu_h[at] = v;
  q8_quantize_warp(v, blk, n_ff, p.glu_xq);
  if (lane == 0) p.glu_count[blk] = 0u;
}

// Params::nq_count (the norm fold's producer, norm_fold.h; rows % 32 == 0): the CTA counts its
// stored 16 rows into its 32-row block's counter; the CTA completing the block has its first warp
// read the block's 32 rows back from L2 and write their Q8 and sum of squares (norm_fold.cuh), as
// mma_glu_tail does for the SwiGLU.
// wv: the first warp's norm weights of the block (norm_fold::weight_of, loaded before the PDL wait).
__device__ __forceinline__ void mma_nq_tail(const Params& p, int64_t row0, float wv) {
  __syncthreads();  // the threads that stored (block_done's release carries their rows)
  if (threadIdx.x >= 32) return;
  const int blk = static_cast<int>(row0 >> 5);
  if (!norm_fold::block_done(p.nq_count, blk, kRows)) return;
  const float y = __ldcg(p.y + 32 * static_cast<int64_t>(blk) + threadIdx.x);
  norm_fold::block_warp(y, wv, blk, p.rows, p.nq_xq, p.nq_part);
}

// YE (tiled accumulating launches with GemvArgs::y_early -- the down projection into the
// residual): the tile's old y read before the PDL wait, not after the sums. H200 session 27 call 2,
// Llama-8B tg128 alternating: 496.33 / 495.48 / 496.35 / 493.96 against 494.27 / 493.15 / 489.99 /
// 493.62 tok/s (+0.5%), the same 64 tokens.
// FOLD (the norm fold, norm_fold.h): 1 the consumer (Params::norm_part: the row's scales made in the
// build), 2 the producer (Params::nq_count: mma_nq_tail). Own instances, so the plain ones keep their
// code: with the fold's code in the shared instances (runtime-tested, unused) Llama-8B decoded 496 tok/s
// against main's 518 before it (H200 session 33 call 2, tg128 alternating).
// Two 16-row tiles a CTA (the plain tiled instance at 4 warps x 2 stages, the same bits: the activation
// row's build, PDL wait and ring fill paid once for two tiles) lost: H200 session 36 call 1, Llama-8B tg128
// alternating, 500.58 / 496.62 against 515.96 / 514.37 tok/s (-3.2%), slower on every shape alone
// (28672x4096 back to back 22.85 against 20.05 us). Removed in session 37.
// GO (a gate|up with the SwiGLU tail, Params::glu_order): CTA 4 b + j takes the tiles of SwiGLU block b --
// gate tiles 2 b, 2 b + 1 (j 0, 1), then up tiles n_ff / 16 + 2 b, + 1 (j 2, 3) -- instead of tile 4 b + j,
// so the blocks complete while the launch runs, in order, rather than all in its second half (the up
// tiles'). The same tiles, the same sums: the same bits. H100 session 39 call 6, Llama-8B tg128 alternating:
// 450.71 / 450.26 against 447.32 / 446.14 tok/s (+0.8%); call 7, this instance, 4 rounds: 447.31 / 447.43 /
// 447.11 / 446.45 against 445.33 / 444.97 / 444.80 / 444.40 (+0.5%), the same 64 greedy tokens. Those ran
// lazily loaded, where code placement alone moves Llama-8B by up to 2% (session 45); eagerly loaded (H100
// session 46 call 2, 10 rounds) row order (FT_GLU_ORDER=0) gave 464.93 (sd 4.07) against 462.25 (sd 3.48):
// within noise either way, so the order stays until a test separates them.
// (Measured with it and removed: a down projection reading each 256-element step of the SwiGLU row as the
// tails counted it, instead of after the PDL wait -- bits equal, 5-6% slower end to end whatever its fence or
// polling (calls 1-6); in the chain trace gate|up + down took 40.4 us a layer against 36.4.)
__device__ __forceinline__ int64_t glu_order_tile(int64_t b, int64_t rows) {
  const int64_t blk = b >> 2, j = b & 3;
  return j < 2 ? 2 * blk + j : rows / 32 + 2 * blk + (j - 2);
}

// CHK false (tiled instances, Params::scales_clean): the block scales without the NaN codes' fix-up
// (gemv_q8_formats.cuh nvfp4_scales2 says why); the same bits on weights without those codes.
// LANES (TILED, Params::tiled 2: the lane-major pieces of nvfp4_tiled.h): each lane copies its own 64 code bytes of
// a step (4 x 16, cp.async) into the same offsets of the stage, lanes 0..15 the scales, and reads back its 72
// (4 LDS.128 + 1 LDS.64) -- no per-vector offsets, no LDS at computed addresses; mma_lane_step_acc's sums are
// mma_step_acc's, so the same bits as the tiled instance at the same warps.
template <int NW, int NS, bool TILED, bool YE = false, int FOLD = 0, bool GO = false, bool CHK = true,
          bool LANES = false>
__global__ void __launch_bounds__(NW * 32) nvfp4_mma_kernel(const Params p, const MmaSmem sm) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = (GO ? glu_order_tile(blockIdx.x, p.rows) : static_cast<int64_t>(blockIdx.x)) * kRows;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kStepBlocks;
  // The tile's bytes start here in both layouts; TILED (nvfp4_tiled.h): its step s is the
  // contiguous 2304 bytes at s * kStageBytes, laid out as the stage (rows 144 bytes apart).
  const uint8_t* wbase = p.w + row0 * p.row_bytes;
  uint8_t* stages = smem + sm.stage + warp * (NS * kStageBytes);

  // This lane's cp.async vectors of a step: vector i = lane + 32 v is 16-byte piece o of row
  // q; rows past the last read the last row (their sums are never stored).
  const int64_t rows_left = p.rows - row0;
  const int last = rows_left < kRows ? static_cast<int>(rows_left) - 1 : kRows - 1;
  int src_off[kVecPerLane], dst_off[kVecPerLane];
#pragma unroll
  for (int v = 0; v < kVecPerLane; ++v) {
    const int i = lane + 32 * v, q = i / 9, o = i - 9 * q;
    src_off[v] = TILED ? 16 * i : (q < last ? q : last) * static_cast<int>(p.row_bytes) + 16 * o;
    dst_off[v] = i < kStageBytes / 16 ? q * kRowStep + 16 * o : -1;
  }
  // The i-th step of this warp is step warp + NW * i of the row.
  const int my_steps = warp < n_steps ? (n_steps - warp + NW - 1) / NW : 0;
  auto issue = [&](int i) {
    if (i < my_steps) {
      const uint8_t* src = wbase + static_cast<int64_t>(warp + NW * i) * (TILED ? kStageBytes : kRowStep);
      uint8_t* dst = stages + (i % NS) * kStageBytes;
      if constexpr (LANES) {
#pragma unroll
        for (int j = 0; j < 4; ++j) cp_async16(dst + 16 * lane + 512 * j, src + 16 * lane + 512 * j);
        // The scales by lanes 0..15, 16 bytes each (lanes 2 l, 2 l + 1's): a per-lane 8-byte copy must be
        // cp.async.ca, which allocates in L1 -- Llama-8B tg128 2.2% slower with it (H100 session 50 call 1).
        if (lane < 16) cp_async16(dst + 2048 + 16 * lane, src + 2048 + 16 * lane);
      } else {
#pragma unroll
        for (int v = 0; v < kVecPerLane; ++v)
          if (dst_off[v] >= 0) cp_async16(dst + dst_off[v], src + src_off[v]);
      }
    }
    cp_async_commit();
  };

  // PDL: the weights are never written by earlier kernels, so the first stages load before
  // the wait; the activations only after it.
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue(i);
  const float rs = mma_row_scale_early(p, row0);  // a weight: before the wait
  float y_old = 0.0f;
  if constexpr (YE) {
    if (threadIdx.x < kRows && row0 + static_cast<int64_t>(threadIdx.x) < p.rows) y_old = p.y[row0 + threadIdx.x];
  }
  float nq_wv = 0.0f;  // FOLD 2: the tail's norm weights, a weight too (norm_fold::weight_of)
  if constexpr ((FOLD & 2) != 0) {
    if (threadIdx.x < 32) nq_wv = norm_fold::weight_of(p.nq_w, static_cast<int>(row0 >> 5));
  }
  pdl_wait();
  pdl_trigger();

  // The activation row in one pass (mma_build_x_1pass: one L2 round trip after the wait instead of
  // two or three), sized to the instance: 8 warps hold k 14336's 7 fragments and 2 scales a thread
  // (Llama-8B's down projection), 4 warps (tiled) k 4096's 4 and 1 (its qkv and gate|up). H200
  // session 26, Llama-8B tg128 alternating: 8 warps 482.7 vs 479.3 tok/s (call 5), then the 4-warp
  // tiled ones as well 493.8 vs 484.3 (call 7); sized 8 and 4 on the 4-warp ones it had lost 4%
  // (call 4). Beyond those sizes, and on the row-major 4-warp instances (not measured), the batches.
  uint8_t* frag_s = smem + sm.frag;
  float* xd_s = reinterpret_cast<float*>(smem + sm.xd);
  bool one_pass;
  if constexpr ((FOLD & 1) != 0)
    one_pass =
        (NW >= 8 && mma_build_x_1pass<8, 2, 8>(frag_s, xd_s, p.xq, p.k, nb, NW * 32, p.norm_part, p.norm_eps)) ||
        (NW == 4 && mma_build_x_1pass<4, 1, 4>(frag_s, xd_s, p.xq, p.k, nb, NW * 32, p.norm_part, p.norm_eps));
  else
    one_pass = (NW >= 8 && mma_build_x_1pass<8, 2>(frag_s, xd_s, p.xq, p.k, nb, NW * 32)) ||
               (TILED && NW == 4 && mma_build_x_1pass<4, 1>(frag_s, xd_s, p.xq, p.k, nb, NW * 32));
  if (!one_pass) mma_build_x(frag_s, xd_s, p.xq, 0, 0, 1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  if constexpr ((FOLD & 1) != 0) {
    if (!one_pass) {  // the norm fold's scales after the batched build
      mma_norm_fix_xd(xd_s, p.norm_part, p.k, p.norm_eps, NW * 32);
      __syncthreads();
    }
  }
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  // Loaded from shared memory: a value ptxas cannot re-create per PRMT (H200 run 9).
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};

  // Lane (g, c) feeds B column g: tile g >> 1 when c >> 1 == g & 1, else none.
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;

  float acc0 = 0.0f, acc8 = 0.0f;  // rows g, g + 8
  float* red = reinterpret_cast<float*>(smem + sm.red);
  for (int i = 0; i < my_steps; ++i) {
    if constexpr (LANES) {
      cp_async_wait(NS - 2);
      __syncwarp();  // every lane's copies of step i landed (the scales come from another lane's)
      const uint8_t* st = stages + (i % NS) * kStageBytes;
      MmaLaneStep ls;
#pragma unroll
      for (int j = 0; j < 4; ++j) ls.v[j] = *reinterpret_cast<const uint4*>(st + 16 * lane + 512 * j);
      ls.s = *reinterpret_cast<const uint2*>(st + 2048 + 8 * lane);
      issue(i + NS - 1);  // into the stage this lane read a step ago
      mma_lane_step_acc<true, false, CHK>(ls, frag, xd, warp + NW * i, tab, my_tile, bx, c, acc0, acc8);
      continue;
    }
    cp_async_wait(NS - 2);
    __syncwarp();  // every lane's copies of step i landed; step i - 1's stage is free
    issue(i + NS - 1);
    const uint8_t* st = stages + (i % NS) * kStageBytes;
    // Tiled: one m16n8k32 per tile half pair, not two m16n8k16 (mma_step_acc's K32, the same int32
    // sums). H200 session 30 call 1, Llama-8B tg128 alternating (FT_MMA_K32=1, a switch then): 509.75 /
    // 511.02 / 509.67 against 495.44 / 498.72 / 496.56 tok/s (+2.7%), the same 64 greedy tokens; on the
    // bulk-copy qkv instance (gemv_mma_tma.cu, Qwen3-30B-A3B) 526.6 against 527.7 on average (not taken).
    mma_step_acc<kRowStep, TILED, false, CHK>(st, frag, xd, warp + NW * i, tab, my_tile, bx, g, c, acc0, acc8);
  }
  cp_async_wait(0);

  // Row sums: the 4 lanes of a row, then the warps in order.
  mma_warp_rows_out(acc0, acc8, g, c, red, warp);
  __syncthreads();
  if (threadIdx.x < kRows) {
    const int r = static_cast<int>(threadIdx.x);
    const int64_t row = row0 + r;
    if (row < p.rows) {
      const float v = mma_rows_sum(red, NW, r);
      const float s = mma_row_scale(p, rs, row);
      if constexpr (YE)
        store_acc(p.y + row, y_old, round_to(p.round, __fmul_rn(v, s)));
      else
        store_out(p.y + row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
    }
  }
  if (p.glu_count != nullptr) mma_glu_tail(p, row0);
  if constexpr ((FOLD & 2) != 0) mma_nq_tail(p, row0, nq_wv);
}

std::atomic<int64_t> g_mma_launches{0}, g_glu_order_launches{0}, g_lanes_launches{0};

// The instance for a launch's kind: the producer, the consumer, YE, GO, plain tiled (each checking the NaN
// codes or not: CHK), else row-major -- always checked, as only a tiled weight is ever scanned, and never of
// another kind (YE, GO and the fold's kinds need tiled weights: launch_mma's flags say so).
// The lane-major instances (LANES) exist only clean: gpu/weights.cpp stores lanes only for scanned-clean weights.
template <int NW, int NS, bool CHK, bool LANES = false>
auto mma_tiled_instance(bool prod, bool cons, bool ye, bool go) {
  return prod   ? nvfp4_mma_kernel<NW, NS, true, true, 2, false, CHK, LANES>
         : cons ? nvfp4_mma_kernel<NW, NS, true, false, 1, false, CHK, LANES>
         : ye   ? nvfp4_mma_kernel<NW, NS, true, true, 0, false, CHK, LANES>
         : go   ? nvfp4_mma_kernel<NW, NS, true, false, 0, true, CHK, LANES>
                : nvfp4_mma_kernel<NW, NS, true, false, 0, false, CHK, LANES>;
}
template <int NW, int NS>
auto mma_instance(bool prod, bool cons, bool ye, bool go, bool tiled, bool clean, bool lanes) {
  if (!tiled) return nvfp4_mma_kernel<NW, NS, false>;
  if (lanes) return mma_tiled_instance<NW, NS, false, true>(prod, cons, ye, go);
  return clean ? mma_tiled_instance<NW, NS, false>(prod, cons, ye, go)
               : mma_tiled_instance<NW, NS, true>(prod, cons, ye, go);
}

template <int NW, int NS>
bool launch_mma(const Params& p, cudaStream_t stream, int smem_floor) {
  MmaSmem sm = mma_smem(p.k, NW, NS, NW * kRows * 4);
  if (smem_floor > sm.total) sm.total = smem_floor;
  if (sm.total > max_smem_optin()) return false;
  const bool ye = p.tiled && p.accumulate && p.y_early;
  // The fold's instances: a consumer on tiled weights without YE, a producer with YE (the residual's
  // down projection); elsewhere the plain instance (gemv_nvfp4_mma declines a consumer; a producer
  // gets norm_fold_produce after it).
  const bool cons = p.norm_part != nullptr, prod = p.nq_count != nullptr && ye;
  if (cons && (!p.tiled || ye || p.nq_count != nullptr)) return false;
  // GO: a tiled gate|up with the SwiGLU tail in block order (rows % 64 == 0: has_glu's check), not a consumer.
  const bool go = p.tiled && p.glu_count != nullptr && p.glu_order != 0 && !cons && !ye;
  // Scanned weights (Params::scales_clean) take the tiled instances without the NaN codes' fix-up; lane-major
  // ones (Params::tiled 2) exist only so.
  const bool fast = p.tiled && p.scales_clean, lanes = p.tiled == 2;
  if (lanes && !fast) return false;
  auto kernel = mma_instance<NW, NS>(prod, cons, ye, go, p.tiled, fast, lanes);
  static std::atomic<uint64_t> cache[16] = {};
  const int ci = (prod ? 4 : cons ? 3 : ye ? 2 : go ? 5 : p.tiled ? 1 : 0) + (fast ? 5 : 0) + (lanes ? 5 : 0);
  if (cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), NW * 32, cache[ci]) < 1)
    return false;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, sm);
  g_mma_launches.fetch_add(1, std::memory_order_relaxed);
  if (go) g_glu_order_launches.fetch_add(1, std::memory_order_relaxed);
  if (lanes) g_lanes_launches.fetch_add(1, std::memory_order_relaxed);
  if (fast) note_clean_launch();
  if (prod) note_nq_tail();
  return true;
}

}  // namespace

bool gemv_nvfp4_mma(const Params& p, int64_t n_tok, bool grouped, int warps, int stages, cudaStream_t stream,
                    int smem_floor) {
  const int64_t nb = p.k / 64;
  // One token, dense, whole steps, 16-byte aligned rows, 32-bit load offsets.
  if (grouped || n_tok != 1 || nb % kStepBlocks != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      p.row_bytes % 16 != 0 || p.row_bytes * kRows > (int64_t{1} << 30))
    return false;
  switch (warps * 10 + stages) {
    case 42: return launch_mma<4, 2>(p, stream, smem_floor);
    case 43: return launch_mma<4, 3>(p, stream, smem_floor);
    case 44: return launch_mma<4, 4>(p, stream, smem_floor);
    case 82: return launch_mma<8, 2>(p, stream, smem_floor);
    case 84: return launch_mma<8, 4>(p, stream, smem_floor);
    case 162: return launch_mma<16, 2>(p, stream, smem_floor);
    default: return launch_mma<8, 3>(p, stream, smem_floor);
  }
}

std::atomic<int64_t> g_clean_launches{0};
void note_clean_launch() { g_clean_launches.fetch_add(1, std::memory_order_relaxed); }

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_mma_launches() { return gemv_detail::g_mma_launches.load(std::memory_order_relaxed); }
int64_t gemv_glu_order_launches() { return gemv_detail::g_glu_order_launches.load(std::memory_order_relaxed); }
int64_t gemv_nvfp4_lanes_launches() { return gemv_detail::g_lanes_launches.load(std::memory_order_relaxed); }
int64_t gemv_nvfp4_clean_launches() { return gemv_detail::g_clean_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
