// deltanet_chunked (deltanet.h): the chunked form of the Gated DeltaNet recurrence, for prompts.
// Grid (H_v, D / R row groups of S), 288 threads (9 warps), the chunks of C = 64 tokens in
// order. Every row r of S_j evolves on its own given the chunk's keys, queries and gates, so a
// block keeps its R rows of S (shared memory, transposed: sT[c][r]) and the chunk's rows. Per
// chunk, with G_t the cumulative g inside it and S0 the entry rows:
//   a) K, Q, V rows and gates into shared memory (loaded into registers during the previous
//      chunk's d), stored during its e) and f)); warp 0 scans g into G_t, e^{G_t}, e^{G_n - G_t};
//   b) A[t][s] = beta_t e^{G_t - G_s} k_t.k_s (s < t), M[t][s] = e^{G_t - G_s} q_t.k_s (s <= t):
//      a thread per 4x4 tile of the lower triangle (136 tiles);
//   c) P[t][r] = beta_t (v_t[r] - e^{G_t} S0[r].k_t), O[t][r] = e^{G_t} S0[r].q_t: a thread
//      per 4x4 tile (128 tiles at R = 32), beside b) in the same phase;
//   d) u_t[r] = P[t][r] - sum_{s<t} A[t][s] u_s[r]: a warp per R/8 rows, lane l holding tokens
//      l and l + 32, u_s broadcast by a shuffle (the 64 steps need no block barrier);
//   e) o_t[r] = (O[t][r] + sum_{s<=t} M[t][s] u_s[r]) / sqrt(d), and
//   f) S[r] = e^{G_n} S0[r] + sum_s u_s[r] e^{G_n - G_s} k_s, side by side (4x4 tiles).
// Exponents are differences of cumulative sums (never products of exps: G reaches -1000s).
//
// Why this shape: the first chunked kernel (FMA loops, one thread per row of S in d), a chain
// of ~2,000 dependent FMAs per chunk) ran pp2048 7% slower than the recurrence on the H200.
// Here every product is a register-tiled 4x4 outer product over shared memory (3 float4 loads
// per 32 FMAs) and the substitution is a 64-step shuffle chain per warp. H200, Qwen3.6 shape
// (32 value heads of 128), 512-token calls: 474 ns per token and layer vs the recurrence's 983
// (2.07x); pp2048 6016 vs 5641 tok/s end to end. ~29 us per chunk is still ~3x its FMA count
// at the SIMT rate (not profiled yet); the products could move to tensor cores (3xTF32).
// The cluster kind (G = 4 blocks sharing b)) measured 1.13x the recurrence only: fewer FMAs
// but slower, probably because 32 clusters of 4 x 223 KiB blocks do not all fit at once.
// 223 KiB fit sm_90 only; the small kind (deltanet_chunked_small.cu, 89 KiB) does the same
// operations in the same order for the GPUs below it.
//
// Rounding: every sum runs in the same order as in the first kernel and the recurrence's
// products are fma; the two forms agree to ~1e-6 relative (tests/cuda/qwen35_kernels_test.cpp).
#include <cooperative_groups.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/deltanet.h"
#include "cuda/deltanet_chunked_phases.cuh"
#include "cuda/ops_math.cuh"

// The cluster kind needs sm_90 (thread block clusters, distributed shared memory); compiled
// for older targets its kernel is the plain one (the host never launches it there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FT_GDN_CLUSTER 1
#else
#define FT_GDN_CLUSTER 0
#endif

namespace ft::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace gdn_chunked;

template <int D>
struct Smem {
  static constexpr int R = D < 32 ? D : 32;
  // Row strides: multiples of 4 floats (float4 access); +4 so that the float4s of 8
  // consecutive rows sit in 8 different bank quads.
  static constexpr int LK = D + 4, LT = C + 4, LR = R + 4;
  alignas(16) float k[2][C][LK];  // keys by token, two chunks (f) reads one, the next is staged)
  alignas(16) float kT[D][LT];    // keys by component: kT[c][t] (the products over d)
  alignas(16) float qT[D][LT];    // queries, likewise
  alignas(16) float sT[D][LR];    // the block's rows of S: S[r0 + r][c] at sT[c][r]
  alignas(16) float mT[C][LT];    // M[t][s] at mT[s][t]; zero above the diagonal
  alignas(16) float v[C][LR];     // V
  alignas(16) float u[C][LR];     // P, then U
  alignas(16) float uw[C][LR];    // U[t][r] e^{G_n - G_t}
  alignas(16) float o[C][LR];     // e^{G_t} S0 q_t
  alignas(16) float a[C][C + 1];  // A[t][s]: lane t reads column s (banks t + s); zero for s >= t
  float g[C], beta[C], eg[C], wd[C];
};

// A chunk's rows in registers (loaded during the previous chunk's last phase).
template <int D>
struct Stage {
  static constexpr int R = Smem<D>::R;
  static constexpr int kQuads = C * D / 4 / kLoaders;  // float4s of K (and of Q) per loader
  static constexpr int kV = C * R / kLoaders;          // floats of V per loader
  float4 k[kQuads], q[kQuads];
  float v[kV];
  float g0, g1, b0, b1;  // warp 0: g and beta of tokens lane and lane + 32
};

// Every thread defines every field (zeros where it loads nothing), as load_kq.
template <int D>
__device__ __forceinline__ void load_stage(const DeltaNetArgs& p, const float* gb, Stage<D>& st, int64_t t0,
                                           int n, int64_t j, int64_t i, int r0) {
  constexpr int R = Smem<D>::R;
  const int tid = threadIdx.x;
  const bool loader = tid < kLoaders;
  const int64_t key_dim = p.n_k_heads * D;
  load_kq<D>(p, t0, n, i * D, st.k, st.q);
#pragma unroll
  for (int x = 0; x < Stage<D>::kV; ++x) {
    const int e = tid + kLoaders * x, t = e / R, r = e % R;
    st.v[x] = loader && t < n ? p.y[(t0 + t) * p.ldy + 2 * key_dim + j * D + r0 + r] : 0.0f;
  }
  const int ta = tid, tb = tid + 32;
  const float* ga = gb + ((t0 + ta) * p.n_v_heads + j) * 3;
  const float* gbb = gb + ((t0 + tb) * p.n_v_heads + j) * 3;
  st.g0 = tid < 32 && ta < n ? ga[2] : 0.0f;
  st.b0 = tid < 32 && ta < n ? ga[1] : 0.0f;
  st.g1 = tid < 32 && tb < n ? gbb[2] : 0.0f;
  st.b1 = tid < 32 && tb < n ? gbb[1] : 0.0f;
}

template <int D>
__device__ __forceinline__ void store_stage(Smem<D>& sm, const Stage<D>& st, int kb) {
  constexpr int R = Smem<D>::R;
  const int tid = threadIdx.x;
  if (tid < kLoaders) {
#pragma unroll
    for (int x = 0; x < Stage<D>::kQuads; ++x) {
      int t, cq;
      item_pos(tid + kLoaders * x, t, cq);
      *reinterpret_cast<float4*>(&sm.k[kb][t][4 * cq]) = st.k[x];
      store_kq_t(sm.kT, sm.qT, t, cq, st.k[x], st.q[x]);
    }
#pragma unroll
    for (int x = 0; x < Stage<D>::kV; ++x) {
      const int e = tid + kLoaders * x;
      sm.v[e / R][e % R] = st.v[x];
    }
  }
  if (tid < 32) scan_gates(sm, tid, st.g0, st.g1, st.b0, st.b1);
}

// b) one 4x4 tile (tt, ss), ss <= tt, of A and M, written into the shared memory of the
// cluster's G blocks (G = 1: this block's).
template <int D, int G>
__device__ __forceinline__ void tri_tile(Smem<D>& sm, int task) {
  int tt = 0;
  while ((tt + 1) * (tt + 2) / 2 <= task) ++tt;
  const int ss = task - tt * (tt + 1) / 2;
  float kk[4][4] = {}, qk[4][4] = {};
  pair_sums<D>(sm.kT, sm.qT, sm.kT, tt, ss, kk, qk);
  tri_finish(sm, tt, ss, kk, qk, [&](int t, int s, float av, float mv) {
#pragma unroll
    for (int rank = 0; rank < G; ++rank) {
      Smem<D>* dst = &sm;
#if FT_GDN_CLUSTER
      if constexpr (G > 1) dst = cg::this_cluster().map_shared_rank(&sm, rank);
#endif
      if (s < t) dst->a[t][s] = av;
      dst->mT[s][t] = mv;
    }
  });
}

// c) one 4x4 tile (tokens 4 tt.., rows 4 rr..) of P and O.
template <int D>
__device__ __forceinline__ void state_tile(Smem<D>& sm, int task) {
  constexpr int R = Smem<D>::R;
  const int rr = task % (R / 4), tt = task / (R / 4);
  float sk[4][4] = {}, sq[4][4] = {};
  pair_sums<D>(sm.kT, sm.qT, sm.sT, tt, rr, sk, sq);
  state_finish(sm, tt, rr, sk, sq);
}

// G > 1: a cluster of the G = D / R row groups of one head; each computes 1/G of the tiles of
// b) (the part every row group needs) and writes them into all G blocks. The block barriers
// around b) are then cluster barriers: peers must have finished reading the previous chunk's
// A and M before b) writes them, and b)'s remote writes must land before d) reads them.
template <int D, int G>
__device__ __forceinline__ void sync_b() {
#if FT_GDN_CLUSTER
  if constexpr (G > 1) {
    cg::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

template <int D, int G>
__global__ void __launch_bounds__(kThreads, 1) chunked_kernel(DeltaNetArgs p, const float* gb, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem<D>& sm = *reinterpret_cast<Smem<D>*>(smem_raw);
  constexpr int R = Smem<D>::R;
  constexpr int kStateTiles = (C / 4) * (R / 4);
  constexpr int kUpdateTiles = (R / 4) * (D / 4);
  constexpr int kMyTri = (kTriTiles + G - 1) / G;  // tiles of b) per block (rank < kTriTiles % G: one more)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t j = blockIdx.x;
  const int64_t i = j % p.n_k_heads;
  const int r0 = blockIdx.y * R;
  const int rank = G > 1 ? static_cast<int>(blockIdx.y % G) : 0;  // the cluster spans blockIdx.y
  const int my_tri = (kTriTiles - rank + G - 1) / G;
  (void)kMyTri;
  const bool fresh = p.d_pos != nullptr && *p.d_pos == 0;
  float* Sg = p.state + j * D * D;
  load_state<D>(sm, Sg, r0, fresh);
  // Above the diagonal A and M stay zero (b) writes only s <= t).
  for (int e = tid; e < C * (C + 1); e += kThreads) (&sm.a[0][0])[e] = 0.0f;
  for (int e = tid; e < C * Smem<D>::LT; e += kThreads) (&sm.mT[0][0])[e] = 0.0f;

  // Chunk c's rows are staged while chunk c - 1 computes: loaded into registers during d) (few
  // registers in use there), stored into kT, qT, k[c % 2], v and the gates (none of which e)
  // and f) read) beside e) and f).
  Stage<D> st;
  load_stage<D>(p, gb, st, 0, static_cast<int>(p.n_tok < C ? p.n_tok : C), j, i, r0);
  store_stage<D>(sm, st, 0);
  sync_b<D, G>();
  int kb = 0;
  for (int64_t t0 = 0; t0 < p.n_tok; t0 += C, kb ^= 1) {
    const int n = static_cast<int>(p.n_tok - t0 < C ? p.n_tok - t0 : C);
    for (int task = tid; task < my_tri + kStateTiles; task += kThreads) {
      if (task < my_tri)
        tri_tile<D, G>(sm, task * G + rank);
      else
        state_tile<D>(sm, task - my_tri);
    }
    sync_b<D, G>();
    // Always loaded (past the end: zeros), so that the staged registers are dead outside d).
    const int64_t t1 = t0 + C;
    load_stage<D>(p, gb, st, t1, static_cast<int>(p.n_tok - t1 < C ? p.n_tok - t1 : C), j, i, r0);
    if (warp < 8) substitute(sm, sm.a, warp, lane, n);  // d) forward substitution, R / 8 rows per warp
    const float en = sm.eg[C - 1];  // e^{G_n}, read before the next chunk's gates land
    __syncthreads();
    store_stage<D>(sm, st, kb ^ 1);
    float* out = p.out + t0 * p.ldo + j * D + r0;
    for (int task = tid; task < kUpdateTiles + kStateTiles; task += kThreads) {
      if (task < kUpdateTiles)
        update_tile(sm, task, n, &sm.k[kb][0][0], Smem<D>::LK, en);
      else
        output_tile(sm, sm.mT, task - kUpdateTiles, n, out, p.ldo, scale);
    }
    sync_b<D, G>();
  }
  save_state<D>(sm, Sg, r0);
}

template <int D, int G>
cudaLaunchConfig_t launch_config(const DeltaNetArgs& a, cudaStream_t s, cudaLaunchAttribute* attr) {
  constexpr int R = Smem<D>::R;
  static const bool set = [] {  // once per process and kernel
    FT_CUDA_CHECK(cudaFuncSetAttribute(chunked_kernel<D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(sizeof(Smem<D>))));
    return true;
  }();
  (void)set;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(a.n_v_heads), D / R);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = sizeof(Smem<D>);
  cfg.stream = s;
  if (G > 1) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = 1;
    attr->val.clusterDim.y = G;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

template <int D, int G>
void launch(const DeltaNetArgs& a, const float* gb, float scale, cudaStream_t s) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = launch_config<D, G>(a, s, &attr);
  FT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, chunked_kernel<D, G>, a, gb, scale));
}

// Whether the cluster kernel for d can run here: sm_90+ and a cluster of D / R blocks with
// their shared memory fits (cudaOccupancyMaxActiveClusters >= 1).
template <int D>
bool cluster_fits(const DeltaNetArgs& a) {
  constexpr int G = D / Smem<D>::R;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = launch_config<D, G>(a, nullptr, &attr);
  cfg.gridDim.x = 1;  // one head: the question is whether one cluster fits
  int n = 0;
  return cudaOccupancyMaxActiveClusters(&n, chunked_kernel<D, G>, &cfg) == cudaSuccess && n >= 1;
}

size_t chunked_smem_bytes(int64_t d) {
  switch (d) {
    case 16: return sizeof(Smem<16>);
    case 32: return sizeof(Smem<32>);
    case 64: return sizeof(Smem<64>);
    default: return sizeof(Smem<128>);
  }
}

}  // namespace

size_t deltanet_chunked_smem_bytes(int64_t d, DeltaNetChunkedKind kind) {
  return kind == DeltaNetChunkedKind::kSmall ? deltanet_chunked_small_smem_bytes(d) : chunked_smem_bytes(d);
}

DeltaNetChunkedKind deltanet_chunked_pick(int64_t optin_bytes, int64_t d) {
  return optin_bytes >= static_cast<int64_t>(chunked_smem_bytes(d)) ? DeltaNetChunkedKind::kPlain
                                                                    : DeltaNetChunkedKind::kSmall;
}

DeltaNetChunkedKind deltanet_chunked_default(int64_t d) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 16) return DeltaNetChunkedKind::kSmall;
  static std::atomic<int> optin_of[16] = {};  // 0: not asked yet
  int optin = optin_of[dev].load(std::memory_order_relaxed);
  if (optin == 0) {
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) optin = -1;
    optin_of[dev].store(optin, std::memory_order_relaxed);
  }
  return deltanet_chunked_pick(optin, d);
}

// d 128 needs 223 KiB of shared memory per block in the plain and cluster kinds: sm_90 (227
// KiB) has it, sm_80 (163 KiB) and sm_86/89/120 (99 KiB) do not and run kSmall (89 KiB).
bool deltanet_chunked_supported(const DeltaNetArgs& a, DeltaNetChunkedKind kind) {
  if (!deltanet_supported(a.d) || reinterpret_cast<uintptr_t>(a.y) % 16 != 0 || a.ldy % 4 != 0) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 16) return false;
  // The device's answer per (device, d, kind), asked once: the forward asks every layer and
  // the cluster occupancy query is not free.
  static std::atomic<int8_t> known[16][4][3] = {};
  const int di = a.d == 16 ? 0 : a.d == 32 ? 1 : a.d == 64 ? 2 : 3;
  const int ki = kind == DeltaNetChunkedKind::kCluster ? 1 : kind == DeltaNetChunkedKind::kSmall ? 2 : 0;
  std::atomic<int8_t>& slot = known[dev][di][ki];
  if (const int8_t v = slot.load(std::memory_order_relaxed); v != 0) return v > 0;
  int optin = 0, cc = 0;
  bool ok = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            static_cast<size_t>(optin) >= deltanet_chunked_smem_bytes(a.d, kind);
  if (ok && ki == 1 && a.d >= 64) {  // d < 64: one row group, the plain kernel
    ok = cc >= 9 && (a.d == 64 ? cluster_fits<64>(a) : cluster_fits<128>(a));
    cudaGetLastError();  // a refused occupancy query must not linger as the last error
  }
  slot.store(ok ? 1 : -1, std::memory_order_relaxed);
  return ok;
}

void deltanet_chunked(const DeltaNetArgs& a, float* gb, cudaStream_t s, DeltaNetChunkedKind kind) {
  deltanet_check(a);
  if (!deltanet_chunked_supported(a, kind))
    fail("cuda deltanet_chunked: needs 16-byte aligned y rows (ldy {}) and {} bytes of shared memory per block "
         "(deltanet_chunked_supported)",
         a.ldy, deltanet_chunked_smem_bytes(a.d, kind));
  if (a.n_tok <= 0) return;
  deltanet_prepare(a, gb, s);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(a.d));
  if (kind == DeltaNetChunkedKind::kSmall) {
    deltanet_chunked_small(a, gb, inv_sqrt_d, s);
    FT_CUDA_CHECK_LAUNCH();
    return;
  }
  const bool cl = kind == DeltaNetChunkedKind::kCluster;
  switch (a.d) {
    case 16: launch<16, 1>(a, gb, inv_sqrt_d, s); break;
    case 32: launch<32, 1>(a, gb, inv_sqrt_d, s); break;
    case 64: cl ? launch<64, 2>(a, gb, inv_sqrt_d, s) : launch<64, 1>(a, gb, inv_sqrt_d, s); break;
    default: cl ? launch<128, 4>(a, gb, inv_sqrt_d, s) : launch<128, 1>(a, gb, inv_sqrt_d, s); break;
  }
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
