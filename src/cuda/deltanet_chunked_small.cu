// deltanet_chunked, DeltaNetChunkedKind::kSmall (deltanet.h): the chunked Gated DeltaNet of
// deltanet_chunked.cu in <= 99 KiB of shared memory per block, for the GPUs whose opt-in limit
// is below the plain kernel's 223 KiB at d 128 (RTX 30/40/50: sm_86/89/120, 99 KiB; A100:
// sm_80, 163 KiB). Same grid (H_v, D / R row groups of S), same chunk of C = 64 tokens, same
// phases a) .. f) (deltanet_chunked_phases.cuh, shared with the plain kernel) and the same
// arithmetic in the same order (the test checks it bit for bit against the plain kernel), with
// three changes to the storage:
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
#include "cuda/deltanet_chunked_phases.cuh"
#include "cuda/ops_math.cuh"

namespace ft::cuda {
namespace {

using namespace gdn_chunked;

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

// A slice of the chunk's keys and queries in registers, loaded a phase before it is stored
// (the next slice during this one's products, the next chunk's first slice during d)), so
// its global latency hides behind work.
template <int D>
struct Slice {
  static constexpr int kItems = C * SmallSmem<D>::W / 4 / kLoaders;  // float4s of K (and of Q) per loader
  float4 k[kItems], q[kItems];
};

// a) slice w of the chunk at t0 (n tokens; zeros past them) into registers (load_kq).
template <int D>
__device__ __forceinline__ void load_slice(const DeltaNetArgs& p, int64_t t0, int n, int64_t i, int w,
                                           Slice<D>& sl) {
  load_kq<D>(p, t0, n, i * D + w * SmallSmem<D>::W, sl.k, sl.q);
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
    store_kq_t(sm.kq.kT, sm.kq.qT, t, cq, sl.k[x], sl.q[x]);
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
    const float x0 = ta < n ? ga[2] : 0.0f, x1 = tb < n ? gbb[2] : 0.0f;
    const float b0 = ta < n ? ga[1] : 0.0f, b1 = tb < n ? gbb[1] : 0.0f;
    scan_gates(sm, lane, x0, x1, b0, b1);
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
  load_state<D>(sm, Sg, r0, fresh);
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
      if (is_tri)  // b) and c) over slice w
        pair_sums<Sm::W>(sm.kq.kT, sm.kq.qT, sm.kq.kT, ta, tb, acc0, acc1);
      else if (is_state)
        pair_sums<Sm::W>(sm.kq.kT, sm.kq.qT, sm.sT + w * Sm::W, ta, tb, acc0, acc1);
      __syncthreads();  // the slice is read: the next one (or A and M) may overwrite it
    }
    // A and M replace K and Q: their upper triangles are zeroed here (disjoint from what
    // tri_finish writes), since d) and e) read whole rows / columns.
    for (int e = tid; e < C * C; e += kThreads) {  // consecutive threads, consecutive addresses
      const int hi = e / C, lo = e % C;
      if (lo >= hi) sm.am.a[hi][lo] = 0.0f;  // A[t][s], s >= t
      if (hi > lo) sm.am.mT[hi][lo] = 0.0f;  // M[t][s] at mT[s][t], s > t
    }
    if (is_tri) {
      tri_finish(sm, ta, tb, acc0, acc1, [&](int t, int s, float av, float mv) {
        if (s < t) sm.am.a[t][s] = av;
        sm.am.mT[s][t] = mv;
      });
    } else if (is_state) {
      state_finish(sm, ta, tb, acc0, acc1);
    }
    __syncthreads();
    // The next chunk's first slice (zeros past the end), in flight during d).
    const int64_t t1 = t0 + C;
    load_slice<D>(p, t1, static_cast<int>(p.n_tok - t1 < C ? p.n_tok - t1 : C), i, 0, sl);
    if (warp < 8) substitute(sm, sm.am.a, warp, lane, n);  // d) forward substitution, R / 8 rows per warp
    __syncthreads();
    const float en = sm.eg[C - 1];  // e^{G_n} (padded tokens add 0 to G)
    const float* kg = p.y + t0 * p.ldy + key_dim + i * D;
    float* out = p.out + t0 * p.ldo + j * D + r0;
    for (int task = tid; task < kUpdateTiles + kStateTiles; task += kThreads) {
      if (task < kUpdateTiles)
        update_tile(sm, task, n, kg, p.ldy, en);
      else
        output_tile(sm, sm.am.mT, task - kUpdateTiles, n, out, p.ldo, scale);
    }
    __syncthreads();
  }
  save_state<D>(sm, Sg, r0);
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
