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
// Direct layout of a step (the tiled layout's 2,304-byte piece of 16 rows x 4 blocks, permuted):
//   bytes 0..2047: vector j (0..3) of lane l at 16 (32 j + l): words 4 j .. 4 j + 3 of the lane's 16
//     code words, word q = 8 gh + 2 t + r (r 0: row g, 1: row g + 8), as mma_step_acc reads them;
//   bytes 2048..2303: lane l's 8 bytes at 2048 + 8 l: the 16-bit scale pairs {gh 0 row g, gh 0 row
//     g + 8, gh 1 row g, gh 1 row g + 8} (bytes 2h, 2h + 1 of block 2 gh + (c >> 1)'s scale word).
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

// Tiled (nvfp4_tiled.h) -> direct, in place per step piece is not possible (a lane's words come from
// two rows), so src and dst differ. One thread a (piece, lane).
__global__ void repack_direct(const uint8_t* src, uint8_t* dst, int64_t pieces) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= pieces * 32) return;
  const int64_t piece = i / 32;
  const int lane = static_cast<int>(i % 32), g = lane >> 2, c = lane & 3;
  const uint8_t* st = src + piece * kMmaStageBytes;
  uint8_t* d = dst + piece * kMmaStageBytes;
  for (int gh = 0; gh < 2; ++gh)
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < 2; ++r) {
        const int off = (2 * gh + (t >> 1)) * 36 + 4 + 16 * (t & 1) + 4 * c;
        const uint32_t w = *reinterpret_cast<const uint32_t*>(st + (g + 8 * r) * kMmaRowStep + off);
        const int q = 8 * gh + 2 * t + r, j = q >> 2;
        *reinterpret_cast<uint32_t*>(d + 16 * (32 * j + lane) + 4 * (q & 3)) = w;
      }
  uint16_t sc[4];
  for (int gh = 0; gh < 2; ++gh) {
    const int bb = 2 * gh + (c >> 1), h = c & 1;
    for (int r = 0; r < 2; ++r) {
      const uint32_t s = *reinterpret_cast<const uint32_t*>(st + (g + 8 * r) * kMmaRowStep + 36 * bb);
      sc[2 * gh + r] = static_cast<uint16_t>(s >> (16 * h));
    }
  }
  for (int u = 0; u < 4; ++u) *reinterpret_cast<uint16_t*>(d + 2048 + 8 * lane + 2 * u) = sc[u];
}

struct StepRegs {
  uint4 v[4];
  uint2 s;
};

// pc: the lane's first code vector of the step (step + 16 lane), ps: its scale pair (step + 2048 + 8 lane).
__device__ __forceinline__ void load_step(const uint8_t* pc, const uint8_t* ps, StepRegs& r) {
#pragma unroll
  for (int j = 0; j < 4; ++j) r.v[j] = __ldcs(reinterpret_cast<const uint4*>(pc + 512 * j));
  r.s = __ldcs(reinterpret_cast<const uint2*>(ps));
}

__device__ __forceinline__ uint32_t word_of(const StepRegs& r, int q) {
  const uint4& v = r.v[q >> 2];
  return (q & 3) == 0 ? v.x : (q & 3) == 1 ? v.y : (q & 3) == 2 ? v.z : v.w;
}

// mma_step_acc<kMmaRowStep, true (K32), false, CHK> on registers: the same mma chains and epilogue.
template <bool CHK>
__device__ __forceinline__ void step_acc(const StepRegs& r, const uint8_t* frag, const float* xd, int step,
                                         const E2m1Table& tab, int my_tile, uint4 (&bx)[4], int c, float& acc0,
                                         float& acc8) {
#pragma unroll
  for (int gh = 0; gh < 2; ++gh) {
    const int grp = 2 * step + gh;
    int cp[4] = {0, 0, 0, 0}, cn[4] = {0, 0, 0, 0};
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (my_tile == t) bx[t] = MmaFrag<false>::load(frag + (grp * 4 + t) * 4 * MmaFrag<false>::kBytes);
      uint32_t p0l, p0h, n0l, n0h, p8l, p8h, n8l, n8h;
      e2m1x8_pn(word_of(r, 8 * gh + 2 * t), tab, p0l, p0h, n0l, n0h);
      e2m1x8_pn(word_of(r, 8 * gh + 2 * t + 1), tab, p8l, p8h, n8l, n8h);
      mma_s8_16832(cp, p0l, p8l, p0h, p8h, bx[t].x, bx[t].y);
      mma_s8_16832(cn, n0l, n8l, n0h, n8h, bx[t].z, bx[t].w);
    }
    int cc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) cc[j] = cp[j] + cn[j];
    const int bb = 2 * gh + (c >> 1), h = c & 1;
    const float dx = xd[2 * (kMmaStepBlocks * step + bb) + h];
    const uint32_t sw = gh == 0 ? r.s.x : r.s.y;
    float s0a, s0b, s8a, s8b;
    nvfp4_scales2<CHK>(sw & 0xFFFFu, s0a, s0b);
    nvfp4_scales2<CHK>(sw >> 16, s8a, s8b);
    acc0 = fmaf(static_cast<float>(cc[0]), s0a * dx, acc0);
    acc0 = fmaf(static_cast<float>(cc[1]), s0b * dx, acc0);
    acc8 = fmaf(static_cast<float>(cc[2]), s8a * dx, acc8);
    acc8 = fmaf(static_cast<float>(cc[3]), s8b * dx, acc8);
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

  StepRegs ring[PD];
#pragma unroll
  for (int u = 0; u < PD; ++u)
    if (u < my_steps) load_step(pc + u * kStride, ps + u * kStride, ring[u]);
  pdl_wait();
  pdl_trigger();

  uint8_t* frag_s = smem + sm.frag;
  float* xd_s = reinterpret_cast<float*>(smem + sm.xd);
  const bool one_pass = (NW >= 8 && mma_build_x_1pass<8, 2>(frag_s, xd_s, p.xq, p.k, nb, NW * 32)) ||
                        (NW == 4 && mma_build_x_1pass<4, 1>(frag_s, xd_s, p.xq, p.k, nb, NW * 32));
  if (!one_pass) mma_build_x(frag_s, xd_s, p.xq, 0, 0, 1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const float* xd = xd_s;
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
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
      step_acc<CHK>(ring[u], frag, xd, warp + NW * (i0 + u), tab, my_tile, bx, c, acc0, acc8);
      load_step(pc + (u + PD) * kStride, ps + (u + PD) * kStride, ring[u]);
    }
  }
  for (; i0 < my_steps; i0 += PD, pc += PD * kStride, ps += PD * kStride) {
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      const int i = i0 + u;
      if (i < my_steps) {
        step_acc<CHK>(ring[u], frag, xd, warp + NW * i, tab, my_tile, bx, c, acc0, acc8);
        if (i + PD < my_steps) load_step(pc + (u + PD) * kStride, ps + (u + PD) * kStride, ring[u]);
      }
    }
  }
  float* red = reinterpret_cast<float*>(smem + sm.red);
  mma_warp_rows_out(acc0, acc8, g, c, red, warp);
  __syncthreads();
  if (threadIdx.x < kMmaRows) {
    const int64_t row = row0 + threadIdx.x;
    if (row < p.rows) p.y[row] = mma_rows_sum(red, NW, static_cast<int>(threadIdx.x));
  }
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

  uint8_t* frag_s = smem + sm.frag;
  float* xd_s = reinterpret_cast<float*>(smem + sm.xd);
  const bool one_pass = (NW >= 8 && mma_build_x_1pass<8, 2>(frag_s, xd_s, p.xq, p.k, nb, NW * 32)) ||
                        (NW == 4 && mma_build_x_1pass<4, 1>(frag_s, xd_s, p.xq, p.k, nb, NW * 32));
  if (!one_pass) mma_build_x(frag_s, xd_s, p.xq, 0, 0, 1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const float* xd = xd_s;
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
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
        StepRegs r;
#pragma unroll
        for (int j = 0; j < 4; ++j) r.v[j] = *reinterpret_cast<const uint4*>(lc + u * kMmaStageBytes + 512 * j);
        r.s = *reinterpret_cast<const uint2*>(ls + u * kMmaStageBytes);
        issue(i + NS - 1, (u + NS - 1) % NS);  // into the stage read a step ago (its loads are in r's past)
        step_acc<CHK>(r, frag, xd, warp + NW * i, tab, my_tile, bx, c, acc0, acc8);
      }
    }
  }
  cp_async_wait(0);
  float* red = reinterpret_cast<float*>(smem + sm.red);
  mma_warp_rows_out(acc0, acc8, g, c, red, warp);
  __syncthreads();
  if (threadIdx.x < kMmaRows) {
    const int64_t row = row0 + threadIdx.x;
    if (row < p.rows) p.y[row] = mma_rows_sum(red, NW, static_cast<int>(threadIdx.x));
  }
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
