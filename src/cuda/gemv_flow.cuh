// The step flow between a dense layer's tiled gate|up (with its SwiGLU tail) and the down
// projection after it (cuda::GemvArgs::flow_count): the down projection reads each 256-element
// step of the SwiGLU row as soon as gate|up's tails have written it, instead of after a PDL wait
// for the whole gate|up launch. CUDA only.
//
// Producer (gemv_mma.cu, the gate|up instance with FLOW 1): its CTAs take the tiles of the
// 32-row SwiGLU blocks in block order (CTA 4 b + j: gate tiles 2 b, 2 b + 1, then up tiles), so
// the blocks complete about in order while the launch runs; the warp completing block b
// releases one count on flow_count[b / 8] after writing the block's Q8 (flow_done).
// Consumer (the down projection's instance with FLOW 2): no PDL wait before its steps; the warp
// running step s waits for flow_count[s] == 8 and loads the step's 32 activation fragments and 8
// scales itself (flow_fill, one fragment a lane: mma_build_x's bytes, the same smem places), so its
// steps are the tiled kernel's steps in the same order: the same bits.
// The CTA finishing last re-arms the counters (flow_rearm; the ticket is flow_count[n_steps]).
//
// Why: in the decode chain the down projection's CTAs are placed on the SMs gate|up frees during
// its last wave and stream their first stages there, but nothing of their 9.4 us after gate|up's
// end (H200 session 31's chain trace: 33 MB, a span of ~3.5 TB/s) overlaps gate|up: the
// activation row is built after the wait, and all of a warp's steps are computed after it.
// No deadlock: PDL launches the consumer only once every producer CTA has started (each triggers
// after its wait), so every count it waits for comes from a CTA already resident or done.
#pragma once

#include <cstdint>

#include "cuda/gemv.h"
#include "cuda/gemv_q8_formats.cuh"

namespace ft::cuda::gemv_detail {

inline constexpr int kFlowBlocksPerStep = 8;  // 32-element SwiGLU blocks in a 256-element step
// Counters a 128-byte line apart: step s's at flow_count[kFlowStride * s], the ticket after the last
// step's. One line for all of them put every consumer warp's polls on one L2 slice (H100 session 39
// calls 1-2: the flow 6% slower end to end than none).
inline constexpr int kFlowStride = kGemvFlowStride;

// Producer's tile of CTA b for a gate|up of `rows` rows (gate rows first; rows % 64 == 0).
__device__ __forceinline__ int64_t flow_tile(int64_t b, int64_t rows) {
  const int64_t blk = b >> 2, j = b & 3, half_tiles = rows / 32;
  return j < 2 ? 2 * blk + j : half_tiles + 2 * blk + (j - 2);
}

// Producer, the warp that wrote SwiGLU block blk's Q8 (codes and scale, any lanes).
__device__ __forceinline__ void flow_done(unsigned* count, int blk) {
  __threadfence();
  __syncwarp();
  if ((threadIdx.x & 31) == 0) atomicAdd(count + kFlowStride * (blk / kFlowBlocksPerStep), 1u);
}

__device__ __forceinline__ unsigned flow_load_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Consumer: lane's share of step s of the Q8 row xq (k values): fragment 32 s + lane (mma_build_x's
// numbering: group 2 s + lane / 16) and, lanes < 8, Q8 block 8 s + lane's scale. L2 loads (.cg): the
// producer writes them during this launch.
struct FlowAct {
  uint32_t a, b;
  float d;
};
__device__ __forceinline__ FlowAct flow_load(const uint8_t* xq, int64_t k, int s) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int grp = 2 * s + (lane >> 4), t = (lane >> 2) & 3, fc = lane & 3;
  const int e = 128 * grp + 64 * (t >> 1) + 16 * (2 * (t & 1) + (fc >> 1)) + 4 * (fc & 1);
  FlowAct v;
  v.a = __ldcg(reinterpret_cast<const unsigned*>(xq + e));
  v.b = __ldcg(reinterpret_cast<const unsigned*>(xq + e + 8));
  v.d = lane < kFlowBlocksPerStep ? __ldcg(reinterpret_cast<const float*>(xq + k + 8 * (kFlowBlocksPerStep * s + lane)))
                                  : 0.0f;
  return v;
}
// ... into the CTA's fragment and scale arrays (mma_build_x's places); the caller __syncwarp()s.
__device__ __forceinline__ void flow_put(const FlowAct& v, uint8_t* frag, float* xd, int s) {
  using namespace q8_detail;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const uint32_t x0 = x_pair_0(v.a, v.b), x1 = x_pair_1(v.a, v.b);
  *reinterpret_cast<uint4*>(frag + 16 * (32 * s + lane)) = make_uint4(x0, x1, __vneg4(x0), __vneg4(x1));
  if (lane < kFlowBlocksPerStep) xd[kFlowBlocksPerStep * s + lane] = v.d * 0.5f;
}

// Consumer warp whose i-th step is step warp + nw * i (of my_steps): from its step i0 on, waits until
// that step is written, then puts the activations of it and of the written steps right after it (at
// most kFlowBatch) where the warp's mma steps read them. Returns the first step not put. One L2 round
// trip for the counts (lane j reads step i0 + j's) and one for the activations of the whole batch:
// H100 session 39 call 1 measured a round trip a step (a count, then the step's loads) 6.5% slower end
// to end than no flow at all.
// A count that never comes (a producer that did not count) traps after ~1 s rather than hang.
inline constexpr int kFlowBatch = 8;
// opt (Params::flow_opt, FT_GEMV_FLOW_OPT, a measuring knob): 2 fence.acq_rel instead of fence.sc after the
// counts, 4 no fence (the loads' order left to the counts' data dependence: not the memory model's), 8 polls
// 32 ns apart instead of 256.
__device__ __forceinline__ int flow_fill(const unsigned* count, const uint8_t* xq, int64_t k, uint8_t* frag,
                                         float* xd, int warp, int nw, int i0, int my_steps, int opt) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const unsigned full = static_cast<unsigned>(kFlowBlocksPerStep);
  // Step i0 alone until it is written (one line, polled by the warp as one request, not too often).
  for (uint32_t n = 0; flow_load_relaxed(count + kFlowStride * (warp + nw * i0)) < full; ++n) {
    if (opt & 8) {
      __nanosleep(32);
      if (n > (1u << 23)) __trap();
    } else {
      __nanosleep(256);
      if (n > (1u << 20)) __trap();
    }
  }
  // Then how many of the steps after it are written too: lane j reads step i0 + j's count.
  const int j = i0 + lane;
  const bool ok = lane == 0 || (j < my_steps && flow_load_relaxed(count + kFlowStride * (warp + nw * j)) >= full);
  const unsigned not_ok = ~__ballot_sync(0xFFFFFFFFu, ok);
  int r = not_ok == 0u ? 32 : __ffs(static_cast<int>(not_ok)) - 1;
  if (opt & 4) {
  } else if (opt & 2) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  } else {
    __threadfence();  // the counts seen before the activations they count
  }
  __syncwarp();
  if (r > kFlowBatch) r = kFlowBatch;
  FlowAct v[kFlowBatch];
#pragma unroll
  for (int u = 0; u < kFlowBatch; ++u)
    if (u < r) v[u] = flow_load(xq, k, warp + nw * (i0 + u));
#pragma unroll
  for (int u = 0; u < kFlowBatch; ++u)
    if (u < r) flow_put(v[u], frag, xd, warp + nw * (i0 + u));
  return i0 + r;
}

// Consumer CTA, after its last read of the counts (every thread; the caller has synced them): the
// CTA done last zeroes the n_steps counts and the ticket.
__device__ __forceinline__ void flow_rearm(unsigned* count, int n_steps) {
  __shared__ unsigned s_last;
  if (threadIdx.x == 0) {
    __threadfence();  // the CTA's reads of the counts before its ticket
    s_last = atomicAdd(count + kFlowStride * n_steps, 1u) == gridDim.x - 1;
    if (s_last) __threadfence();
  }
  __syncthreads();
  if (s_last == 0) return;
  for (int i = static_cast<int>(threadIdx.x); i <= n_steps; i += static_cast<int>(blockDim.x)) count[kFlowStride * i] = 0u;
}

}  // namespace ft::cuda::gemv_detail
