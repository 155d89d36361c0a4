// Launch plans of the decode GEMV (gemv.cu), apart from the kernels so that a retune never
// touches kernel logic. Measured on the H200 (benches/h200.md, "Decode GEMV"); the rules
// below hold for other GPUs in shape, the constants are the H200's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::cuda {

struct GemvQ8Plan {
  int lanes;   // lanes per row: 4, 8, 16, 32 (each takes 64 elements per chunk)
  int rows;    // rows per lane (template instances: 1, 2, 4 for one token)
  int stages;  // cp.async chunks in flight per warp: 1..4
};

// One-token launches take the most rows per lane (each activation load then serves more
// rows) that still leave this many row groups, i.e. warps' worth of parallel work.
inline constexpr int64_t kGemvMinGroups = 1024;

inline int gemv_q8_min_lanes(GgmlType) { return 4; }

// Measured plans for the shapes the issue benchmarks (H200 run 3, NVFP4; the rule below
// picks within ~10% of them). n_out_max bounds the out rows (1: dense; MoE: slots).
struct GemvQ8Measured {
  GgmlType type;
  int64_t rows, k, n_tok, n_out_max;
  int lanes, rows_per_lane;
};
inline constexpr GemvQ8Measured kGemvQ8Measured[] = {
    // 14336x4096: 16/4 22.1 us, 32/4 23.6, 32/2 24.9.      4096x14336: 32/2 22.1, 32/4 24.1.
    {GgmlType::NVFP4, 14336, 4096, 1, 1, 16, 4},
    {GgmlType::NVFP4, 4096, 14336, 1, 1, 32, 2},
    // Batch 8: 14336x4096 16 lanes 62.5 us, 32 lanes 69.7.
    {GgmlType::NVFP4, 14336, 4096, 8, 1, 16, 2},
    // Qwen3-30B-A3B experts, 8 slots: gate 16/2 7.4 us, 32/4 8.0; down 8/2 8.6, 16/4 8.8.
    {GgmlType::NVFP4, 768, 2048, 1, 16, 16, 2},
    {GgmlType::NVFP4, 2048, 768, 1, 16, 8, 2},
    // 64 slots (8 tokens): gate 16/4 34.6 us, 32/4 39.3 (down: the rule's 4/4, 43.9, is best).
    {GgmlType::NVFP4, 768, 2048, 1, 64, 16, 4},
};

// The plan of the integer path for `rows` x `k` weights, n_tok tokens per out row, n_out
// out rows (1 for dense, token-slots or combined tokens for MoE) of n_sub sub-slots each
// (n_used for the combine, else 1).
//
// H200 run 2 (NVFP4, one token; lanes/rows): 14336x4096 32/4 26 us, 32/1 41 us, 8/1 39 us;
// 4096x14336 32/4 27 us, 32/1 39 us, 4/1 108 us; experts 768x2048 x8 32/4 8.4 us, 16/2
// 8.9 us; 2048x768 x8 16/4 9.2 us, 8/4 9.5 us, 4/1 11.2 us. Pipeline depth 2, 3 and 4 were
// within 1% everywhere. The combine with one token has only rows / (rows per group) groups:
// 4 lanes x 4 rows left 64 warps and took 80 us.
inline GemvQ8Plan gemv_q8_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_tok, int64_t n_out, int64_t n_sub) {
  // Depth: one chunk ahead (2 stages) was best or within 2% in runs 2 and 3; the combine's
  // short per-rank items get more.
  GemvQ8Plan pl{32, 1, n_sub > 1 ? 4 : 2};
  // Lanes: with plenty of row groups, the widest that leaves no lane idle on the last chunk
  // (12 units: 4 lanes); otherwise enough lanes for every unit of a row (12 units: 16 lanes,
  // 4 of them idle) so that a few slots still spread over many warps.
  const int64_t units = (k + 63) / 64;
  int snug = 32;
  while (snug > gemv_q8_min_lanes(type) && units % snug != 0) snug /= 2;
  if ((rows + 4 * (32 / snug) - 1) / (4 * (32 / snug)) * n_out >= 2 * kGemvMinGroups) {
    pl.lanes = snug;
  } else {
    pl.lanes = 32;
    while (pl.lanes > gemv_q8_min_lanes(type) && pl.lanes / 2 >= units) pl.lanes /= 2;
  }
  const int64_t slices = 32 / pl.lanes;
  for (const GemvQ8Measured& m : kGemvQ8Measured) {
    if (m.type == type && m.rows == rows && m.k == k && m.n_tok == n_tok && n_out <= m.n_out_max && n_sub == 1) {
      pl.lanes = m.lanes;
      pl.rows = m.rows_per_lane;
      return pl;
    }
  }
  if (n_tok == 1) {
    for (int r = 4; r >= 1; r /= 2) {
      pl.rows = r;
      if ((rows + r * slices - 1) / (r * slices) * n_out >= kGemvMinGroups) break;
    }
  } else {
    pl.rows = n_tok == 2 ? 4 : 2;
  }
  return pl;
}

// ---- NVFP4 integer path (gemv_nvfp4.cu) -----------------------------------------------

// kernel 1 "slab": a warp owns R rows; per step it streams a slab of 32 consecutive blocks of
// each row (R x 1152 bytes, 16-byte loads) and lane l computes block column l of all R rows.
// kernel 2 "packed", grouped rows shorter than 32 blocks: a work item is rows_per_item rows x
// n_sub slots (the combine's ranks, else 1) staged at once; lanes walk the (row, slot, block)
// list, up to kNvfp4PackBlocksPerLane blocks each. kernel 0: the generic integer kernel
// (gemv_q8.cu), also taken where the rows are not 4-byte aligned.
struct GemvNvfp4Plan {
  // 0 generic, 1 slab, 2 packed, 3 mma (gemv_mma.cu; rows / x_smem: its slab fallback)
  int kernel;
  int rows;    // slab: R (1, 2, 4); packed: rows per work item
  bool x_smem;  // activations copied to shared memory per CTA (when <= kNvfp4XSmemMax bytes)
  // One token, 16-byte aligned rows, activations from global memory only (other launches:
  // sign-split for 1-2 tokens, byte_perm for more, 4 blocks per SM): the E2M1 decoder (1
  // byte_perm, 2 sign-split permutes e2m1x8_pn) and the kernel's launch bound in 128-thread
  // blocks per SM (4, 5, 6, 8: <= 128 / 102 / 80 / 64 registers per thread).
  int decode = 2;
  int minb = 4;
  // mma kernel: warps per 16-row CTA (4, 8, 16) and cp.async stages per warp (2..4).
  int mma_warps = 8, mma_stages = 3;
  // The persistent mma kernel (gemv_mma_persist.cu) instead of kernel 3 / the slab: the sums of
  // kernel 3 at persist_fold warps; CTAs of persist_groups x persist_fold warps, stages.
  bool persist = false;
  int persist_fold = 4, persist_groups = 1, persist_stages = 2;
  // The warp-fed bulk-copy mma kernel (gemv_mma_tma.cu) instead of kernel 3, at its defaults
  // (the mma warps; a warp's steps in one chunk): kernel-3 shapes with k <= kNvfp4TmaMaxK.
  bool tma = false;
};
// The mma kernel (gemv_mma.cu) takes dense one-token launches with k % 256 == 0 (whole
// 4-block steps; 16-byte aligned rows, checked at launch) and at least this many rows (run 10:
// 2048, i.e. 128 CTAs of 16 rows; run 11: 4224, below). H200 run 10, us, routed slab plan -> mma at the rule's warps/stages:
// 14336x4096 14.80 -> 13.60, 4096x14336 14.34 -> 13.55, 6144x4096 10.90 -> 7.72, 4096x4096
// 6.91 -> 5.81, 28672x4096 27.56 -> 23.16, 5120x2048 4.36 -> 3.79, 2048x4096 4.67 -> 3.61.
// Fewer rows leave SMs idle (1024 rows = 64 CTAs; not measured): the slab kernel spreads them
// over a warp per row. End to end (run 10, the kernel forced at an earlier warps rule: qkv
// 6144x4096 / 5120x2048 at 8 warps) Llama-8B decoded 1.3% faster and Qwen3-30B-A3B 2% slower,
// far from what these kernel times add up to.
// Run 11 found why: those times are of launches back to back, where PDL lets each launch's
// weight prefetch overlap the previous GEMV. After a dependent kernel, as in a decode step
// (bench --experts "dep": quantize_act_q8 before each launch, its time subtracted), the 8-warp
// instances lose to the slab kernel: 4096x4096 8.24 us vs 6.40, 4096x14336 15.26 vs 14.95,
// 2048x4096 5.63 vs 4.86, while the 4-warp ones keep winning: 14336x4096 14.63 vs 16.24,
// 28672x4096 24.63 vs 28.79, 6144x4096 8.45 vs 9.79, 5120x2048 5.27 vs 5.49. So the plan takes
// the mma kernel only where its CTAs fill two per SM (4 warps by gemv_nvfp4_mma_shape: 264+
// CTAs of 16 rows on the H200's 132 SMs). By those figures Llama-8B's wo and down (-2.2 us a
// layer) and Qwen3-30B-A3B's wo (-0.8 us) go back to the slab kernel. End to end with this
// plan (H200, session 6 final runs): Llama-8B tg128 392.7-392.8, Qwen3-30B-A3B 373.3-374.8
// tok/s, against 384.1 / 372.0 with run 10's routing in an earlier call; no A/B in one call yet
// (FT_GEMV_NVFP4_MMA=1 sends every shape the kernel takes to it, =0 none).
// A fixed count (the H200's 132 SMs), not the device's: it also picks the weight layout at load (tiled or
// row-major, gemv_nvfp4_tile_wanted) and, through gemv_nvfp4_mma_shape, the warps a tile is split over --
// both fix the fp32 order of the sums, so every GPU gets the same bits from the same file.
inline constexpr int64_t kNvfp4MmaMinRows = 2 * 132 * 16;
// The expert GEMVs on tensor cores in these kernels' exact order (gate/up, gate+up in one
// launch, down + combine) lost on the H200 (run 11: gate 7.55 us vs the slab's 5.63, pair 11.76
// vs 2 x 5.63, down + combine 7.78 vs 7.17; Qwen3-30B-A3B tg128 367.1 / 359.1 vs 372.0 tok/s):
// 16-row tiles of 2 steps per warp are all prologue. Removed in session 7; the history keeps
// them (gemv_mma_experts.cu, gemv_mma_combine.cu, gemv_pair.cu).
// Warps per CTA and stages (run 10 sweep, 4/8/16 warps x 2/3/4 stages): 4 warps when the CTAs
// fill two per SM (14336x4096 4/2 13.60 us, 8/2 14.38, 16/2 18.90), else 8 (4096x14336 8/3
// 13.55, 4/2 15.98); never under 2 steps per warp (5120x2048, 8 steps: 4/3 3.79, 8/3 4.70);
// 2 stages only with 4+ steps per warp at 4 warps (14336x4096 4/2 13.60 vs 4/3 14.75; 4096x14336
// at 8 warps: 2 stages 18.22 vs 3 13.55, likely uneven CTAs per SM at 3 per SM).
inline void gemv_nvfp4_mma_shape(int64_t rows, int64_t k, int& warps, int& stages) {
  const int64_t ctas = (rows + 15) / 16, steps = k / 256;
  warps = ctas >= 2 * 132 ? 4 : 8;
  while (warps > 4 && steps / warps < 2) warps /= 2;
  stages = warps == 4 && steps / warps >= 4 ? 2 : 3;
}
// The persistent kernel (gemv_mma_persist.cu; H200 run 13, benches/h200.md, dep mode = after a
// dependent quantiser, us): it LOSES on every dense decode shape of Llama-8B / Qwen3-30B-A3B at
// the plan's fold/stages -- 14336x4096 16.95 vs mma 14.82, 28672x4096 31.24 vs 24.87, 6144x4096
// 10.49 vs 8.42, 5120x2048 6.51 vs 5.09 -- and its best instance stays behind the plan at
// 2048x4096 (16/1/3 4.88 vs slab 4.77); end to end with it routed there Llama-8B tg128 351.1 vs
// 394.3 tok/s, Qwen3-30B-A3B 374.6 vs 384.8 (same call). So it is routed only where it won: an
// NVFP4 output head of 248320 x 2048 (Qwen3.6's), 4 warps x 4 groups x 2 stages 95.62 us vs the
// mma kernel's 103.90 (the 128256x4096 head: 96.71 vs 94.86, not routed).
struct GemvNvfp4PersistMeasured {
  int64_t rows, k;
  int fold, groups, stages;  // fold 0: not the persistent kernel
};
inline constexpr GemvNvfp4PersistMeasured kNvfp4PersistMeasured[] = {
    {248320, 2048, 4, 4, 2},
};
inline void gemv_nvfp4_persist_shape(int64_t rows, int64_t k, GemvNvfp4Plan& pl) {
  pl.persist = false;
  pl.persist_fold = pl.mma_warps;
  pl.persist_groups = 1;
  pl.persist_stages = pl.mma_stages;
  for (const GemvNvfp4PersistMeasured& m : kNvfp4PersistMeasured) {
    if (m.rows == rows && m.k == k) {
      pl.persist = m.fold > 0;
      pl.persist_fold = m.fold, pl.persist_groups = m.groups, pl.persist_stages = m.stages;
      return;
    }
  }
}

// The warp-fed bulk-copy mma kernel (gemv_mma_tma.cu; H200 session 13, ft-bench-gemv-cuda
// --experts, us back to back / after a dependent quantiser, the plan -> the kernel at its
// defaults): 5120x2048 3.88 / 5.09 -> 3.96 / 4.74, 2048x4096 4.50 / 4.65 -> 3.48 / 5.31, 4096x4096
// 5.75 / 6.40 -> 5.66 / 7.68, 6144x4096 7.43 / 8.44 -> 7.10 / 9.53, 28672x4096 23.54 / 24.81 ->
// 26.30 / 28.44, 14336x4096 13.71 / 14.80 -> 14.62 / 17.14; other chunkings (2-8 steps, 1-2 in
// flight, 4 / 8 warps) no better after a dependent kernel. End to end (one call, alternating):
// Qwen3-30B-A3B (its qkv 5120x2048 routed) tg128 406.05 / 406.07 vs 402.92 / 403.02; Llama-8B
// (qkv 6144x4096, gate/up 28672x4096 routed) 370.9 / 373.6 vs 394.9 / 393.9. So: k <= 2048 only.
inline constexpr int64_t kNvfp4TmaMaxK = 2048;

// Dense NVFP4 projections the GPU stores tiled (cuda/nvfp4_tiled.h, gpu/weights.cpp): those the
// one-token plan gives gemv_mma.cu's kernel (rows >= kNvfp4MmaMinRows, k above the bulk-copy
// kernel's kNvfp4TmaMaxK), and the long-k ones of 4096+ rows, which run faster as the tiled
// tensor-core kernel than as the slab. H200 session 19 (ft-bench-gemv-cuda --experts, after a
// dependent quantiser): 4096x14336 14.11 us tiled vs the slab's 14.97, 4096x4096 7.92 vs 6.44
// (stays row-major for the slab); end to end, Llama-8B tg128 414.7 / 414.0 / 416.1 tiled vs
// 402.5 / 402.4 / 402.9 row-major (+3.1%, the same 32 greedy tokens), while Qwen3-30B-A3B's
// 5120x2048 qkv on the bulk-copy kernel lost a little tiled (400.9 / 399.7 vs 402.1 / 401.3), and
// on gemv_mma.cu at 4 x 2 (4.53 us tiled against the bulk-copy kernel's 4.82 row-major, call 4)
// gained nothing measurable (call 5: 401.8 / 401.4 / 399.8 vs 399.9 / 400.2 / 401.0) while its
// other fp32 order changed the synthetic model's greedy tokens: k <= kNvfp4TmaMaxK stays row-major.
inline bool gemv_nvfp4_tile_wanted(int64_t rows, int64_t k) {
  return (rows >= kNvfp4MmaMinRows && k > kNvfp4TmaMaxK) || (rows >= 4096 && k >= 8192);
}
// The one-token kernel of a tiled weight: gemv_mma.cu at gemv_nvfp4_mma_shape's warps, and at 4
// warps 2 stages. H200 session 19, ft-bench-gemv-cuda --tiled (dep, us, warps/stages): 28672x4096
// 4/2 23.44, 4/3 24.60, 8/2 26.28; 14336x4096 4/2 13.71, 4/3 15.71; 6144x4096 4/2 8.06, 4/3 8.73;
// 5120x2048 4/2 4.53, 4/3 5.01, the bulk-copy kernel 4.88-7.00 at every warps x chunk x stages;
// 4096x14336 8/3 14.23, 16/2 14.74, 4/2 17.90.
inline void gemv_nvfp4_tiled_mma(int64_t rows, int64_t k, int& warps, int& stages) {
  gemv_nvfp4_mma_shape(rows, k, warps, stages);
  if (warps == 4) stages = 2;
  // 8 warps of 7+ steps each (Llama-8B's down projection, 4096x14336) at 4 stages, not 3, since the
  // tiled kernel's m16n8k32 (H200 session 30 call 2, tg128 alternating, FT_GEMV_NVFP4_TILED_PLAN):
  // 518.93 / 520.16 / 520.98 against 516.99 / 516.80 / 517.00 tok/s (+0.6%); 4 warps x 2 stages
  // ~457.5. The same warps, so the same steps a warp in the same order: the same bits.
  if (warps == 8 && k / 256 >= 7 * 8) stages = 4;
}

// The batch tensor-core GEMV's cp.async stages a warp (gemv_mma_batch.cu), by the one-token plan's warps it takes
// and the tokens. H100 session 53 call 1 (`ft-bench-gemv-cuda --batch`, back to back from HBM, us at 2 / 3 / 4 / 6 / 8
// tokens, stages 2 | 3 | 4):
//   4 warps: 28672x4096 28.11 | 31.30 | 32.26, 31.66 | 32.72 | 38.68, 35.06 | 37.52 | 43.29, 51.76 | 53.61 | 65.66,
//            64.71 | 70.17 | 74.62; 6144x4096 9.20 | 9.76 | 10.08, 10.18 | 12.44 | 10.94, 12.96 | 11.44 | 11.56,
//            15.51 | 15.66 | 14.45, 14.84 | 15.29 | 16.19 -- 2 stages best or near it throughout;
//   8 warps: 4096x14336 20.35 | 16.78 | 16.62, 19.61 | 18.95 | 26.68, 20.88 | 28.34 | 28.94, 37.22 | 37.41 | 38.92,
//            42.68 | 43.09 | 44.42; 4096x4096 6.62 | 6.94 | 7.05, 7.45 | 8.49 | 7.86, 8.40 | 8.58 | 8.02, 11.18 | 9.92 |
//            10.03, 9.84 | 10.71 | 10.72 -- 3 stages at 2-3 tokens (a warp's one step in flight at 2 is short of
//            bytes), 2 from 4 tokens on (more stages x more activation rows: fewer CTAs an SM).
// A Llama-8B layer's four at 2 tokens: 61.0 us against session 52's table (3 stages at 4 warps, 2 at 8) 68.0.
inline int gemv_nvfp4_batch_stages(int warps, int n_tok) { return warps == 8 && n_tok <= 3 ? 3 : 2; }

// The lane-major tiled layout (cuda/nvfp4_tiled.h "Lanes") for scanned-clean NVFP4 projections, by the GPU's peak
// DRAM bandwidth (cuda/device.h peak_dram_gbs): it cuts the tensor-core GEMV's own work (4 LDS.128 a step where
// the tiled kernel gathers words), which holds the GEMVs where HBM outruns it, and costs a little where HBM holds
// them. H200 (4,915 GB/s peak) session 54, Llama-8B NVFP4 tg128, FT_NVFP4_LANES=0 / 1 alternating: 5 rounds
// 517.70 -> 527.42 tok/s (+1.9%, t 4.1), 7 more 514.68 -> 524.12 (+1.8%, every round); pp512 21,127 -> 21,402;
// Qwen3-30B-A3B 534.51 -> 535.74 (+0.2%, t 0.9); kernels from HBM 4096x14336 9.83 -> 9.68 us, 28672x4096 18.25 ->
// 18.07. H100 (3,352) session 50 call 2, 8 rounds: tg128 468.29 -> 464.86 (-0.7%, t -2.1), pp512 -1.9% (session
// 51). Consumer GPUs (~1 TB/s) are HBM-held like the H100.
inline constexpr double kNvfp4LanesMinGbs = 4000.0;
inline bool nvfp4_lanes_default(double peak_gbs) { return peak_gbs >= kNvfp4LanesMinGbs; }

// A tiled one-token launch released under a large GEMV (GemvArgs::after_gemv): at least this much
// dynamic shared memory a CTA -- at most 4 CTAs an SM -- where its tiles fit one wave at 4 an SM.
// Why: PDL places the CTAs of a launch released under the down projection as that launch's CTAs
// retire, up to 8 an SM on the SMs freed first, and the launch runs on a few SMs. H200 session 32
// call 1, Llama-8B tg128 alternating, the attention norm skipped (the qkv GEMV, 6144x4096, right
// after the down projection): 490.7 tok/s uncapped, 531.9 at 56 KB (4 an SM), 530.9 at 72 KB
// (3); with the norm kept the cap changed nothing (518.7 against 517.8).
inline constexpr int kNvfp4AfterGemvSmem = 56 << 10;
// ... and that capped launch at 4 warps takes 3 stages, not gemv_nvfp4_tiled_mma's 2: two of a warp's steps
// load before its PDL wait (under the down projection's tail) and the ring runs one step further ahead. It
// fits the floor, so the CTAs an SM stay at 4. H100 session 43 call 2 (bench/session43/h200_b.sh), Llama-8B
// tg128 5 rounds alternating (FT_GEMV_NVFP4_TILED_PLAN="6144x4096=4,S,57344"): 2 stages 458.14, 3 stages
// 463.64 (+1.2%, faster every round), 4 stages 458.43, 4 stages with one before the wait and two right after
// it 450.32. (H200 session 41's "6144x4096=4,3" at -4.4% had dropped the floor: the plan's SMEM field was 0.)
// Asked again eagerly loaded (session 45: lazy placement alone moves Llama-8B by up to 2%), H100 session 46
// call 2, 10 rounds: 3 stages 462.25 (sd 3.48) against 2 stages 457.07 (sd 3.25), +1.1%.
// The same warps, so each warp's steps in the same order: the same bits.
inline constexpr int kNvfp4AfterGemvStages = 3;
// A dense decode layer's wo launch streams this much of the head of the tiled gate|up into L2 before its
// PDL wait (GemvArgs::l2_ahead, gpu/forward.cpp; FT_FFN_L2_AHEAD=MB overrides, 0 off). H100 session 42,
// Llama-8B tg128 alternating, the same 64 greedy tokens: call 2, 3 rounds, 0 / 8 / 16 / 24 / 32 MB 452.76 /
// 458.01 / 455.86 / 454.03 / 451.38 tok/s; call 3, 4 rounds, 0 / 4 / 8 / 12 MB 452.64 / 455.28 / 458.21 /
// 456.50 (8 MB +1.2%, best in every round). Eagerly loaded (H100 session 46 call 2, 10 rounds): 8 MB 462.25
// (sd 3.48) against off 453.84 (sd 3.88), +1.9%. Not yet measured on an H200 (a larger L2 and faster HBM).
inline constexpr int64_t kFfnL2AheadBytes = int64_t{8} << 20;

// A tiled one-token launch: gemv_nvfp4_tiled_mma's warps and stages; released under a large GEMV
// (after_gemv) at 4 warps with its tiles one wave at 4 CTAs an SM of the device's `sms`, kNvfp4AfterGemvSmem's
// floor and kNvfp4AfterGemvStages (the same warps: the same bits on any GPU). smem: the floor of dynamic shared
// memory a CTA (0: the kernel's own).
struct TiledLaunch {
  int warps = 0, stages = 0, smem = 0;
};
inline TiledLaunch gemv_nvfp4_tiled_launch(int64_t rows, int64_t k, bool after_gemv, int sms) {
  TiledLaunch t;
  gemv_nvfp4_tiled_mma(rows, k, t.warps, t.stages);
  if (after_gemv && t.warps == 4 && (rows + 15) / 16 <= 4 * int64_t{sms}) {
    t.smem = kNvfp4AfterGemvSmem;
    t.stages = kNvfp4AfterGemvStages;
  }
  return t;
}

// Activations in shared memory: 0-10% slower than L1-cached global reads with the byte_perm
// decoder (H200 run 5); with the sign-split decoder the dense one-token shapes gain (run 8:
// 14336x4096 14.04 vs 15.46 us, 4096x14336 14.58 vs 14.56) and the expert ones still lose
// (gate 6.95 vs 6.22, down 7.23 vs 6.41), so plans take them for dense single tokens only.
// (Those launches now take the lean slab kernel, which reads global memory whatever the plan
// says: session 28, gemv_nvfp4.cu; the plan's x_smem still steers the slab kernel.)
inline constexpr int64_t kNvfp4XSmemMax = 36 << 10;
// ... and only for rows of at most this many elements (likely why: every CTA copies the row,
// k * 1.25 bytes, from L2: 528 CTAs x 17.9 KB = 9.5 MB beside 33 MB of weights at k 14336).
// H200 run 9 (same binary, one token): 14336x4096 R 4 14.57 us shared vs 14.86 global;
// 4096x14336 R 2 14.64 shared vs 13.97-13.99 global.
inline constexpr int64_t kNvfp4XSmemMaxK = 8192;
// Grouped one-token slab launches whose R = 2 work items all fit in one wave of warps at
// 6 blocks of 4 warps per SM (132 SMs: 3168) take R = 2 at that launch bound: run 8, experts
// gate 768x2048 x8 (3072 items) 5.47 us against 6.22-6.59 for R 1 / 2 / 4 at 4 blocks and
// 6.3-8.8 for the other bounds. (The routed pair of the lean kernel with one slab a row now takes
// 4 blocks instead: session 28, gemv_nvfp4.cu.)
inline constexpr int64_t kNvfp4OneWaveWarps = 132 * 6 * 4;
inline constexpr int kNvfp4PackBlocksPerLane = 4;
// Work items (warps' worth of parallel work) below which the slab kernel takes fewer rows
// per warp: the H200 holds ~2100 warps of this kernel at once.
inline constexpr int64_t kNvfp4MinItems = 2048;

// Rows per packed work item for rows of nb blocks and n_sub slots: the smallest count whose
// blocks fill the most of the lanes' slots (32 lanes x ceil(blocks / 32)), with at most 32
// pieces (one base pointer per lane) and 4 blocks per lane; 0 when none fits.
// 2048x768 (nb 12): combine of 8 slots -> 1 row (96 blocks, 3 per lane), single slot -> 8.
inline int gemv_nvfp4_pack_rows(int64_t nb, int n_sub, int64_t rows) {
  int best = 0;
  double best_fill = 0;
  for (int rb = 1; rb <= 32 && rb <= rows; ++rb) {
    const int64_t pieces = static_cast<int64_t>(rb) * n_sub, blocks = pieces * nb;
    if (pieces > 32 || blocks > 32 * kNvfp4PackBlocksPerLane) break;
    const double fill = static_cast<double>(blocks) / static_cast<double>(32 * ((blocks + 31) / 32));
    if (fill > best_fill + 1e-9) best = rb, best_fill = fill;
  }
  return best;
}

// The plan for `rows` x `k` NVFP4 weights: n_tok tokens per out row, n_out out rows (1 dense;
// slots, or tokens for the combine), n_sub slots per out row (combine: n_used, else 1).
inline GemvNvfp4Plan gemv_nvfp4_plan(int64_t rows, int64_t k, int64_t n_tok, int64_t n_out, int n_sub,
                                     bool grouped) {
  const int64_t nb = k / 64;
  if (grouped && nb < 32) {
    const int rb = gemv_nvfp4_pack_rows(nb, n_sub, rows);
    if (rb > 0) return {2, rb, false};
  }
  // H200 runs 4-5, us (R = 1 / 2 / 4): 14336x4096 24.8 / 21.8 / 19.9, batch 8 - / 56.8 / 52.1;
  // 4096x14336 22.1 / 18.1 / 18.3, batch 8 - / 51.6 / 65.7; experts 768x2048 x8 7.7 / 7.0 /
  // 7.0, 64 slots - / 35.5 / 31.2. The rule below picks the best or within 1% of it each time
  // (R = 4 with 8 tokens spills ~0.5 KB per thread and still wins at 14336 rows). Run 8
  // (sign-split decoder, one token, activations from global memory, 4 blocks per SM):
  // 14336x4096 20.1 / 17.6 / 15.5, 4096x14336 24.0 / 14.6 / 17.2: the same choice.
  GemvNvfp4Plan pl{1, 1, false};
  for (int r = 4; r >= 1; r /= 2) {
    pl.rows = r;
    if ((rows + r - 1) / r * n_out >= kNvfp4MinItems) break;
  }
  if (n_tok > 1 && pl.rows < 2) pl.rows = 2;  // instances for several tokens: R = 2, 4
  if (!grouped && n_tok == 1 && k <= kNvfp4XSmemMaxK) pl.x_smem = true;
  if (grouped && n_tok == 1 && (rows + 1) / 2 * n_out <= kNvfp4OneWaveWarps) pl.rows = 2, pl.minb = 6;
  if (!grouped && n_tok == 1 && nb % 4 == 0 && rows >= kNvfp4MmaMinRows) pl.kernel = 3;
  gemv_nvfp4_mma_shape(rows, k, pl.mma_warps, pl.mma_stages);
  if (!grouped && n_tok == 1 && nb % 4 == 0) gemv_nvfp4_persist_shape(rows, k, pl);
  pl.tma = pl.kernel == 3 && !pl.persist && k <= kNvfp4TmaMaxK;
  return pl;
}

// The lean kernels' launch bounds (gemv_nvfp4_lean.cu), apart from the plan's minb, which still
// steers the slab kernel those launches fall back to.
//
// The routed one-token expert pair (ROUTE + XR + SS, rows of one slab: one_slab) at 4 blocks an SM,
// not the plan's one-wave 6. H200 session 28 call 2, Qwen3-30B-A3B tg128 alternating
// (FT_GEMV_NVFP4_EXPERT_PLAN=R,B): 2,4 525.01 / 525.87 / 524.95 against 2,6 519.35 / 516.53 / 519.94
// tok/s (+1.2%); 1,6 ~511, 1,4 ~508, 4,4 ~504; the same 64 greedy tokens.
inline int gemv_nvfp4_lean_routed_minb(bool one_slab, const GemvNvfp4Plan& pl) {
  return one_slab && pl.rows == 2 && pl.minb == 6 ? 4 : pl.minb;
}
// The dense one-token form reading activations from global memory, at 1 or 2 rows an item: 8 blocks an
// SM, not the plan's 4. H200 session 30, tg128 alternating (FT_GEMV_NVFP4_DENSE_PLAN=R,0,B), wo: call 1,
// B 6 against 4, Llama-8B (R 2) 503.86 / 499.00 / 500.62 against 495.44 / 498.72 / 496.56 tok/s (+0.9%),
// Qwen3-30B-A3B (R 1) 529.94 / 530.86 / 530.63 against 528.38 / 525.00 / 529.70 (+0.5%); call 2, B 8
// against 6, Qwen3-30B-A3B 532.47 / 532.35 / 532.26 against 530.57 / 530.38 / 528.41 (+0.5%), Llama-8B
// 517.07 / 518.03 / 516.82 against 516.99 / 516.80 / 517.00 (even); the same 64 tokens.
inline int gemv_nvfp4_lean_dense_minb(const GemvNvfp4Plan& pl) {
  return pl.minb == 4 && pl.rows <= 2 ? 8 : pl.minb;
}

// Forces the NVFP4 plan (tests, benchmarks; process-wide, not thread-safe): kernel -1 = the
// plan's, 0/1/2/3 as above, 4 the persistent mma kernel (a kernel that cannot take the shape falls back to the generic one);
// rows 0 = the plan's; x_smem 0 = the plan's, 1 = activations from global memory, 2 = from
// shared memory where they fit. Defined in gemv.cu.
void gemv_set_nvfp4_override(int kernel, int rows, int x_smem);
// Forces the decoder (0 = the plan's, 1 byte_perm, 2 sign-split) and launch bound (0 = the
// plan's, 4 / 5 / 6 / 8 blocks per SM) of the one-token NVFP4 kernels (benchmarks, tests).
void gemv_set_nvfp4_variant(int decode, int minb);
// Forces the mma kernel's warps per CTA (4, 8, 16) and stages (2..4; 0 = the plan's).
void gemv_set_nvfp4_mma(int warps, int stages);
// Forces the persistent kernel's groups per CTA (1, 2, 4; 0 = the plan's, -1 = the plan with the
// persistent kernel off) and stages (2..6; 0 = the plan's); its fold is the mma warps
// (gemv_set_nvfp4_mma). Kernel 4 in gemv_set_nvfp4_override forces it.
void gemv_set_nvfp4_persist(int groups, int stages);
// Launches of the mma kernel so far (tests and benchmarks check that it ran).
int64_t gemv_nvfp4_mma_launches();
// ... of them, gate|up launches in SwiGLU block order (gemv_mma.cu GO; tests).
int64_t gemv_glu_order_launches();
// Tensor-core launches (gemv_mma.cu, gemv_mma_tma.cu) of the instances without the NaN codes' fix-up
// (GemvArgs::scales_clean; tests).
int64_t gemv_nvfp4_clean_launches();
// ... of them, on lane-major tiled weights (gemv_mma.cu LANES; tests).
int64_t gemv_nvfp4_lanes_launches();
// The tensor-core GEMV of 2..8 tokens on tiled weights (gemv_mma_batch.cu; on by default, each token's rows
// those of the one-token launch): false sends those launches back to the slab kernel; stages 2..4 force its
// cp.async stages (0: gemv_nvfp4_batch_stages). FT_GEMV_NVFP4_MMA_BATCH=0 / =S sets them at start-up. In gemv.cu.
void gemv_set_nvfp4_mma_batch(bool on, int stages = 0);
// Its grid: one wave of CTAs walking the tiles (true, the default) or a CTA a tile (FT_GEMV_NVFP4_BATCH_WAVE=0);
// the same bits. In gemv.cu.
void gemv_set_nvfp4_batch_wave(bool on);
// Launches of it so far.
int64_t gemv_nvfp4_mma_batch_launches();
// Grouped gate/up pairs (GemvArgs::w_pair) launched as one slab kernel so far.
int64_t gemv_nvfp4_pair_launches();
// Launches of the persistent mma kernel so far.
int64_t gemv_nvfp4_persist_launches();
// The warp-fed bulk-copy mma kernel (gemv_mma_tma.cu): mode 0 the plan (GemvNvfp4Plan::tma), -1
// never, 1 where the plan has the mma kernel, 2 on every one-token dense shape it takes; warps 4 or 8 (0: the plan's mma
// warps), chunk steps 2 / 4 / 8 and stages 1 / 2 (0: its defaults). FT_GEMV_NVFP4_TMA=MODE[,W,J,S]
// sets it at start-up. Defined in gemv.cu.
void gemv_set_nvfp4_tma(int mode, int warps, int chunk, int stages);
// Launches of the warp-fed bulk-copy kernel so far.
int64_t gemv_nvfp4_tma_launches();
// The lean one-token expert kernels (gemv_nvfp4_lean.cu; on by default, the same bits as the
// slab / packed kernels they replace): false sends those launches back to the slab / packed
// kernels. FT_GEMV_NVFP4_EXPERTS=0 sets it off at start-up. Defined in gemv.cu.
void gemv_set_nvfp4_experts(bool on);
// Launches of the lean expert kernels so far; of them, those that routed in the launch
// (GemvArgs::route_logits).
int64_t gemv_nvfp4_experts_launches();
int64_t gemv_nvfp4_route_launches();
// The lean slab kernel on dense one-token launches the plan gives the slab kernel (the same bits):
// false sends them back to the slab kernel. FT_GEMV_NVFP4_LEAN_DENSE=0 sets it off at start-up.
void gemv_set_nvfp4_lean_dense(bool on);
// Launches of the lean slab kernel on dense weights so far.
int64_t gemv_nvfp4_lean_dense_launches();
// Launches of the lean dense kernel's L2-ahead instances (GemvArgs::l2_ahead taken).
int64_t gemv_nvfp4_l2_ahead_launches();
// Runs the NVFP4 decoders of the device on n words (tests diff them against the host):
// out[8i..8i+3] = e2m1x8_pn(in[i]) (p_lo, p_hi, n_lo, n_hi), out[8i+4..8i+7] = the bits of
// nvfp4_scales(in[i]). Device pointers. Defined in gemv_nvfp4.cu.
void gemv_nvfp4_decode_probe(const uint32_t* in, uint32_t* out, int n, cudaStream_t stream = nullptr);

}  // namespace ft::cuda
