// One-token MoE experts in one launch (decode, NVFP4 gate / up / down banks on the integer path):
// gate and up of every chosen expert, SwiGLU and its Q8 copy, then the down projection with the
// routing-weighted combine added into the residual row -- the work of three launches (the gate /
// up pair GEMV, swiglu_q8, the down + combine GEMV) in a persistent grid whose two phases meet at
// a counter instead of a kernel boundary.
//
// The bits are those of the three launches (cuda/gemv.h, glu.h): each gate / up row is the NVFP4
// slab kernel's sum (block_dot per lane, the 32-lane xor tree, scale, rounding), each 32-element
// block of SwiGLU values is quantised by quantize_act_q8's arithmetic, and each down row is the
// packed combine's (block partials in block order, scale, rounding, ranks in order, one rounding
// per operation). Test: tests/cuda/moe_decode_fused_test.cpp (memcmp against the three launches).
//
// Why: a Qwen3-30B-A3B decode layer spends ~22 us of serialised kernel time in those three
// launches for 21 MB of weights (benches/h200.md, session 12: 11.0 + 2.6 + 8.5 us), ~5 us at the
// H200's read bandwidth. Here every CTA issues its down weights with its gate / up weights, right
// after the PDL wait, so HBM sees one stream; the SwiGLU happens in the gate / up epilogue; the
// down phase starts on a counter (the units of phase 1 done) instead of a launch hand-over.
// Measured (H200 session 16, benches/h200.md): bit-identical, 2.9 us a layer faster serialised,
// 3.8% slower end to end -- off by default (FT_MOE_FUSED_DECODE=1 turns it on).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/round.h"

namespace ft::cuda {

struct MoeFusedDecodeArgs {
  // Expert banks (NVFP4 rows; expert e's row r at w + e * expert_bytes + r * row_bytes).
  const uint8_t* w_gate = nullptr;
  const uint8_t* w_up = nullptr;
  const uint8_t* w_down = nullptr;
  int64_t gu_row_bytes = 0, gu_expert_bytes = 0;      // gate and up: the same layout
  int64_t down_row_bytes = 0, down_expert_bytes = 0;
  int64_t n_embd = 0;  // gate / up k, down rows
  int64_t n_ff = 0;    // gate / up rows, down k
  int n_used = 0;      // chosen experts of the one token
  const int32_t* ids = nullptr;     // device, {n_used}
  const float* slot_w = nullptr;    // device, {n_used}: routing weights
  const float* bank = nullptr;      // device, [n_expert][4]: gate, up, down scale columns 0, 1, 2; nullptr: none
  float scale = 1.0f;
  const void* xq = nullptr;         // device: the token's act_q8 row (k = n_embd)
  void* xq_mid = nullptr;           // device scratch: n_used act_q8 rows (k = n_ff), 16-byte aligned
  float* y = nullptr;               // device: the residual row (n_embd), added into
  Round round = Round::kNone;
  unsigned* sync = nullptr;         // device: 2 counters, zero before the first call (left zero)
};

// Whether moe_fused_decode takes these shapes on this device: sm_90+ (any sm_80+ would do; the
// shared memory it asks for is H100/H200-sized), n_embd == 2048 (gate / up rows of one 32-block
// slab: the shape where the three launches' pair is the slab kernel; Qwen3-30B-A3B's), n_ff %
// 256 == 0 with n_used * n_ff / 64 <= 128 (the packed down + combine item), n_used <= 8,
// unpadded 16-byte aligned rows, and a grid that covers the down rows in two items a warp.
bool moe_fused_decode_supported(const MoeFusedDecodeArgs& a);

// Enqueues the experts of one token on `s` (a PDL launch; the ids, xq and y may come from the
// launch before). Throws ft::Error where !moe_fused_decode_supported(a).
void moe_fused_decode(const MoeFusedDecodeArgs& a, cudaStream_t s);

// Launches so far (tests check which path ran).
int64_t moe_fused_decode_launches();

}  // namespace ft::cuda
