// The phases of the chunked Gated DeltaNet kernels (deltanet_chunked.cu: plain and cluster
// kinds; deltanet_chunked_small.cu: the small kind), written once so that the kinds share the
// arithmetic and its order, which their tests hold bit for bit (qwen35_kernels_test.cpp).
// The kernels differ in storage only (where K, Q, A and M live, where f) reads the keys), so
// each phase takes the shared-memory struct `Sm` for the fields both kinds name alike (sT, v,
// u, uw, o, g, beta, eg, wd; R, LT, LR) and the kind's own arrays as arguments. The phase
// letters a) .. f) are those of deltanet_chunked.cu's opening comment.
#pragma once

#include <cstdint>

#include "cuda/deltanet.h"
#include "cuda/ops_math.cuh"

namespace ft::cuda::gdn_chunked {

constexpr int C = static_cast<int>(kDeltaNetChunk);
constexpr int kThreads = 288;  // b) and c) together: 136 + 128 tiles, one per thread
constexpr int kLoaders = 256;  // threads that stage the chunk's keys and queries
constexpr int kTriTiles = (C / 4) * (C / 4 + 1) / 2;
constexpr unsigned kFull = 0xffffffffu;

// Loader item e -> token t and float4 column cq: 8 tokens x 4 consecutive quads per warp, so
// a warp reads 64 contiguous bytes of 8 rows and its transposed stores hit 16 banks.
__device__ __forceinline__ void item_pos(int e, int& t, int& cq) {
  const int grp = e / 32;
  t = (grp % 8) * 8 + (e % 8);
  cq = (grp / 8) * 4 + (e / 8) % 4;
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void f4a(const float4 v, float (&a)[4]) {
  a[0] = v.x;
  a[1] = v.y;
  a[2] = v.z;
  a[3] = v.w;
}

// acc[x][y] = fma(a[x], b[y], acc[x][y]): the register-tiled 4x4 outer product of b), c), e), f).
__device__ __forceinline__ void outer4(const float (&a)[4], const float (&b)[4], float (&acc)[4][4]) {
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = ops::fma_rn(a[x], b[y], acc[x][y]);
}

// a) this loader's N float4s of keys and queries of the chunk at t0 (n tokens; zeros past
// them), components [col, col + ...) of the key head. Every thread sets every element (zeros
// where it loads nothing): with elements left unset, the compiler kept the staged registers
// live around the whole chunk loop (228 bytes of spills in the plain kernel).
template <int D, int N>
__device__ __forceinline__ void load_kq(const DeltaNetArgs& p, int64_t t0, int n, int64_t col, float4 (&k)[N],
                                        float4 (&q)[N]) {
  const int tid = threadIdx.x;
  const bool loader = tid < kLoaders;
  const int64_t key_dim = p.n_k_heads * D;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int x = 0; x < N; ++x) {
    int t, cq;
    item_pos(tid + kLoaders * x, t, cq);
    const bool in = loader && t < n;
    const float* row = p.y + (t0 + t) * p.ldy + col + 4 * cq;
    k[x] = in ? ld4(row + key_dim) : zero;
    q[x] = in ? ld4(row) : zero;
  }
}

// a) one loaded quad of keys and of queries, transposed into kT and qT (token t, column cq).
template <int LT>
__device__ __forceinline__ void store_kq_t(float (*kT)[LT], float (*qT)[LT], int t, int cq, const float4& k,
                                           const float4& q) {
  kT[4 * cq + 0][t] = k.x;
  kT[4 * cq + 1][t] = k.y;
  kT[4 * cq + 2][t] = k.z;
  kT[4 * cq + 3][t] = k.w;
  qT[4 * cq + 0][t] = q.x;
  qT[4 * cq + 1][t] = q.y;
  qT[4 * cq + 2][t] = q.z;
  qT[4 * cq + 3][t] = q.w;
}

// a) warp 0 (lane = tid): G_t, the inclusive scan of g over the chunk (x0, x1: g of tokens
// lane and lane + 32, padded tokens 0), with beta, e^{G_t} and e^{G_n - G_t}.
template <class Sm>
__device__ __forceinline__ void scan_gates(Sm& sm, int lane, float x0, float x1, float b0, float b1) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float y0 = __shfl_up_sync(kFull, x0, o), y1 = __shfl_up_sync(kFull, x1, o);
    if (lane >= o) {
      x0 = ops::add_rn(y0, x0);
      x1 = ops::add_rn(y1, x1);
    }
  }
  x1 = ops::add_rn(__shfl_sync(kFull, x0, 31), x1);
  const float gn = __shfl_sync(kFull, x1, 31);
  sm.g[lane] = x0;
  sm.g[lane + 32] = x1;
  sm.beta[lane] = b0;
  sm.beta[lane + 32] = b1;
  sm.eg[lane] = ops::exp_f32(x0);
  sm.eg[lane + 32] = ops::exp_f32(x1);
  sm.wd[lane] = ops::exp_f32(ops::sub_rn(gn, x0));
  sm.wd[lane + 32] = ops::exp_f32(ops::sub_rn(gn, x1));
}

// b) and c): two 4x4 tiles of sums over N components, sa[x][y] = sum_c a[c][4 ta + x] w[c][4 tw + y]
// and sb likewise from b (fma in c's order). b): k_t.k_s and q_t.k_s of the tile (tt, ss),
// ss <= tt (a = kT, b = qT, w = kT); c): S0[r].k_t and S0[r].q_t of tokens 4 tt.., rows 4 rr..
// (w = sT from the first of the N components; fma(k, s) is fma(s, k) to the bit).
template <int N, int LA, int LW>
__device__ __forceinline__ void pair_sums(const float (*a)[LA], const float (*b)[LA], const float (*w)[LW], int ta,
                                          int tw, float (&sa)[4][4], float (&sb)[4][4]) {
#pragma unroll 4
  for (int c = 0; c < N; ++c) {
    float fa[4], fb[4], fw[4];
    f4a(ld4(&a[c][4 * ta]), fa);
    f4a(ld4(&b[c][4 * ta]), fb);
    f4a(ld4(&w[c][4 * tw]), fw);
    outer4(fa, fw, sa);
    outer4(fb, fw, sb);
  }
}

// b) done: put(t, s, A[t][s], M[t][s]) for s <= t of the tile, A[t][s] = beta_t e^{G_t - G_s}
// k_t.k_s (used for s < t only), M[t][s] = e^{G_t - G_s} q_t.k_s.
template <class Sm, class Put>
__device__ __forceinline__ void tri_finish(const Sm& sm, int tt, int ss, const float (&kk)[4][4],
                                           const float (&qk)[4][4], Put&& put) {
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int t = 4 * tt + x, s = 4 * ss + y;
      if (s > t) continue;
      const float dec = ops::exp_f32(ops::sub_rn(sm.g[t], sm.g[s]));
      put(t, s, ops::mul_rn(ops::mul_rn(sm.beta[t], dec), kk[x][y]), ops::mul_rn(dec, qk[x][y]));
    }
}

// c) done: P[t][r] = beta_t (v_t[r] - e^{G_t} S0[r].k_t) into u, O[t][r] = e^{G_t} S0[r].q_t.
template <class Sm>
__device__ __forceinline__ void state_finish(Sm& sm, int tt, int rr, const float (&sk)[4][4],
                                             const float (&sq)[4][4]) {
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int t = 4 * tt + x;
    const float eg = sm.eg[t], beta = sm.beta[t];
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int r = 4 * rr + y;
      sm.u[t][r] = ops::mul_rn(beta, ops::sub_rn(sm.v[t][r], ops::mul_rn(eg, sk[x][y])));
      sm.o[t][r] = ops::mul_rn(eg, sq[x][y]);
    }
  }
}

// d) u_t[r] = P[t][r] - sum_{s<t} A[t][s] u_s[r] for warp w's R / 8 rows (warps 0..7), lane l
// holding tokens l and l + 32; then U e^{G_n - G_t} into uw.
template <class Sm>
__device__ __forceinline__ void substitute(Sm& sm, const float (*a)[C + 1], int warp, int lane, int n) {
  constexpr int RW = Sm::R / 8;
  float x0[RW], x1[RW];
#pragma unroll
  for (int w = 0; w < RW; ++w) {
    x0[w] = sm.u[lane][warp * RW + w];
    x1[w] = sm.u[lane + 32][warp * RW + w];
  }
  for (int s = 0; s + 1 < n; ++s) {
    // A[t][s] is zero for t <= s: those lanes add -0 * u_s and keep their value.
    const float a0 = a[lane][s], a1 = a[lane + 32][s];
#pragma unroll
    for (int w = 0; w < RW; ++w) {
      const float us = __shfl_sync(kFull, s < 32 ? x0[w] : x1[w], s & 31);
      x0[w] = ops::fma_rn(-a0, us, x0[w]);
      x1[w] = ops::fma_rn(-a1, us, x1[w]);
    }
  }
  const float w0 = sm.wd[lane], w1 = sm.wd[lane + 32];
#pragma unroll
  for (int w = 0; w < RW; ++w) {
    const int r = warp * RW + w;
    sm.u[lane][r] = x0[w];
    sm.u[lane + 32][r] = x1[w];
    sm.uw[lane][r] = ops::mul_rn(x0[w], w0);
    sm.uw[lane + 32][r] = ops::mul_rn(x1[w], w1);
  }
}

// e) one 4x4 tile (tokens 4 tt.., rows 4 rr..) of the outputs: (O + M U) * scale.
template <class Sm>
__device__ __forceinline__ void output_tile(const Sm& sm, const float (*mT)[Sm::LT], int task, int n, float* out,
                                            int64_t ldo, float scale) {
  constexpr int R = Sm::R;
  const int rr = task % (R / 4), tt = task / (R / 4);
  float acc[4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = sm.o[4 * tt + x][4 * rr + y];
  const int s_end = 4 * tt + 4 < n ? 4 * tt + 4 : n;
  for (int s = 0; s < s_end; ++s) {  // M[t][s] = 0 for s > t
    float m[4], us[4];
    f4a(ld4(&mT[s][4 * tt]), m);
    f4a(ld4(&sm.u[s][4 * rr]), us);
    outer4(m, us, acc);
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int t = 4 * tt + x;
    if (t >= n) break;
#pragma unroll
    for (int y = 0; y < 4; ++y) out[t * ldo + 4 * rr + y] = ops::mul_rn(acc[x][y], scale);
  }
}

// f) one 4x4 tile (components 4 cc.., rows 4 rr..) of the state after the chunk:
// S[r] = e^{G_n} S0[r] + sum_t u_t[r] e^{G_n - G_t} k_t, token t's keys at k0 + t * ldk
// (shared memory in the plain kernel, y in the small one).
template <class Sm>
__device__ __forceinline__ void update_tile(Sm& sm, int task, int n, const float* k0, int64_t ldk, float en) {
  constexpr int R = Sm::R;
  const int rr = task % (R / 4), cc = task / (R / 4);
  float acc[4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = ops::mul_rn(sm.sT[4 * cc + x][4 * rr + y], en);
#pragma unroll 4  // several tokens' key loads in flight (the small kernel's come from L1 / L2)
  for (int t = 0; t < n; ++t) {
    float kc[4], uw[4];
    f4a(ld4(k0 + t * ldk + 4 * cc), kc);
    f4a(ld4(&sm.uw[t][4 * rr]), uw);
    outer4(kc, uw, acc);
  }
#pragma unroll
  for (int x = 0; x < 4; ++x)
    *reinterpret_cast<float4*>(&sm.sT[4 * cc + x][4 * rr]) = make_float4(acc[x][0], acc[x][1], acc[x][2], acc[x][3]);
}

// The block's R rows of S_j (Sg: the head's D x D state) into sT transposed, zeros for a new
// sequence; and back after the last chunk.
template <int D, class Sm>
__device__ __forceinline__ void load_state(Sm& sm, const float* Sg, int r0, bool fresh) {
  for (int e = threadIdx.x; e < Sm::R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    sm.sT[c][r] = fresh ? 0.0f : Sg[static_cast<int64_t>(r0 + r) * D + c];
  }
}
template <int D, class Sm>
__device__ __forceinline__ void save_state(const Sm& sm, float* Sg, int r0) {
  for (int e = threadIdx.x; e < Sm::R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    Sg[static_cast<int64_t>(r0 + r) * D + c] = sm.sT[c][r];
  }
}

}  // namespace ft::cuda::gdn_chunked
