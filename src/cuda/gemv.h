// Decode GEMV on the GPU: the CUDA twin of quant::matmul_ref for 1..8 tokens.
//
//   Y[t][r] = round( (sum_k W[r][k] * X[t][k]) * s_r )      r < rows, t < n_tok
//   s_r     = (row_scale ? row_scale[r] : 1) * scale * (bank ? bank[e*4 + bank_col] : 1)
//
// (accumulate: Y[t][r] += round(...) instead, which fuses a residual add.)
//
// Two paths:
//   float (xq == nullptr): weights stay in their GGUF block format and are dequantised in
//     registers; X and the accumulators are fp32: exact fp32 math up to summation order, the
//     scale meets the fp32 sum before the optional rounding (quant::detail::matmul_finish).
//   integer (xq != nullptr and gemv_q8_supported(type)): X was quantised once by
//     quantize_act_q8 (cuda/act_q8.h: blocks of 32 int8 with an fp32 scale, like llama.cpp's
//     CUDA MMVQ); weights are decoded to int8, dp4a-accumulated per block, and block scales
//     applied in fp32. x is ignored. Twin: gemv_q8_ref (cuda/gemv_q8_ref.h).
//
// Grouped (MoE decode) mode, ids != nullptr: n_tok counts token-slots (any number). Slot s
// multiplies expert ids[s] (read on the device) -- whose rows start at w + ids[s]*expert_bytes
// -- by X row s / x_div (x_div = n_used for gate/up, whose slots share their token's input;
// 1 for down, whose input is per slot), writes Y row s, and scales by column bank_col of the
// per-expert scale bank [n_expert][4] = (gate, up, down, 1).
//
// Grouped combine (the MoE down projection fused with the weighted sum of the experts),
// ids and slot_w set: the n_tok slots are T = n_tok / n_used tokens of n_used ranks, and
//   Y[t][r] (=, or += with accumulate) round( sum_{j < n_used, in rank order}
//                                        round(dot_{t,j}[r] * s_{t,j}[r]) * slot_w[t*n_used + j] )
// with fp32 products and sums rounded one operation at a time (no FMA), exactly the CPU
// engine's moe combine; one CTA owns a row range for all ranks of a token (no atomics).
//
// Types: F32, F16, BF16, Q8_0, Q4_K, Q6_K, MXFP4, NVFP4 (gemv_supported); the integer path
// for Q8_0, Q4_K, Q6_K, MXFP4, NVFP4. k must be a multiple of 32 and of the block size; X
// must be 16-byte aligned with ldx % 4 == 0 (xq: as quantize_act_q8 wrote it). Any row
// stride works; rows aligned to 16 (8, 4) bytes take the cp.async staging path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/l2_ahead.h"
#include "cuda/round.h"
#include "format/ggml_type.h"

namespace ft::cuda {

inline constexpr int kGemvMaxTokens = 8;

using GemvRound = Round;  // cuda/round.h

struct GemvArgs {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;  // device: row 0 (of expert 0 in grouped mode)
  int64_t row_bytes = 0;       // stride between rows
  int64_t k = 0;               // elements per row
  int64_t rows = 0;
  const float* x = nullptr;  // device: X[t][k] at x + t*ldx
  int64_t ldx = 0;
  int64_t n_tok = 1;  // tokens (1..8), or token-slots in grouped mode
  float* y = nullptr;  // device: Y[t][r] at y + t*ldy + r
  int64_t ldy = 0;
  const float* row_scale = nullptr;  // device, {rows}; nullptr: none
  float scale = 1.0f;
  GemvRound round = GemvRound::kNone;
  // Grouped mode (MoE decode).
  const int32_t* ids = nullptr;  // device, {n_tok}
  int64_t expert_bytes = 0;      // stride between experts
  int64_t x_div = 1;
  const float* bank = nullptr;  // device, [n_expert][4]; nullptr: none
  int bank_col = 0;
  // Integer path: X quantised by quantize_act_q8 (k and the token rows of this call; in
  // grouped mode the rows are s / x_div). nullptr: the float path.
  const void* xq = nullptr;
  // Epilogue: add to Y instead of storing.
  bool accumulate = false;
  // Grouped combine (see above): device, {n_tok} rank weights; n_used ranks per token.
  const float* slot_w = nullptr;
  int n_used = 0;
  // This call's plan, for a caller whose rows must carry another launch's summation order
  // (the hybrid MoE backend's per-route down projection takes the combine's): integer-path
  // lanes per row (0: the table's, or gemv_set_lanes_override), NVFP4 kernel (-1: the plan's,
  // or gemv_set_nvfp4_override), as those knobs but for this call only (thread-safe).
  int plan_lanes = 0;
  int plan_nvfp4_kernel = -1;
  // Grouped, no combine: a second tensor of the same shape, type and strides (up beside gate)
  // in the same call: its rows are written w_pair_y_off floats past y's, scaled by bank column
  // bank_col + 1. One launch where the NVFP4 slab kernel takes the call (its work items of both
  // tensors in one grid: the same bits as two calls), else two calls.
  const uint8_t* w_pair = nullptr;
  int64_t w_pair_y_off = 0;
  // Grouped, one token (its n_tok ranks), integer path, no combine: the routing is still to be
  // done. The call routes route_logits (route_n_expert fp32 logits; the top n_tok experts and
  // their weights with moe_route's bits) into route_ids / route_w -- ids must be route_ids -- and
  // reads its experts from that routing. The lean NVFP4 slab kernel routes in its own CTAs (each
  // CTA's first warp; CTA 0 writes the ids and weights out for later launches), so the router
  // launch before it only writes logits (moe_norm_router_route's route = false); any other path
  // runs moe_route first.
  const float* route_logits = nullptr;
  int64_t route_n_expert = 0;
  int32_t* route_ids = nullptr;
  float* route_w = nullptr;
  // Grouped: the ids were written at least two launches before this one (every launch between
  // waits on its predecessor before it lets its dependents start: cuda/pdl.cuh's contract), so
  // the NVFP4 slab / packed kernels read them, and stream the first weights of the chosen
  // experts, before their PDL wait. Off: the ids may come from the launch right before.
  bool ids_early = false;
  // Dense gate|up of one token (rows = 2 n_ff, gate rows then up rows, n_ff % 32 == 0, no
  // accumulate): also the SwiGLU of y[0, n_ff) and y[n_ff, 2 n_ff), rounded as swiglu_q8 rounds,
  // into glu_h (n_ff floats) and its Q8 copy into glu_xq (an act_q8 row of k = n_ff): swiglu_q8's
  // bytes. The tensor-core kernel of a tiled weight does it in its epilogue (the CTA completing a
  // 32-row block of both halves; glu_count: n_ff / 32 counters, zero, left zero), any other path
  // by swiglu_q8 after the product. One launch fewer a dense layer.
  void* glu_xq = nullptr;
  float* glu_h = nullptr;
  unsigned* glu_count = nullptr;
  // Accumulate: y was written at least two launches before this one (the residual stream under
  // the wo / down projection), so the NVFP4 slab and lean kernels (one token, dense), the packed
  // combine and the tiled tensor-core kernel read it, for their first rows, before their PDL
  // wait: the add's L2 round trip leaves the launch's tail. Off: y may come from the launch
  // right before.
  bool y_early = false;
  // The norm fold (cuda/norm_fold.h), one token, dense, integer path, no rounding (Round::kNone).
  // Producer (accumulate: y is the residual row, rows <= kNormFoldMaxN, rows % 32 == 0): also
  // Q8(y * nq_w) with raw block scales into nq_xq (an act_q8 row of k = rows) and each 32-row
  // block's sum of squares into nq_part (rows / 32 doubles); nq_count: rows / 32 counters, zero,
  // left zero. The tiled tensor-core kernel and the lean dense kernel do it in their tails, any
  // other path by norm_fold_produce after the product.
  const float* nq_w = nullptr;
  void* nq_xq = nullptr;
  double* nq_part = nullptr;
  unsigned* nq_count = nullptr;
  // Consumer: xq is such a row (k <= kNormFoldMaxN) and norm_part its blocks' sums: the product
  // is that of the normalised row (RMSNorm with epsilon norm_eps; the weight already applied).
  // The tiled tensor-core kernel scales the row's block scales as it loads them; any other path
  // gets norm_fold_apply on xq (in place) first.
  const double* norm_part = nullptr;
  float norm_eps = 0.0f;
  // The launch right before this one is a large GEMV (no one-CTA launch between them): PDL
  // releases this launch's CTAs onto the SMs that GEMV frees first, and the tiled tensor-core
  // kernel caps its CTAs an SM where it fits one wave at the cap (gemv_tuning.h,
  // gemv_nvfp4_tiled_launch).
  bool after_gemv = false;
  // Weights of a later launch this one streams into L2 before its PDL wait, each CTA a share
  // (cuda/l2_ahead.h): the lean dense one-token kernel's global-activation instances (a decode
  // layer's wo) take it, other kernels ignore it. Hints only: the same bits.
  L2Ahead l2_ahead;
  // NVFP4, dense, integer path: w is in the tiled layout (cuda/nvfp4_tiled.h); the one-token
  // tensor-core GEMVs and the slab kernel take it, anything else throws.
  bool tiled = false;
  // With tiled: the pieces lane-major (nvfp4_tiled.h "Lanes"; needs scales_clean for the tensor-core GEMV).
  bool lanes = false;
  // NVFP4: the caller vouches that no UE4M3 block scale byte of w is 0x7F or 0xFF (the NaN codes,
  // decoded 0 and 480; gpu/weights.cpp scans every dense NVFP4 projection at upload, cuda/nvfp4_scan.h).
  // The tensor-core GEMVs then decode scales without the codes' fix-up (gemv_q8_formats.cuh
  // nvfp4_scales2): the same bits where the promise holds, wrong scales where it does not.
  bool scales_clean = false;
};

bool gemv_supported(GgmlType t);
// Types with an integer (xq) kernel.
bool gemv_q8_supported(GgmlType t);

// Enqueues the product on `stream`; throws ft::Error for unsupported types/shapes.
void gemv(const GemvArgs& a, cudaStream_t stream = nullptr);
// Launches on this thread whose kernel made the norm fold's producer half in its tail (tests).
int64_t gemv_norm_fold_tails();

// Tuning knobs for tests and benchmarks (process-wide, not thread-safe; 0 / -1 = the tuning
// table, cuda/gemv_tuning.h): the cp.async pipeline depth (chunks in flight per warp, 1..4),
// and for the integer path the lanes per row (4, 8, 16, 32) and rows per lane (1, 2, 4;
// one-token launches).
void gemv_set_stages_override(int stages);
// GemvArgs::glu_xq's gate|up tile order: 1 block order, 0 row order, -1 FT_GLU_ORDER's (block order unless 0).
void gemv_set_glu_order(int order);
void gemv_set_lanes_override(int lanes);
void gemv_set_rows_override(int rows);

}  // namespace ft::cuda
