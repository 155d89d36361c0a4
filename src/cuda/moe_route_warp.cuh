// One warp routes one token (MoE top-k routing): the warp half of moe_route.cu, in a header so
// that a kernel other than the router's can route in its own CTAs -- the lean expert gate / up
// launch of one decode token (gemv_nvfp4_lean.cu, GemvArgs::route_logits) takes the router's
// logits and routes them itself, the same bits as the router's last block. CUDA only.
#pragma once

#include <cstdint>

#include "cuda/moe_route.h"
#include "cuda/ops_math.cuh"
#include "cuda/stl_sort.cuh"

namespace ft::cuda::route_warp {

// The tie fallback's sort stack (stl_sort::sort_with) for up to kMoeRouteMaxExperts experts.
inline constexpr int kSortStack = stl_sort::stack_need(kMoeRouteMaxExperts);
using SortRange = stl_sort::Range<int32_t>;
inline constexpr float kWeightSumMin = 6.103515625e-5f;  // engine::kMoeWeightSumMin

struct ByProbDesc {
  const float* probs;
  __device__ bool operator()(int32_t a, int32_t b) const { return probs[a] > probs[b]; }
};

// The chosen experts sel[0..n_used) into ids and their weights probs[sel[r]] / max(float(sum_r
// double(probs[sel[r]])), min), the sum in rank order: the one arithmetic of every sequential
// route's weights (route_row's thread 0, route_row_warp_exact's lane 0).
__device__ __forceinline__ void write_renormalised(const float* probs, const int32_t* sel, int n_used, int32_t* ids,
                                                   float* weights) {
  double ws = 0.0;
  for (int r = 0; r < n_used; ++r) ws += static_cast<double>(probs[sel[r]]);
  const float denom = fmaxf(static_cast<float>(ws), kWeightSumMin);
  for (int r = 0; r < n_used; ++r) {
    ids[r] = sel[r];
    weights[r] = ops::div_rn(probs[sel[r]], denom);
  }
}

// The warp route's limits: 8 experts per lane, one chosen expert per lane.
inline constexpr int kWarpPer = 8;
inline constexpr int kWarpMaxExperts = 32 * kWarpPer;
inline constexpr int kWarpMaxUsed = 32;
inline constexpr int kMaxWarps = 8;  // warps of the largest block that routes a token a warp (kRouterThreads)
__host__ __device__ inline bool warp_route_fits(int n_expert, int n_used) {
  return n_expert <= kWarpMaxExperts && n_used <= kWarpMaxUsed;
}

// route_row_warp_exact: routes one token's logits l (global memory, read past L1: another block
// may have written them) with the 32 lanes of the calling warp, the same arithmetic as route_row:
//   mx    fmaxf over the logits (order-free);
//   e     exp_v (groups of 8) / exp_f32 (the last n mod 8) of sub_rn(l, mx): lane i's 8
//         experts are group i, so its group sum ((y0+y4)+(y2+y6))+((y1+y5)+(y3+y7)) is
//         lane-local, and every lane adds the group sums (then the tail) into a double in
//         group order, as thread 0 does;
//   top k k rounds: the largest remaining probability (bits + 1 as the key: probabilities
//         are >= 0, so the bits order like the values, 0 marks a used or absent expert) by
//         redux.sync; more than one holder = a tie in the top k (route_row's condition) ->
//         the std::sort twin on lane 0 over probs / order (n_expert each, this warp's own);
//   w_k   sum_k double(p_k) in rank order, then div_rn by max(float(sum), min).
static __device__ __noinline__ void route_row_warp_exact(const float* l, int n_expert, int n_used, float* probs,
                                                 int32_t* order, int32_t* ids, float* weights) {
  const unsigned all = 0xFFFFFFFFu;
  const int lane = static_cast<int>(threadIdx.x) & 31, e0 = kWarpPer * lane;
  const int n8 = n_expert / 8 * 8;
  float p[kWarpPer];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kWarpPer; ++i) {
    p[i] = e0 + i < n_expert ? __ldcg(l + e0 + i) : -INFINITY;
    mx = fmaxf(mx, p[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(all, mx, o));
#pragma unroll
  for (int i = 0; i < kWarpPer; ++i) {
    const int e = e0 + i;
    const float d = ops::sub_rn(p[i], mx);
    p[i] = e >= n_expert ? 0.0f : e < n8 ? ops::exp_v(d) : ops::exp_f32(d);
  }
  const float ga = ops::add_rn(p[0], p[4]), gb = ops::add_rn(p[1], p[5]), gc = ops::add_rn(p[2], p[6]),
              gd = ops::add_rn(p[3], p[7]);
  const float gsum = ops::add_rn(ops::add_rn(ga, gc), ops::add_rn(gb, gd));  // used by lanes < n8 / 8
  double sum = 0.0;
#pragma unroll 8
  for (int g = 0; g < n8 / 8; ++g) sum += static_cast<double>(__shfl_sync(all, gsum, g));  // a uniform bound
  const int tail_lane = (n8 / 8) & 31;  // the lane holding experts n8.. (none when n8 == n_expert)
#pragma unroll
  for (int i = 0; i < kWarpPer; ++i) {
    const float v = __shfl_sync(all, p[i], tail_lane);
    if (n8 + i < n_expert) sum += static_cast<double>(v);
  }
  const float inv = static_cast<float>(1.0 / sum);
  uint32_t key[kWarpPer];
#pragma unroll
  for (int i = 0; i < kWarpPer; ++i) {
    p[i] = ops::mul_rn(p[i], inv);
    key[i] = e0 + i < n_expert ? __float_as_uint(p[i]) + 1u : 0u;
  }

  int my_id = 0;
  float my_p = 0.0f;
  double wsum = 0.0;
  bool tie = false;
  for (int r = 0; r < n_used; ++r) {
    uint32_t km = 0;
#pragma unroll
    for (int i = 0; i < kWarpPer; ++i) km = key[i] > km ? key[i] : km;
    const uint32_t top = __reduce_max_sync(all, km);
    int cnt = 0, id = 0;
#pragma unroll
    for (int i = 0; i < kWarpPer; ++i)
      if (key[i] == top) {
        ++cnt;
        id = e0 + i;
        key[i] = 0u;
      }
    if (__reduce_add_sync(all, static_cast<unsigned>(cnt)) != 1u) {  // warp-uniform
      tie = true;
      break;
    }
    id = __shfl_sync(all, id, __ffs(__ballot_sync(all, cnt != 0)) - 1);
    const float pv = __uint_as_float(top - 1u);
    if (lane == r) {
      my_id = id;
      my_p = pv;
    }
    wsum += static_cast<double>(pv);
  }
  if (!tie) {
    const float denom = fmaxf(static_cast<float>(wsum), kWeightSumMin);
    if (lane < n_used) {
      ids[lane] = my_id;
      weights[lane] = ops::div_rn(my_p, denom);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kWarpPer; ++i)
    if (e0 + i < n_expert) probs[e0 + i] = p[i];
  __syncwarp();
  __shared__ SortRange sort_stack[kMaxWarps][kSortStack];
  if (lane == 0) {
    for (int e = 0; e < n_expert; ++e) order[e] = e;
    stl_sort::sort_with(order, n_expert, ByProbDesc{probs}, sort_stack[threadIdx.x >> 5]);
    write_renormalised(probs, order, n_used, ids, weights);
  }
  __syncwarp();  // probs / order are free for the warp's next token
}

// One token's top k chosen on the exponentials e = exp(l - max), before their sum is known, and
// checked on the probabilities afterwards. p = mul_rn(e, inv) is monotone in e (inv > 0), so the
// k + 1 largest e, in order, are the k + 1 largest p unless p rounds two of them together: if
// p_0 > p_1 > .. > p_k strictly, route_row_warp_exact's rounds choose exactly experts 0..k-1 in
// that order with no tie, and the weights below are its arithmetic (the same bits); otherwise
// (an exact tie in e or one made by the rounding) this returns false and the caller runs
// route_row_warp_exact. P experts a lane (4 up to 128 experts: one 16-byte load, the group of 8
// across a lane pair; 8 up to 256). A round is a lane max, one redux.sync and a ballot; the
// chosen expert's lane clears it. Why: H200 session 22 call 1, FT_DEBUG_SKIP=route -- the
// exact warp route cost ~6 us a Qwen3-30B-A3B layer inside the chain (476 -> 555 tok/s without
// it): ~1,100 dependent instructions of one warp a CTA (session 21's ncu export), most in its k
// rounds over 8 keys a lane with an add reduction and a branch each.
template <int P>
__device__ __forceinline__ bool route_row_warp_fast(const float* l, int n_expert, int n_used, int32_t* ids,
                                                    float* weights) {
  static_assert(P == 4 || P == 8, "experts a lane");
  const unsigned all = 0xFFFFFFFFu;
  const int lane = static_cast<int>(threadIdx.x) & 31, e0 = P * lane;
  const int n8 = n_expert / 8 * 8;
  float v[P];
  if (e0 + P <= n_expert && (reinterpret_cast<uintptr_t>(l) & 15) == 0) {
#pragma unroll
    for (int i = 0; i < P; i += 4) {
      const float4 q = __ldcg(reinterpret_cast<const float4*>(l + e0 + i));
      v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < P; ++i) v[i] = e0 + i < n_expert ? __ldcg(l + e0 + i) : -INFINITY;
  }
  float mx = v[0];
#pragma unroll
  for (int i = 1; i < P; ++i) mx = fmaxf(mx, v[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(all, mx, o));
  float e[P];
  uint32_t key[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int x = e0 + i;
    const float d = ops::sub_rn(v[i], mx);
    e[i] = x >= n_expert ? 0.0f : x < n8 ? ops::exp_v(d) : ops::exp_f32(d);
    key[i] = x < n_expert ? __float_as_uint(e[i]) + 1u : 0u;  // e >= 0: the bits order like the values
  }

  // The top k + 1 by e, one round each (independent of the sum below): a round takes each lane's
  // max, one redux.sync and a ballot, and the leader clears its chosen key; lane r keeps round r's
  // key and expert, round n_used's key is uniform. (Measured slower on the H200, session 22: each
  // lane's keys sorted first so that a round is the heads and a shift, -1% in call 5; the softmax
  // sum's groups added inside the rounds and the weight sum unrolled, -0.7% in call 7.)
  uint32_t my_top = 0u, top_k1 = 0u;
  int my_id = 0;
#pragma unroll 1
  for (int r = 0; r <= n_used; ++r) {
    uint32_t km = key[0];
    int jm = 0;
#pragma unroll
    for (int i = 1; i < P; ++i)
      if (key[i] > km) km = key[i], jm = i;
    const uint32_t top = __reduce_max_sync(all, km);
    const unsigned holders = __ballot_sync(all, km == top);
    const int leader = __ffs(holders) - 1;
    if (lane == leader) {
#pragma unroll
      for (int i = 0; i < P; ++i)
        if (i == jm) key[i] = 0u;
    }
    const int id = __shfl_sync(all, e0 + jm, leader);
    if (lane == r) my_top = top, my_id = id;
    if (r == n_used) top_k1 = top;
  }

  // The softmax sum exactly as route_row_warp_exact forms it: group g (experts 8g..8g+7) summed
  // ((y0+y4)+(y2+y6))+((y1+y5)+(y3+y7)) in fp32, the groups then the tail into a double in order.
  float gsum;
  if constexpr (P == 8) {
    gsum = ops::add_rn(ops::add_rn(ops::add_rn(e[0], e[4]), ops::add_rn(e[2], e[6])),
                       ops::add_rn(ops::add_rn(e[1], e[5]), ops::add_rn(e[3], e[7])));
  } else {  // lane 2g holds y0..y3, lane 2g + 1 y4..y7
    float o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __shfl_xor_sync(all, e[i], 1);
    gsum = ops::add_rn(ops::add_rn(ops::add_rn(e[0], o[0]), ops::add_rn(e[2], o[2])),
                       ops::add_rn(ops::add_rn(e[1], o[1]), ops::add_rn(e[3], o[3])));
  }
  constexpr int kGroupLanes = 8 / P;  // lanes a group of 8 spans
  double sum = 0.0;
#pragma unroll 8
  for (int g = 0; g < n8 / 8; ++g) sum += static_cast<double>(__shfl_sync(all, gsum, kGroupLanes * g));
  // The tail n8..n_expert - 1 (n8 % P == 0): expert n8 + i is e[i % P] of lane n8 / P + i / P.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float t = __shfl_sync(all, e[i % P], (n8 / P + i / P) & 31);
    if (n8 + i < n_expert) sum += static_cast<double>(t);
  }
  const float inv = static_cast<float>(1.0 / sum);

  // p of rounds 0..k (lane r; round k uniform); a tie reaches the top k unless strictly decreasing.
  const float pr = ops::mul_rn(__uint_as_float(my_top - 1u), inv);
  const float pk1 = top_k1 != 0u ? ops::mul_rn(__uint_as_float(top_k1 - 1u), inv) : -1.0f;
  const float below = __shfl_down_sync(all, pr, 1);
  const float next = lane + 1 < n_used ? below : pk1;
  if (__ballot_sync(all, lane < n_used && !(pr > next)) != 0u) return false;
  double wsum = 0.0;
#pragma unroll 1
  for (int r = 0; r < n_used; ++r) wsum += static_cast<double>(__shfl_sync(all, pr, r));
  const float denom = fmaxf(static_cast<float>(wsum), kWeightSumMin);
  if (lane < n_used) {
    ids[lane] = my_id;
    weights[lane] = ops::div_rn(pr, denom);
  }
  return true;
}

// Routes one token's logits with the calling warp (moe_route's bits). fast: 1 the fast route above
// where no tie reaches the top k, else route_row_warp_exact; 0 route_row_warp_exact only; 2 (tests)
// the fast route only, writing ids -1 where it finds a tie. probs / order: n_expert floats / ints
// of this warp's shared memory (the exact route's).
__device__ __forceinline__ void route_row_warp(const float* l, int n_expert, int n_used, float* probs, int32_t* order,
                                               int32_t* ids, float* weights, int fast = 1) {
  if (fast != 0) {
    if (n_expert <= 32 * 4 ? route_row_warp_fast<4>(l, n_expert, n_used, ids, weights)
                           : route_row_warp_fast<8>(l, n_expert, n_used, ids, weights))
      return;
    if (fast == 2) {
      if (static_cast<int>(threadIdx.x & 31) < n_used) ids[threadIdx.x & 31] = -1;
      return;
    }
  }
  route_row_warp_exact(l, n_expert, n_used, probs, order, ids, weights);
}

}  // namespace ft::cuda::route_warp
