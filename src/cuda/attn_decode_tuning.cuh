// Launch plan of the dedicated decode attention kernel (attn_decode.cuh): block shape, rows
// per block, keys in flight, the chunk unit and the grid size; and the tensor-core decode
// kernel's grid (attn_decode_mma.cuh). Host- and device-visible
// constants only; the kernel's logic does not change when they do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/attn_plan.cuh"

namespace ft::cuda::attn_detail {

// Warps per block: every warp streams its own keys, the block merges them at the end.
inline constexpr int kDecodeWarps = 4;
inline constexpr int kDecodeThreads = kDecodeWarps * 32;

// Query rows (token x head of the group) per block, a power of two: q and the accumulators
// live in registers (16 floats per row per lane: 8 rows take ~230 registers, 4 ~165, 2 ~115).
// Larger groups (and n_tok > 1) take several row blocks; siblings run side by side, so the
// second read of a K/V row is an L2 hit. H200 run of 19:20 (f16, 1 token, us per launch at
// 8 / 512 / 4096 / 16384 keys): Llama-8B rows 4: 5.6 / 16.3 / 33.5 / 55.6, rows 2:
// 3.6 / 12.3 / 22.8 / 41.1; Qwen3-30B-A3B rows 8: 9.1 / 25.5 / 52.1 / 71.8, rows 4:
// 5.5 / 15.9 / 33.2 / 52.7, rows 2: 3.6 / 12.0 / 22.3 / 39.6. (1 row was not measured.)
inline constexpr int kDecodeMaxRows = 2;
// One query token: one row a block. With the keys staged in shared memory (kDecodeStageKeys) a K/V
// row costs its siblings an L2 read, not a wait in the key loop, and the block's chain is shorter.
// H200 session 20, tg128 alternating (FT_ATTN_DECODE_ROWS 2 / 1 / 4): Llama-8B 445.5, 446.6 / 456.0,
// 453.5 / 418.0, 417.7; Qwen3-30B-A3B 423.9, 425.6 / 430.3, 430.4 / 389.5, 389.6.
inline constexpr int kDecodeMaxRowsOneToken = 1;

// Token counts above this go to the SIMT split-K kernel (attn_simt.cuh): at 8 tokens and
// 4096 keys it took 59 us against 64-69 us for this kernel (every rows / keys-per-slot plan
// of the 19:20 run); 2..7 tokens were not measured.
inline constexpr int64_t kDecodeFastMaxTokens = 4;

// Keys each lane group loads before it computes (K and V, 16 or 32 bytes each). 19:20 run at
// rows 4: 2 keys beat 4 at 4096-16384 keys (Llama-8B 16k: 46.0 vs 55.7 us), 1 and 8 lose;
// rows 2 (the default cap) ran with 4 only.
template <int R>
inline constexpr int kDecodeKeysPerSlot = R >= 8 ? 2 : 4;

// Measured and removed (session 36; the H200 figures stay here): a reduce-scatter + all-gather
// lane reduction of the scores (within 1-2% of the xor butterfly in the 19:20 run: the shuffles
// are not the limit), and software pipelining of the next step's keys (twice the bytes in flight,
// the same arithmetic; session 7, ft-bench-small-cuda, bf16, 8 layers of 16k-row caches: slower at
// every depth, Llama-8B 11.29 / 19.64 / 36.99 us off vs 11.70 / 20.05 / 37.29 on at 512 / 4k / 16k
// keys, Qwen3-30B-A3B 11.27 / 19.09 / 35.53 vs 11.64 / 19.77 / 36.77: the loads in flight are not
// the limit). Keys per slot 1 and 8 (lost, above) are no longer instantiated either.

// Decode chunks are whole multiples of this many keys: small enough that 300 live keys use
// ten blocks per KV head instead of five, large enough that a block does real work.
inline constexpr int64_t kDecodeUnit = 32;
// ... but a live chunk holds at least this many keys (decode_plan_min): below it the partials,
// tickets and merge cost more than the keys a block reads alone. H200 session 19: inside the
// decode chain the attention launch took ~12 us a layer of Llama-8B at 0..128 keys (tg128 with
// the launch skipped, FT_DEBUG_SKIP=attn: 493 vs 414 tok/s); tg128 alternating in one call,
// FT_ATTN_MIN_CHUNK 0 / 64 / 128 / 256 / 512: Llama-8B 411.9, 413.3 / 416.0, 417.1 / 427.3,
// 426.1 / 427.7, 426.9 / 425.0, 424.9; Qwen3-30B-A3B 397.6, 400.3 / 402.9, 400.9 / 411.9, 412.2 /
// 410.4, 412.4 / 410.7, 411.6. 128 (one chunk to 128 keys): past 256 keys the tensor-core kernel
// takes one-token decode anyway (gpu/session.cpp kMmaMinKeys), and with it off, longer contexts
// keep their parallelism.
inline constexpr int64_t kDecodeMinChunk = 128;
static_assert(kDecodeMinChunk % kDecodeUnit == 0, "whole units");

// Keys of its chunk a block copies into shared memory before the PDL wait (attn_decode.cuh: the
// rows before the new key are at least two launches old), at most kDecodeStageBytes of K and V
// rows; FT_ATTN_STAGE_KEYS=N overrides, 0 none. A chunk holds kDecodeMinChunk keys until the
// splits run out, so 128 stages whole chunks. H200 session 20, tg128 alternating, 0 / 128 / 64
// keys (2 rows a block then): Llama-8B 434.3, 433.6 / 446.0, 444.8 / 444.4, 441.2; Qwen3-30B-A3B
// 406.8, 407.5 / 422.8, 425.0 / 418.7, 420.2 (with one row a block, 128 / 64: 454.1 / 451.8 and
// 427.9 / 427.2).
inline constexpr int64_t kDecodeStageKeys = 128;
inline constexpr int64_t kDecodeStageBytes = 64 * 1024;

// Blocks per SM that the grid aims for when the cache is long (blocks past the live keys exit
// at once, so a large grid costs little at short context). 19:20 run, rows 4: 2 per SM
// slightly faster for Llama-8B (30.5 vs 33.5 us at 4096), slower for Qwen3 (41.0 vs 33.2);
// 8 and 16 slower for both.
inline constexpr int64_t kDecodeBlocksPerSm = 4;

// Chunk partials are merged in groups of this many (the last block of a group merges it, the
// last group merger merges the groups): one block reading all 128 partials of a KV head
// (8 rows x 128 x 128 floats = 512 KB at 16k keys) would take ~3-5 us on one SM.
inline constexpr int64_t kDecodeMergeGroup = 16;
inline constexpr int64_t kDecodeMaxGroups = (kMaxSplits + kDecodeMergeGroup - 1) / kDecodeMergeGroup;
inline constexpr int kDecodeMergeMax = kDecodeMergeGroup > kDecodeMaxGroups ? kDecodeMergeGroup : kDecodeMaxGroups;

// Ticket counters at the start of the workspace, a fixed size so that they sit at the same
// place whatever the shape: per (KV head, row block) one for the final merge and one per
// merge group.
inline constexpr int64_t kDecodeTicketsPerHead = 16;
static_assert(kDecodeTicketsPerHead >= 1 + kDecodeMaxGroups, "ticket slots");
inline constexpr int64_t kDecodeTickets = 16384;
inline constexpr size_t kDecodeTicketBytes = kDecodeTickets * sizeof(uint32_t);

// The tensor-core decode kernel (attn_decode_mma.cuh): the blocks per SM its split plan aims
// for and the keys a chunk is a multiple of. H200 session 17 (call 4; ft-bench-attention-cuda
// --kv f16, us at 4096 / 16384 live keys; PER_SM,UNIT): Qwen3-30B-A3B 4,64 11.57 / 26.32,
// 2,128 10.47 / 18.73, 2,256 11.08 / 18.37, 1,256 11.08 / 20.62, 8,64 11.58 / 26.27; Llama-8B
// 4,64 18.34 / 32.39, 2,128 12.79 / 26.06, 2,256 12.80 / 25.82, 8,64 18.36 / 43.76. Bigger
// chunks give each warp several 16-key tiles to stream instead of one. End to end (tg128 at
// depth 4096 / 16384, alternating): Qwen3-30B-A3B 2,128 371.6 / 311.4 and 372.0 / 312.6
// against 4,64 361.0 / 293.6 and 361.8 / 294.4; Llama-8B 2,256 369.9 / 314.2 and 370.9 / 313.0
// against 350.7 / 301.2 and 348.9 / 299.8 (2,128 the same as 2,256 in call 5).
// FT_ATTN_MMA_PLAN=PER_SM,UNIT[,MIN] overrides them (attention_decode.cu; PER_SM at kMmaDecodePlanKvHeads;
// MIN: kMmaDecodeMinChunk below).
// The tensor-core decode kernel's K/V: stages of its per-warp ring in shared memory (8 KB a
// stage: 16 keys' K and V rows) and how many of a warp's first tiles are issued before the PDL
// wait (the rest right after it); stages 0: the first tile into registers before the wait, each
// later one loaded after the one before is done (the kernel of H200 sessions 17-33). H200 session
// 34 (calls 1-2, tg128 alternating, the rope inside; Llama-8B at depth 4096 / 16384):
//   stages 0            461.2, 462.9 / 384.5, 384.1
//   stages 2, pre 1     461.9, 461.5 / 399.8, 396.9   (kept)
//   stages 2, pre 2     450.4, 455.1 / 392.0, 393.8   (call 1; 460.0, 458.6 / 399.7, 401.1 with a
//                                                      100% shared-memory carveout, call 2: not kept,
//                                                      the same as pre 1 without an attribute)
//   stages 3, pre 1     448.6, 449.7 / 393.4, 393.0
//   stages 3, pre 3     449.8, 447.9 / 393.9, 395.3   (call 1: 454.4, 457.0 / 398.2, 399.3)
// Qwen3-30B-A3B, stages 0 / 3 pre 1 / 3: 437.7, 437.0 / 443.5, 442.7 / 447.4, 443.7 at 4096,
// 377.8, 378.1 / 387.8, 388.3 / 387.1, 386.1 at 16384 (call 2); stages 2 pre 2 448.5 / 393.5 (call 1).
// Every tile in flight before the wait slows the 4096-key case once the kernel is released under
// the qkv GEMV (rope inside) rather than under the short rope launch. FT_ATTN_MMA_STAGES=0|2 and
// FT_ATTN_MMA_PRE=N override them (the 3-stage instances, slower in calls 1, 2 and 6, were dropped in
// session 35).
inline constexpr int kMmaDecodeStages = 2;
inline constexpr int kMmaDecodePre = 1;
// The rope inside the tensor-core decode kernel: q normed and rotated by every block of its KV
// head, the new key by the block whose chunk holds it (which stores K and V), instead of the
// qk_norm_rope_store launch before it. Session 34 call 1, Llama-8B tg128 at depth 4096 / 16384,
// stages 0: 461.4, 461.1 / 383.0, 382.2 with it against 440.9, 438.9 / 365.8, 366.4 without
// (one launch fewer a layer); the same 48 greedy tokens after a 300-token prompt on both models.
// FT_ATTN_MMA_ROPE=0|1 overrides it.
inline constexpr bool kMmaDecodeRope = true;
// Session 34 (call 3, the ring and the rope inside; tg128 at depth 4096 / 16384, PER_SM,UNIT when
// PER_SM counted blocks an SM whatever the KV heads): Llama-8B (8 KV heads) 2,128 461.1, 458.9 /
// 398.3, 397.6, 1,128 463.2, 463.4 / 379.7, 380.4, 3,128 459.3, 459.5 / 372.9, 373.1, 2,256
// 460.9, 459.6 / 397.3, 399.1, 4,64 437.2, 436.7 / 379.8, 377.4; Qwen3-30B-A3B (4 KV heads) 2,128
// 445.0, 446.4 / 392.5, 392.3 against 1,128 452.6, 451.0 / 411.0, 410.9. Both best at ~33 chunks a
// KV head (2 x 132 / 8): the plan counts its blocks an SM at kMmaDecodePlanKvHeads KV heads, so a
// model with fewer KV heads gets longer chunks rather than more of them (fewer partials to merge).
inline constexpr int64_t kMmaDecodePlanKvHeads = 8;
inline constexpr int64_t kMmaDecodeBlocksPerSm = 2;
inline constexpr int64_t kMmaDecodeUnit = 128;  // a multiple of kChunkUnit (the workspace's splits)
static_assert(kMmaDecodeUnit % kChunkUnit == 0, "the workspace is sized for kChunkUnit chunks");
// The least keys of a live chunk of the tensor-core kernel (decode_plan_min; 0: none, a multiple of
// kMmaDecodeUnit). Session 34 call 6: Llama-8B at a one-block plan (chunks of 256 keys at 4096)
// 467.3 tok/s @4096 against the default plan's 461 (chunks of 128), but 379.8 @16384 against 399
// (fewer chunks there too): a least chunk keeps the default's chunks where they are long already.
// Session 36 (bench/session36/h200_b.sh, tg128 alternating 3 rounds, FT_ATTN_MMA_PLAN=2,128,256
// against 0): Qwen3-30B-A3B @4096 452.55 / 449.96 / 452.28 against 449.93 / 445.22 / 445.96 (+1.0%;
// call 1: 455.25 against 448.45), @16384 405.49 / 407.68 / 407.04 against 408.97 / 406.34 / 404.91
// (the same); Llama-8B @4096 456.05 / 458.86 / 458.30 against 456.75 / 456.48 / 458.51 (the same).
// FT_ATTN_MMA_PLAN=PER_SM,UNIT,MIN overrides it (MIN 0: none).
inline constexpr int64_t kMmaDecodeMinChunk = 256;
static_assert(kMmaDecodeMinChunk % kMmaDecodeUnit == 0, "whole units");

}  // namespace ft::cuda::attn_detail
