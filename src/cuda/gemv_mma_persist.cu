// Persistent NVFP4 decode GEMV on tensor cores (gemv.h, integer path, one token, dense): the
// sums of gemv_mma.cu's kernel, bit for bit, from a grid of at most (SMs x resident CTAs) CTAs
// that walk the 16-row tiles instead of one CTA per tile.
//
// Why: after a dependent kernel, as in every decode step, each CTA of gemv_mma.cu pays a start
// (x_frag from L2, the E2M1 table, two barriers, the cp.async pipeline filled from empty) per
// 16-row tile, and only its first NS - 1 stages can load before pdl_wait; 8-warp / <= 256-CTA
// instances lost 1.5-2.3 us there (H200 run 11). Here x_frag is built once per CTA, and every
// warp streams all its (tile, step) pairs through one cp.async ring that never drains between
// tiles: only the first stages wait on the previous kernel.
// Measured (H200 run 13, benches/h200.md): slower than the mma / slab plan on every dense decode
// shape after a dependent kernel (14336x4096 16.95 vs 14.82 us) and end to end (Llama-8B tg128
// 351.1 vs 394.3 tok/s); faster only on a 248320x2048 head (95.6 vs 103.9 us), the one shape the
// plan gives it. Suspects, unmeasured: the register cap (64, small spills), and the x staging's
// wait_group 0, which also waits for the ring's first weight stages before x_frag is built.
//
// Layout. A CTA holds NG groups of F warps; a group owns one tile at a time and its warp w takes
// steps w, w + F, ... of the tile into its own row sums, exactly as warp w of gemv_mma.cu's
// F-warp CTA (same steps, same order, same mma_step_acc). At the end of a tile the group's warps
// meet at a named barrier (bar.sync 1 + group, F x 32 threads), the lanes' sums are reduced
// as there (xor 1, xor 2) and summed in warp order by the group's first 16 threads from a
// double-buffered partials array (a tile's partials are read before the group passes the next
// tile's barrier, so one barrier per tile suffices). Group gid = blockIdx.x * NG + group
// takes tiles gid, gid + NG gridDim.x, ...: consecutive CTAs land on different SMs, so each SM
// gets an even share.
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

using namespace q8_detail;

constexpr int kRows = kMmaRows;
constexpr int kRowStep = kMmaRowStep;
constexpr int kStageBytes = kMmaStageBytes;
constexpr int kVecPerLane = kMmaVecPerLane;

template <int N>
__device__ __forceinline__ void cp_async_wait_n() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void group_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Registers capped at gemv_mma.cu's 64 (the walk's state took 72-94 uncapped; ptxas reports no
// spills at the cap): 32 warps per SM.
constexpr int persist_min_blocks(int threads) { return 1024 / threads; }

// The act_q8 row (k codes, then k / 32 x {scale, sums}: k + k / 4 bytes, 16-byte aligned) into
// shared memory by cp.async, every thread's pieces in flight at once: one L2 round trip after
// pdl_wait, where mma_build_x's batched loads took 2-3 at k 4096-14336. The caller waits for
// all groups (the ring's pre-wait stages included: they were issued earlier).
__device__ __forceinline__ void persist_stage_x(uint8_t* raw, const uint8_t* xq, int64_t k, int nthreads) {
  const int n16 = static_cast<int>((k + k / 4) / 16);
  for (int i = static_cast<int>(threadIdx.x); i < n16; i += nthreads) cp_async16(raw + 16 * i, xq + 16 * i);
  cp_async_commit();
}

// x_frag and the activation scales times 0.5 from the staged row: mma_build_x's values (same
// fragment order and byte permutes) for one row, read from shared memory.
__device__ __forceinline__ void persist_build_x(const uint8_t* raw, uint8_t* frag, float* xd, int64_t k, int nb,
                                                int nthreads) {
  const int n_frag = (nb / 2) * 16;
  for (int f = static_cast<int>(threadIdx.x); f < n_frag; f += nthreads) {
    const int grp = f >> 4, t = (f >> 2) & 3, fc = f & 3;
    const int e = 128 * grp + 64 * (t >> 1) + 16 * (2 * (t & 1) + (fc >> 1)) + 4 * (fc & 1);
    const uint32_t a = lds32(raw + e), b = lds32(raw + e + 8);
    const uint32_t x0 = x_pair_0(a, b), x1 = x_pair_1(a, b);
    *reinterpret_cast<uint4*>(frag + 16 * f) = make_uint4(x0, x1, __vneg4(x0), __vneg4(x1));
  }
  for (int i = static_cast<int>(threadIdx.x); i < nb * 2; i += nthreads)
    xd[i] = *reinterpret_cast<const float*>(raw + k + 8 * i) * 0.5f;
}

template <int F, int NG, int NS>
__global__ void __launch_bounds__(F * NG * 32, persist_min_blocks(F * NG * 32))
    nvfp4_mma_persist_kernel(const Params p, const MmaSmem sm, int raw_off) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp_cta = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int group = warp_cta / F, warp = warp_cta - group * F;
  const int g = lane >> 2, c = lane & 3;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  const int64_t n_tiles = (p.rows + kRows - 1) / kRows;
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * NG + group, n_groups = static_cast<int64_t>(gridDim.x) * NG;
  const int my_tiles = gid < n_tiles ? static_cast<int>((n_tiles - gid + n_groups - 1) / n_groups) : 0;
  const int my_steps = warp < n_steps ? (n_steps - warp + F - 1) / F : 0;
  uint8_t* stages = smem + sm.stage + warp_cta * (NS * kStageBytes);

  // This lane's cp.async vectors of a step: vector i = lane + 32 v (i < 144) is 16-byte piece
  // o of row q, at 16 i in the stage (q x 144 + 16 o). A partial last tile is read as the last
  // 16 rows (rows >= 16, checked at launch) and stores only its own: a row's sum does not
  // depend on its place in the tile, and no per-row clamp is kept (registers).
  int src_off[kVecPerLane];
#pragma unroll
  for (int v = 0; v < kVecPerLane; ++v) {
    const int i = lane + 32 * v, q = i / 9, o = i - 9 * q;
    src_off[v] = q * static_cast<int>(p.row_bytes) + 16 * o;
  }
  auto tile_row0 = [&](int64_t tile) {
    const int64_t r = tile * kRows;
    return r + kRows <= p.rows ? r : p.rows - kRows;
  };
  // The ring: the warp's (tile j, step i) pairs in order, issued NS - 1 ahead of use.
  int iss_j = 0, iss_i = 0, iss_slot = 0;
  const uint8_t* iss_w = p.w + tile_row0(gid) * p.row_bytes + warp * kRowStep;
  auto issue = [&]() {
    if (iss_j < my_tiles && my_steps > 0) {
      uint8_t* dst = stages + iss_slot * kStageBytes;
#pragma unroll
      for (int v = 0; v < kVecPerLane; ++v)
        if (lane + 32 * v < kStageBytes / 16) cp_async16(dst + 16 * (lane + 32 * v), iss_w + src_off[v]);
      iss_w += F * kRowStep;
      if (++iss_i == my_steps) {
        iss_i = 0;
        ++iss_j;
        iss_w = p.w + tile_row0(gid + iss_j * n_groups) * p.row_bytes + warp * kRowStep;
      }
    }
    cp_async_commit();
    iss_slot = iss_slot + 1 == NS ? 0 : iss_slot + 1;
  };

  // PDL: the weights are never written by earlier kernels, so the first stages load before the
  // wait; the activations only after it.
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue();
  pdl_wait();
  pdl_trigger();

  persist_stage_x(smem + raw_off, static_cast<const uint8_t*>(p.xq), p.k, F * NG * 32);
  mma_put_table(smem);
  cp_async_wait_n<0>();
  __syncthreads();
  persist_build_x(smem + raw_off, smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd), p.k, nb, F * NG * 32);
  __syncthreads();
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  // Loaded from shared memory: a value ptxas cannot re-create per PRMT (H200 run 9).
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};

  // Lane (g, c) feeds B column g: tile g >> 1 when c >> 1 == g & 1, else none.
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;
  float* red = reinterpret_cast<float*>(smem + sm.red) + group * (2 * F * kRows);

  int slot = 0;
  for (int j = 0; j < my_tiles; ++j) {
    float acc0 = 0.0f, acc8 = 0.0f;  // rows g, g + 8
    for (int i = 0; i < my_steps; ++i) {
      cp_async_wait_n<NS - 2>();
      __syncwarp();  // every lane's copies of this step landed; the previous step's stage is free
      issue();
      mma_step_acc(stages + slot * kStageBytes, frag, xd, warp + F * i, tab, my_tile, bx, g, c, acc0, acc8);
      slot = slot + 1 == NS ? 0 : slot + 1;
    }
    // Row sums: the 4 lanes of a row, then the group's warps in order (gemv_mma.cu's order).
    acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
    acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 2);
    acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 1);
    acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 2);
    float* part = red + (j & 1) * (F * kRows);
    if (c == 0) {
      part[warp * kRows + g] = acc0;
      part[warp * kRows + g + 8] = acc8;
    }
    group_barrier(1 + group, F * 32);
    if (warp == 0 && lane < kRows) {
      const int64_t tile = gid + j * n_groups, row = tile_row0(tile) + lane;
      if (row >= tile * kRows) {
        float v = part[lane];
        for (int w = 1; w < F; ++w) v += part[w * kRows + lane];
        const float s = p.row_scale != nullptr ? p.row_scale[row] * p.scale : p.scale;
        store_out(p.y + row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
      }
    }
  }
  cp_async_wait_n<0>();
}

template <class K>
int persist_ctas_per_sm(K kernel, size_t smem, int threads, std::atomic<uint64_t>& cache) {
  const uint64_t c = cache.load(std::memory_order_relaxed);
  if ((c >> 32) == smem && (c & 0xFFFFFFFFu) != 0) return static_cast<int>(c & 0xFFFFFFFFu);
  if (smem > size_t{48} << 10) allow_max_dynamic_smem(kernel);
  int blocks = 0;
  FT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  cache.store((static_cast<uint64_t>(smem) << 32) | static_cast<uint64_t>(blocks), std::memory_order_relaxed);
  return blocks;
}

std::atomic<int64_t> g_persist_launches{0};

template <int F, int NG, int NS>
bool launch_persist(const Params& p, cudaStream_t stream) {
  // Shared memory: mma_smem's layout, then the group partials, then the staged act_q8 row.
  const int red_bytes = NG * 2 * F * kRows * 4;
  const MmaSmem sm = mma_smem(p.k, F * NG, NS, red_bytes + static_cast<int>(p.k + p.k / 4));
  if (sm.total > max_smem_optin()) return false;
  auto kernel = nvfp4_mma_persist_kernel<F, NG, NS>;
  static std::atomic<uint64_t> cache{0};
  const int per_sm = persist_ctas_per_sm(kernel, static_cast<size_t>(sm.total), F * NG * 32, cache);
  if (per_sm < 1) return false;
  // As many tiles per group as one resident wave of groups needs, then just enough groups for
  // that count: 1792 tiles on 1056 resident groups run 896 groups of 2, not 736 of 2 and 320
  // of 1 (the same finish, 160 x_frag builds fewer).
  const int64_t n_tiles = (p.rows + kRows - 1) / kRows;
  const int64_t resident = static_cast<int64_t>(sm_count()) * per_sm * NG;
  const int64_t per_group = (n_tiles + resident - 1) / resident, groups = (n_tiles + per_group - 1) / per_group;
  const dim3 grid(static_cast<unsigned>((groups + NG - 1) / NG));
  launch_pdl(kernel, grid, dim3(F * NG * 32), static_cast<size_t>(sm.total), stream, p, sm, sm.red + red_bytes);
  g_persist_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool gemv_nvfp4_mma_persist(const Params& p, int64_t n_tok, bool grouped, int fold, int groups, int stages,
                            cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  // As gemv_nvfp4_mma: one token, dense, whole steps, 16-byte aligned rows, 32-bit offsets.
  // And at least one whole tile (a partial last tile is read as the last 16 rows).
  if (grouped || n_tok != 1 || nb % kMmaStepBlocks != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      p.row_bytes % 16 != 0 || p.row_bytes * kRows > (int64_t{1} << 30) || p.rows < kRows)
    return false;
  // Instances (fold x groups x stages) swept in H200 run 13; others take the nearest.
  switch (fold * 100 + groups * 10 + stages) {
    case 412: return launch_persist<4, 1, 2>(p, stream);
    case 413: return launch_persist<4, 1, 3>(p, stream);
    case 422: return launch_persist<4, 2, 2>(p, stream);
    case 423: return launch_persist<4, 2, 3>(p, stream);
    case 424: return launch_persist<4, 2, 4>(p, stream);
    case 442: return launch_persist<4, 4, 2>(p, stream);
    case 812: return launch_persist<8, 1, 2>(p, stream);
    case 813: return launch_persist<8, 1, 3>(p, stream);
    case 814: return launch_persist<8, 1, 4>(p, stream);
    case 816: return launch_persist<8, 1, 6>(p, stream);
    case 823: return launch_persist<8, 2, 3>(p, stream);
    case 1612: return launch_persist<16, 1, 2>(p, stream);
    case 1613: return launch_persist<16, 1, 3>(p, stream);
    default:
      if (fold >= 16) return launch_persist<16, 1, 2>(p, stream);
      if (fold >= 8) return launch_persist<8, 1, 3>(p, stream);
      return launch_persist<4, 2, 3>(p, stream);
  }
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_persist_launches() {
  return gemv_detail::g_persist_launches.load(std::memory_order_relaxed);
}
}  // namespace ft::cuda
