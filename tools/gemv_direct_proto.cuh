// A prototype for the bench only (ft-bench-gemv-cuda --direct): the tiled NVFP4 tensor-core GEMV
// (gemv_mma.cu) with each lane's bytes of a step loaded straight into registers, in a layout repacked
// so that they arrive in the order mma_step_acc consumes them -- no cp.async ring, no shared-memory
// stage, no LDS of weights.
//
// Why try it: on the H200 the tiled GEMV runs about as fast as on the H100 (4096x14336 11.21 against
// 11.44 us back to back) with ~1.4x the read bandwidth, so the kernel's own work a step holds it there.
// Of a step loop's 264 SASS instructions (the clean instance, bench/sass_local.sh) ~50 stage the weights:
// 5 LDGSTS and their offsets, the ring's index and wait, and 22 LDS of code and scale words. Here a
// step is 4 LDG.128 + 1 LDG.64 a lane. The sums are mma_step_acc's in its order: the same bits as the
// tiled kernel at the same warps.
//
// The layout is the engine's lane-major tiled one (src/cuda/nvfp4_tiled.h "Lanes", nvfp4_tile(.., lanes)), and
// a step's sums are mma_lane_step_acc's (gemv_mma.cuh); the engine's LANES instances feed it through a cp.async
// ring instead of registers (H100 session 49: this register ring holds fewer bytes in flight at 8 warps).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/cp_async.cuh"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/pdl.cuh"

namespace ft::cuda::direct_proto {

using namespace gemv_detail;
using namespace q8_detail;

struct DirectParams {
  const uint8_t* w;  // direct layout, tiles of 16 rows x k, steps of 2304 bytes
  const uint8_t* xq;
  float* y;
  int64_t rows, k;
};

// pc: the lane's first code vector of the step (step + 16 lane), ps: its scale pair (step + 2048 + 8 lane).
__device__ __forceinline__ void load_step(const uint8_t* pc, const uint8_t* ps, MmaLaneStep& r) {
#pragma unroll
  for (int j = 0; j < 4; ++j) r.v[j] = __ldcs(reinterpret_cast<const uint4*>(pc + 512 * j));
  r.s = __ldcs(reinterpret_cast<const uint2*>(ps));
}

// Both kernels after their PDL wait: the activation fragments and block scales built in shared memory (one pass
// where an instance fits it), the E2M1 table put, a barrier; the step loop's views of them.
struct DirectX {
  const float* xd;
  E2m1Table tab;
};
template <int NW>
__device__ __forceinline__ DirectX direct_build_x(const DirectParams& p, const MmaSmem& sm, uint8_t* smem, int nb) {
  uint8_t* frag_s = smem + sm.frag;
  float* xd_s = reinterpret_cast<float*>(smem + sm.xd);
  const bool one_pass = (NW >= 8 && mma_build_x_1pass<8, 2>(frag_s, xd_s, p.xq, p.k, nb, NW * 32)) ||
                        (NW == 4 && mma_build_x_1pass<4, 1>(frag_s, xd_s, p.xq, p.k, nb, NW * 32));
  if (!one_pass) mma_build_x(frag_s, xd_s, p.xq, 0, 0, 1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  return {xd_s, E2m1Table{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]}};
}
// Both kernels' end: the warps' row sums through shared memory, in warp order, into y.
template <int NW>
__device__ __forceinline__ void direct_rows_out(const DirectParams& p, const MmaSmem& sm, uint8_t* smem, float acc0,
                                                float acc8, int g, int c, int warp, int64_t row0) {
  float* red = reinterpret_cast<float*>(smem + sm.red);
  mma_warp_rows_out(acc0, acc8, g, c, red, warp);
  __syncthreads();
  if (threadIdx.x < kMmaRows) {
    const int64_t row = row0 + threadIdx.x;
    if (row < p.rows) p.y[row] = mma_rows_sum(red, NW, static_cast<int>(threadIdx.x));
  }
}

// NW warps a 16-row tile (warp w: steps w, w + NW, ...), PD steps of each warp's in registers ahead.
template <int NW, int PD, bool CHK>
__global__ void __launch_bounds__(NW * 32) direct_kernel(const DirectParams p, const MmaSmem sm) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  const uint8_t* wbase = p.w + row0 * (p.k / 64 * 36);
  const int my_steps = warp < n_steps ? (n_steps - warp + NW - 1) / NW : 0;
  // Running pointers, so that a step's 5 loads are immediate offsets from two registers.
  constexpr int kStride = NW * kMmaStageBytes;  // bytes between a warp's steps
  const uint8_t* pc = wbase + warp * kMmaStageBytes + 16 * lane;
  const uint8_t* ps = wbase + warp * kMmaStageBytes + 2048 + 8 * lane;

  MmaLaneStep ring[PD];
#pragma unroll
  for (int u = 0; u < PD; ++u)
    if (u < my_steps) load_step(pc + u * kStride, ps + u * kStride, ring[u]);
  pdl_wait();
  pdl_trigger();

  const DirectX dx = direct_build_x<NW>(p, sm, smem, nb);
  const float* xd = dx.xd;
  const E2m1Table tab = dx.tab;
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;

  float acc0 = 0.0f, acc8 = 0.0f;
  int i0 = 0;
  // Whole rounds whose refills all exist: no per-step tests.
  for (; i0 + 2 * PD <= my_steps; i0 += PD, pc += PD * kStride, ps += PD * kStride) {
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      mma_lane_step_acc<true, false, CHK>(ring[u], frag, xd, warp + NW * (i0 + u), tab, my_tile, bx, c, acc0, acc8);
      load_step(pc + (u + PD) * kStride, ps + (u + PD) * kStride, ring[u]);
    }
  }
  for (; i0 < my_steps; i0 += PD, pc += PD * kStride, ps += PD * kStride) {
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      const int i = i0 + u;
      if (i < my_steps) {
        mma_lane_step_acc<true, false, CHK>(ring[u], frag, xd, warp + NW * i, tab, my_tile, bx, c, acc0, acc8);
        if (i + PD < my_steps) load_step(pc + (u + PD) * kStride, ps + (u + PD) * kStride, ring[u]);
      }
    }
  }
  direct_rows_out<NW>(p, sm, smem, acc0, acc8, g, c, warp, row0);
}

// The same layout behind a per-lane cp.async ring of NS stages in shared memory: each lane copies its own 72
// bytes of a step (4 x 16 + 8) and reads back only those (4 LDS.128 + 1 LDS.64), so the thread's own
// cp.async.wait_group orders them -- no __syncwarp -- and the ring holds the tiled kernel's depth of bytes in
// flight without the register ring's cost (96-128 registers at 2-4 steps ahead).
template <int NW, int NS, bool CHK>
__global__ void __launch_bounds__(NW * 32) direct_cp_kernel(const DirectParams p, const MmaSmem sm) {
  static_assert(NS >= 2 && NS <= 4, "cp_async_wait takes 0..3 pending groups");
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  const uint8_t* wbase = p.w + row0 * (p.k / 64 * 36);
  const int my_steps = warp < n_steps ? (n_steps - warp + NW - 1) / NW : 0;
  constexpr int kStride = NW * kMmaStageBytes;
  const uint8_t* pc = wbase + warp * kMmaStageBytes + 16 * lane;
  const uint8_t* ps = wbase + warp * kMmaStageBytes + 2048 + 8 * lane;
  // This lane's bytes of stage u: codes at lc + u * kMmaStageBytes + 512 j, scales at ls + u * kMmaStageBytes.
  uint8_t* lc = smem + sm.stage + warp * (NS * kMmaStageBytes) + 16 * lane;
  uint8_t* ls = smem + sm.stage + warp * (NS * kMmaStageBytes) + 2048 + 8 * lane;
  auto issue = [&](int i, int u) {
    if (i < my_steps) {
#pragma unroll
      for (int j = 0; j < 4; ++j) cp_async16(lc + u * kMmaStageBytes + 512 * j, pc + i * kStride + 512 * j);
      cp_async8(ls + u * kMmaStageBytes, ps + i * kStride);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int u = 0; u < NS - 1; ++u) issue(u, u);
  pdl_wait();
  pdl_trigger();

  const DirectX dx = direct_build_x<NW>(p, sm, smem, nb);
  const float* xd = dx.xd;
  const E2m1Table tab = dx.tab;
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;

  float acc0 = 0.0f, acc8 = 0.0f;
  for (int i0 = 0; i0 < my_steps; i0 += NS) {
#pragma unroll
    for (int u = 0; u < NS; ++u) {
      const int i = i0 + u;
      if (i < my_steps) {  // warp-uniform
        cp_async_wait(NS - 2);  // step i's copies (this lane's) landed
        MmaLaneStep r;
#pragma unroll
        for (int j = 0; j < 4; ++j) r.v[j] = *reinterpret_cast<const uint4*>(lc + u * kMmaStageBytes + 512 * j);
        r.s = *reinterpret_cast<const uint2*>(ls + u * kMmaStageBytes);
        issue(i + NS - 1, (u + NS - 1) % NS);  // into the stage read a step ago (its loads are in r's past)
        mma_lane_step_acc<true, false, CHK>(r, frag, xd, warp + NW * i, tab, my_tile, bx, c, acc0, acc8);
      }
    }
  }
  cp_async_wait(0);
  direct_rows_out<NW>(p, sm, smem, acc0, acc8, g, c, warp, row0);
}

template <int NW, int NS, bool CHK>
bool launch_cp(const DirectParams& p, cudaStream_t s) {
  const MmaSmem sm = mma_smem(p.k, NW, NS, NW * kMmaRows * 4);
  auto kernel = direct_cp_kernel<NW, NS, CHK>;
  static int opted = 0;
  if (sm.total > opted) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sm.total) != cudaSuccess) return false;
    opted = sm.total;
  }
  launch_pdl(kernel, dim3(static_cast<unsigned>((p.rows + 15) / 16)), dim3(NW * 32), static_cast<size_t>(sm.total), s,
             p, sm);
  return true;
}

// Launches the instance for (nw, pd, chk); false when there is none or it cannot be resident.
template <int NW, int PD, bool CHK>
bool launch_one(const DirectParams& p, cudaStream_t s) {
  const MmaSmem sm = mma_smem(p.k, NW, 0, NW * kMmaRows * 4);
  auto kernel = direct_kernel<NW, PD, CHK>;
  static int opted = 0;  // the largest dynamic shared memory opted into so far
  if (sm.total > opted) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sm.total) != cudaSuccess) return false;
    opted = sm.total;
  }
  launch_pdl(kernel, dim3(static_cast<unsigned>((p.rows + 15) / 16)), dim3(NW * 32), static_cast<size_t>(sm.total), s,
             p, sm);
  return true;
}
// ring: the per-lane cp.async ring of pd stages (direct_cp_kernel) instead of pd steps in registers.
inline bool launch(const DirectParams& p, int nw, int pd, bool chk, cudaStream_t s, bool ring = false) {
  if (p.k % 256 != 0) return false;
  if (ring) {
    switch (nw * 100 + pd * 10 + (chk ? 1 : 0)) {
      case 420: return launch_cp<4, 2, false>(p, s);
      case 421: return launch_cp<4, 2, true>(p, s);
      case 430: return launch_cp<4, 3, false>(p, s);
      case 431: return launch_cp<4, 3, true>(p, s);
      case 830: return launch_cp<8, 3, false>(p, s);
      case 831: return launch_cp<8, 3, true>(p, s);
      case 840: return launch_cp<8, 4, false>(p, s);
      case 841: return launch_cp<8, 4, true>(p, s);
      default: return false;
    }
  }
  switch (nw * 100 + pd * 10 + (chk ? 1 : 0)) {
    case 420: return launch_one<4, 2, false>(p, s);
    case 421: return launch_one<4, 2, true>(p, s);
    case 430: return launch_one<4, 3, false>(p, s);
    case 431: return launch_one<4, 3, true>(p, s);
    case 820: return launch_one<8, 2, false>(p, s);
    case 821: return launch_one<8, 2, true>(p, s);
    case 830: return launch_one<8, 3, false>(p, s);
    case 831: return launch_one<8, 3, true>(p, s);
    case 840: return launch_one<8, 4, false>(p, s);
    case 841: return launch_one<8, 4, true>(p, s);
    default: return false;
  }
}

}  // namespace ft::cuda::direct_proto
