// deltanet_chunked, DeltaNetChunkedKind::kSmall (deltanet.h): the chunked Gated DeltaNet of
// deltanet_chunked.cu in <= 99 KiB of shared memory per block, for the GPUs whose opt-in limit
// is below the plain kernel's 223 KiB at d 128 (RTX 30/40/50: sm_86/89/120, 99 KiB; A100:
// sm_80, 163 KiB). Same grid (H_v, D / R row groups of S), same chunk of C = 64 tokens, same
// phases a) .. f) and the same arithmetic in the same order (the test checks it bit for bit
// against the plain kernel), with three changes to the storage:
//   * K and Q are staged by component in slices of W = min(D, 64): at d 128 two passes over
//     the chunk, the k.k / q.k (b) and S0.k / S0.q (c) accumulators held in registers across
//     them (one 4x4 tile per thread: 136 + 128 tiles <= 288 threads), so kT and qT take
//     2 x 64 x 68 floats instead of 2 x 128 x 68;
//   * A and M are written after the last slice into the same region (their upper triangles
//     zeroed each chunk, since the region held K and Q meanwhile);
//   * the state update f) reads the chunk's keys by token straight from y (global, through
//     L1/L2: per token a warp's float4 loads cover 4 column quads, 64 contiguous bytes, the 8
//     row quads' lanes sharing them) instead of a token-major copy (2 x 33 KiB in the plain
//     kernel).
// Shared memory: 89 KiB at d 128 (sT 18 KiB, K/Q slice or A/M 34 KiB, V/P-U/UW/O 36 KiB), 80
// KiB at d 64, 75 at 32, 56 at 16 (deltanet_chunked_smem_bytes; the host-side test checks every
// d against the 99 KiB of sm_86/89/120). 167 registers at d 128, no spills (sm_86/89/90).
//
// Why this shape and not the alternative the issue named (A, M and the gates of all chunks by
// a first kernel into a global workspace, the sequential pass holding only S's rows and U):
// b) runs beside c) in the same phase here, on threads that would otherwise idle (c) has 128
// tiles for 288 threads), so moving it out saves no time on the sequential path; what the
// sequential path must hold is K and Q for c) (2 x 64 KiB at d 128), which slicing halves
// without a workspace, an extra launch or any change to the callers' scratch. The cost is two
// barriers per slice; the slices' loads stay off the critical path as in the plain kernel (a
// slice is loaded into registers a phase ahead: the next slice during this one's products,
// the next chunk's first slice during d)), so it should run near the plain kernel's ~30 us
// per chunk on the H200 (2x the recurrence), plus what the keys of f) cost from L1/L2. Not
// measured yet: FT_GDN_CHUNKED=3 runs this kind on the H200, ft-bench-deltanet-cuda prints it
// beside the others. Checked before any device run by a host emulation of the kernel (threads
// and barriers; scratch, not in the tree): 1.7e-6 from a double-precision recurrence at
// d 16..128, bit-identical to the plain kernel's emulation, and a dropped barrier or a missing
// zero of A's upper triangle fails it.
#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/deltanet.h"
#include "cuda/ops_math.cuh"

namespace ft::cuda {
namespace {

constexpr int C = static_cast<int>(kDeltaNetChunk);
constexpr int kThreads = 288;  // b) and c) together: 136 + 128 tiles, one per thread
constexpr int kLoaders = 256;  // threads that stage a slice of K and Q
constexpr int kTriTiles = (C / 4) * (C / 4 + 1) / 2;
constexpr unsigned kFull = 0xffffffffu;

template <int D>
struct SmallSmem {
  static constexpr int R = D < 32 ? D : 32;  // rows of S per block
  static constexpr int W = D < 64 ? D : 64;  // components of K and Q staged at a time
  static constexpr int NW = D / W;           // slices per chunk
  // Row strides: multiples of 4 floats (float4 access); +4 so that the float4s of 8
  // consecutive rows sit in 8 different bank quads.
  static constexpr int LT = C + 4, LR = R + 4;
  struct KQ {
    alignas(16) float kT[W][LT];  // keys of the slice by component: kT[c][t]
    alignas(16) float qT[W][LT];  // queries, likewise
  };
  struct AM {
    alignas(16) float mT[C][LT];  // M[t][s] at mT[s][t]; zero above the diagonal
    float a[C][C + 1];            // A[t][s]: lane t reads column s (banks t + s); zero for s >= t
  };
  alignas(16) float sT[D][LR];  // the block's rows of S: S[r0 + r][c] at sT[c][r]
  union {
    KQ kq;  // a) .. c)
    AM am;  // b)'s results, d) and e)
  };
  alignas(16) float v[C][LR];   // V
  alignas(16) float u[C][LR];   // P, then U
  alignas(16) float uw[C][LR];  // U[t][r] e^{G_n - G_t}
  alignas(16) float o[C][LR];   // e^{G_t} S0 q_t
  float g[C], beta[C], eg[C], wd[C];
};

// Loader item e -> token t and float4 column cq of the slice: 8 tokens x 4 consecutive quads
// per warp, so a warp reads 64 contiguous bytes of 8 rows and its transposed stores hit 16
// banks (the plain kernel's mapping).
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

// A slice of the chunk's keys and queries in registers, loaded a phase before it is stored
// (the next slice during this one's products, the next chunk's first slice during d)), so
// its global latency hides behind work.
template <int D>
struct Slice {
  static constexpr int kItems = C * SmallSmem<D>::W / 4 / kLoaders;  // float4s of K (and of Q) per loader
  float4 k[kItems], q[kItems];
};

// a) slice w of the chunk at t0 (n tokens; zeros past them) into registers. Every thread sets
// every field (zeros where it loads nothing), as the plain kernel's stage: fields left unset
// kept registers live around the whole chunk loop there.
template <int D>
__device__ __forceinline__ void load_slice(const DeltaNetArgs& p, int64_t t0, int n, int64_t i, int w,
                                           Slice<D>& sl) {
  constexpr int W = SmallSmem<D>::W;
  const int tid = threadIdx.x;
  const bool loader = tid < kLoaders;
  const int64_t key_dim = p.n_k_heads * D;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int x = 0; x < Slice<D>::kItems; ++x) {
    int t, cq;
    item_pos(tid + kLoaders * x, t, cq);
    const bool in = loader && t < n;
    const float* row = p.y + (t0 + t) * p.ldy + i * D + w * W + 4 * cq;
    sl.k[x] = in ? ld4(row + key_dim) : zero;
    sl.q[x] = in ? ld4(row) : zero;
  }
}

// a) the slice, transposed into kT and qT.
template <int D>
__device__ __forceinline__ void store_slice(SmallSmem<D>& sm, const Slice<D>& sl) {
  const int tid = threadIdx.x;
  if (tid >= kLoaders) return;
#pragma unroll
  for (int x = 0; x < Slice<D>::kItems; ++x) {
    int t, cq;
    item_pos(tid + kLoaders * x, t, cq);
    sm.kq.kT[4 * cq + 0][t] = sl.k[x].x;
    sm.kq.kT[4 * cq + 1][t] = sl.k[x].y;
    sm.kq.kT[4 * cq + 2][t] = sl.k[x].z;
    sm.kq.kT[4 * cq + 3][t] = sl.k[x].w;
    sm.kq.qT[4 * cq + 0][t] = sl.q[x].x;
    sm.kq.qT[4 * cq + 1][t] = sl.q[x].y;
    sm.kq.qT[4 * cq + 2][t] = sl.q[x].z;
    sm.kq.qT[4 * cq + 3][t] = sl.q[x].w;
  }
}

// a) the chunk's V rows and gates: G_t the inclusive scan of g (padded tokens add 0), e^{G_t},
// e^{G_n - G_t} (warp 0, the plain kernel's scan).
template <int D>
__device__ __forceinline__ void stage_rows(SmallSmem<D>& sm, const DeltaNetArgs& p, const float* gb, int64_t t0,
                                           int n, int64_t j, int r0) {
  constexpr int R = SmallSmem<D>::R;
  const int tid = threadIdx.x;
  const int64_t key_dim = p.n_k_heads * D;
  for (int e = tid; e < C * R; e += kThreads) {
    const int t = e / R, r = e % R;
    sm.v[t][r] = t < n ? p.y[(t0 + t) * p.ldy + 2 * key_dim + j * D + r0 + r] : 0.0f;
  }
  if (tid < 32) {
    const int lane = tid, ta = lane, tb = lane + 32;
    const float* ga = gb + ((t0 + ta) * p.n_v_heads + j) * 3;
    const float* gbb = gb + ((t0 + tb) * p.n_v_heads + j) * 3;
    float x0 = ta < n ? ga[2] : 0.0f, x1 = tb < n ? gbb[2] : 0.0f;
    const float b0 = ta < n ? ga[1] : 0.0f, b1 = tb < n ? gbb[1] : 0.0f;
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
    sm.g[ta] = x0;
    sm.g[tb] = x1;
    sm.beta[ta] = b0;
    sm.beta[tb] = b1;
    sm.eg[ta] = ops::exp_f32(x0);
    sm.eg[tb] = ops::exp_f32(x1);
    sm.wd[ta] = ops::exp_f32(ops::sub_rn(gn, x0));
    sm.wd[tb] = ops::exp_f32(ops::sub_rn(gn, x1));
  }
}

// b) over one slice: the k_t.k_s and q_t.k_s sums of the 4x4 tile (tt, ss), ss <= tt.
template <int D>
__device__ __forceinline__ void tri_accumulate(const SmallSmem<D>& sm, int tt, int ss, float (&kk)[4][4],
                                               float (&qk)[4][4]) {
#pragma unroll 4
  for (int c = 0; c < SmallSmem<D>::W; ++c) {
    float kt[4], qt[4], ks[4];
    f4a(ld4(&sm.kq.kT[c][4 * tt]), kt);
    f4a(ld4(&sm.kq.qT[c][4 * tt]), qt);
    f4a(ld4(&sm.kq.kT[c][4 * ss]), ks);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) {
        kk[x][y] = ops::fma_rn(kt[x], ks[y], kk[x][y]);
        qk[x][y] = ops::fma_rn(qt[x], ks[y], qk[x][y]);
      }
  }
}

// b) done: A[t][s] = beta_t e^{G_t - G_s} k_t.k_s (s < t), M[t][s] = e^{G_t - G_s} q_t.k_s (s <= t).
template <int D>
__device__ __forceinline__ void tri_store(SmallSmem<D>& sm, int tt, int ss, const float (&kk)[4][4],
                                          const float (&qk)[4][4]) {
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int t = 4 * tt + x, s = 4 * ss + y;
      if (s > t) continue;
      const float dec = ops::exp_f32(ops::sub_rn(sm.g[t], sm.g[s]));
      if (s < t) sm.am.a[t][s] = ops::mul_rn(ops::mul_rn(sm.beta[t], dec), kk[x][y]);
      sm.am.mT[s][t] = ops::mul_rn(dec, qk[x][y]);
    }
}

// c) over slice w: the S0[r].k_t and S0[r].q_t sums of the 4x4 tile (tokens 4 tt.., rows 4 rr..).
template <int D>
__device__ __forceinline__ void state_accumulate(const SmallSmem<D>& sm, int tt, int rr, int w, float (&sk)[4][4],
                                                 float (&sq)[4][4]) {
  constexpr int W = SmallSmem<D>::W;
#pragma unroll 4
  for (int c = 0; c < W; ++c) {
    float kt[4], qt[4], s[4];
    f4a(ld4(&sm.kq.kT[c][4 * tt]), kt);
    f4a(ld4(&sm.kq.qT[c][4 * tt]), qt);
    f4a(ld4(&sm.sT[w * W + c][4 * rr]), s);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) {
        sk[x][y] = ops::fma_rn(s[y], kt[x], sk[x][y]);
        sq[x][y] = ops::fma_rn(s[y], qt[x], sq[x][y]);
      }
  }
}

// c) done: P[t][r] = beta_t (v_t[r] - e^{G_t} S0[r].k_t), O[t][r] = e^{G_t} S0[r].q_t.
template <int D>
__device__ __forceinline__ void state_store(SmallSmem<D>& sm, int tt, int rr, const float (&sk)[4][4],
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

// f) one 4x4 tile (components 4 cc.., rows 4 rr..) of the state after the chunk; keys by
// token from y (kg: the chunk's first token's key head).
template <int D>
__device__ __forceinline__ void update_tile(SmallSmem<D>& sm, int task, int n, const float* kg, int64_t ldy,
                                            float en) {
  constexpr int R = SmallSmem<D>::R;
  const int rr = task % (R / 4), cc = task / (R / 4);
  float acc[4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = ops::mul_rn(sm.sT[4 * cc + x][4 * rr + y], en);
#pragma unroll 4  // several tokens' key loads (L1 / L2) in flight
  for (int t = 0; t < n; ++t) {
    float kc[4], uw[4];
    f4a(ld4(kg + t * ldy + 4 * cc), kc);
    f4a(ld4(&sm.uw[t][4 * rr]), uw);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) acc[x][y] = ops::fma_rn(kc[x], uw[y], acc[x][y]);
  }
#pragma unroll
  for (int x = 0; x < 4; ++x)
    *reinterpret_cast<float4*>(&sm.sT[4 * cc + x][4 * rr]) = make_float4(acc[x][0], acc[x][1], acc[x][2], acc[x][3]);
}

// e) one 4x4 tile (tokens 4 tt.., rows 4 rr..) of the outputs.
template <int D>
__device__ __forceinline__ void output_tile(const SmallSmem<D>& sm, int task, int n, float* out, int64_t ldo,
                                            float scale) {
  constexpr int R = SmallSmem<D>::R;
  const int rr = task % (R / 4), tt = task / (R / 4);
  float acc[4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = sm.o[4 * tt + x][4 * rr + y];
  const int s_end = 4 * tt + 4 < n ? 4 * tt + 4 : n;
  for (int s = 0; s < s_end; ++s) {  // M[t][s] = 0 for s > t
    float m[4], us[4];
    f4a(ld4(&sm.am.mT[s][4 * tt]), m);
    f4a(ld4(&sm.u[s][4 * rr]), us);
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) acc[x][y] = ops::fma_rn(m[x], us[y], acc[x][y]);
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int t = 4 * tt + x;
    if (t >= n) break;
#pragma unroll
    for (int y = 0; y < 4; ++y) out[t * ldo + 4 * rr + y] = ops::mul_rn(acc[x][y], scale);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) small_kernel(DeltaNetArgs p, const float* gb, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Sm = SmallSmem<D>;
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw);
  constexpr int R = Sm::R;
  constexpr int kStateTiles = (C / 4) * (R / 4);
  constexpr int kUpdateTiles = (R / 4) * (D / 4);
  static_assert(kTriTiles + kStateTiles <= kThreads, "one b) or c) tile per thread: the sums stay in registers");
  static_assert(C * Sm::W / 4 % kLoaders == 0, "the loader mapping covers a slice exactly");
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t j = blockIdx.x;
  const int64_t i = j % p.n_k_heads;
  const int r0 = blockIdx.y * R;
  const bool fresh = p.d_pos != nullptr && *p.d_pos == 0;
  float* Sg = p.state + j * D * D;
  for (int e = tid; e < R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    sm.sT[c][r] = fresh ? 0.0f : Sg[static_cast<int64_t>(r0 + r) * D + c];
  }
  // This thread's tile of b) (tid < kTriTiles) or of c) (the next kStateTiles threads).
  const bool is_tri = tid < kTriTiles, is_state = !is_tri && tid < kTriTiles + kStateTiles;
  int ta = 0, tb = 0;  // b): (tt, ss); c): (tt, rr)
  if (is_tri) {
    while ((ta + 1) * (ta + 2) / 2 <= tid) ++ta;
    tb = tid - ta * (ta + 1) / 2;
  } else if (is_state) {
    tb = (tid - kTriTiles) % (R / 4);
    ta = (tid - kTriTiles) / (R / 4);
  }
  const int64_t key_dim = p.n_k_heads * D;

  Slice<D> sl;
  load_slice<D>(p, 0, static_cast<int>(p.n_tok < C ? p.n_tok : C), i, 0, sl);
  for (int64_t t0 = 0; t0 < p.n_tok; t0 += C) {
    const int n = static_cast<int>(p.n_tok - t0 < C ? p.n_tok - t0 : C);
    // The previous chunk's e) / f) are done (barrier at the loop's end): K, Q, V and the gates
    // can be overwritten.
    stage_rows<D>(sm, p, gb, t0, n, j, r0);
    float acc0[4][4] = {}, acc1[4][4] = {};  // b): k.k, q.k; c): S0.k, S0.q
#pragma unroll 1
    for (int w = 0; w < Sm::NW; ++w) {
      store_slice<D>(sm, sl);  // slice w (loaded during the previous phase)
      __syncthreads();  // slice (and at w == 0 the rows, gates and S) in place
      if (w + 1 < Sm::NW) load_slice<D>(p, t0, n, i, w + 1, sl);
      if (is_tri)
        tri_accumulate<D>(sm, ta, tb, acc0, acc1);
      else if (is_state)
        state_accumulate<D>(sm, ta, tb, w, acc0, acc1);
      __syncthreads();  // the slice is read: the next one (or A and M) may overwrite it
    }
    // A and M replace K and Q: their upper triangles are zeroed here (disjoint from what
    // tri_store writes), since d) and e) read whole rows / columns.
    for (int e = tid; e < C * C; e += kThreads) {  // consecutive threads, consecutive addresses
      const int hi = e / C, lo = e % C;
      if (lo >= hi) sm.am.a[hi][lo] = 0.0f;  // A[t][s], s >= t
      if (hi > lo) sm.am.mT[hi][lo] = 0.0f;  // M[t][s] at mT[s][t], s > t
    }
    if (is_tri)
      tri_store<D>(sm, ta, tb, acc0, acc1);
    else if (is_state)
      state_store<D>(sm, ta, tb, acc0, acc1);
    __syncthreads();
    // The next chunk's first slice (zeros past the end), in flight during d).
    const int64_t t1 = t0 + C;
    load_slice<D>(p, t1, static_cast<int>(p.n_tok - t1 < C ? p.n_tok - t1 : C), i, 0, sl);
    if (warp < 8) {  // d) forward substitution, R / 8 rows per warp
      constexpr int RW = R / 8;
      float x0[RW], x1[RW];
#pragma unroll
      for (int w = 0; w < RW; ++w) {
        x0[w] = sm.u[lane][warp * RW + w];
        x1[w] = sm.u[lane + 32][warp * RW + w];
      }
      for (int s = 0; s + 1 < n; ++s) {
        // A[t][s] is zero for t <= s: those lanes add -0 * u_s and keep their value.
        const float a0 = sm.am.a[lane][s], a1 = sm.am.a[lane + 32][s];
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
    __syncthreads();
    const float en = sm.eg[C - 1];  // e^{G_n} (padded tokens add 0 to G)
    const float* kg = p.y + t0 * p.ldy + key_dim + i * D;
    float* out = p.out + t0 * p.ldo + j * D + r0;
    for (int task = tid; task < kUpdateTiles + kStateTiles; task += kThreads) {
      if (task < kUpdateTiles)
        update_tile<D>(sm, task, n, kg, p.ldy, en);
      else
        output_tile<D>(sm, task - kUpdateTiles, n, out, p.ldo, scale);
    }
    __syncthreads();
  }
  for (int e = tid; e < R * D; e += kThreads) {
    const int r = e / D, c = e % D;
    Sg[static_cast<int64_t>(r0 + r) * D + c] = sm.sT[c][r];
  }
}

template <int D>
void launch(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s) {
  constexpr int R = SmallSmem<D>::R;
  constexpr int bytes = static_cast<int>(sizeof(SmallSmem<D>));
  // The opt-in above 48 KiB, once per device and kernel (a second GPU's context needs its own).
  static std::atomic<bool> set_on[16] = {};
  int dev = 0;
  FT_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 16 || !set_on[dev].load(std::memory_order_relaxed)) {
    FT_CUDA_CHECK(cudaFuncSetAttribute(small_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    if (dev >= 0 && dev < 16) set_on[dev].store(true, std::memory_order_relaxed);
  }
  small_kernel<D><<<dim3(static_cast<unsigned>(a.n_v_heads), D / R), kThreads, bytes, s>>>(a, gb, scale);
}

}  // namespace

size_t deltanet_chunked_small_smem_bytes(int64_t d) {
  switch (d) {
    case 16: return sizeof(SmallSmem<16>);
    case 32: return sizeof(SmallSmem<32>);
    case 64: return sizeof(SmallSmem<64>);
    default: return sizeof(SmallSmem<128>);
  }
}

void deltanet_chunked_small(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s) {
  switch (a.d) {
    case 16: launch<16>(a, gb, scale, s); break;
    case 32: launch<32>(a, gb, scale, s); break;
    case 64: launch<64>(a, gb, scale, s); break;
    default: launch<128>(a, gb, scale, s); break;
  }
}

}  // namespace ft::cuda
