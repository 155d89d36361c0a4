// Pieces the NVFP4 tensor-core GEMV kernels share (gemv_mma.cu: dense one token;
// gemv_mma_experts.cu: grouped expert gate/up in the slab kernel's summation order). See
// gemv_mma.cu for the layout: a CTA owns 16 rows, a step is 4 NVFP4 blocks (144 bytes) of each
// row, lane (g, c) decodes word c of a 16-byte tile of rows g and g + 8, and the activations
// sit in B fragments {x, -x} built once per CTA in shared memory (x_frag). CUDA only.
#pragma once

#include <cstdint>

#include "cuda/gemv_q8_formats.cuh"

namespace ft::cuda::gemv_detail {

inline constexpr int kMmaRows = 16;                                 // rows per CTA (the mma's M)
inline constexpr int kMmaStepBlocks = 4;                            // NVFP4 blocks per step
inline constexpr int kMmaRowStep = 144;                             // bytes of a row per step (9 x 16)
inline constexpr int kMmaStageBytes = kMmaRows * kMmaRowStep;       // 2304
inline constexpr int kMmaVecPerLane = (kMmaStageBytes / 16 + 31) / 32;  // 5 (144 vectors)
inline constexpr int kMmaFragGroupBytes = 4 * 4 * 16;  // per group: 4 tiles x 4 lanes x {x0, x1, -x0, -x1}

__device__ __forceinline__ void mma_s8_16816(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(b));
}

__device__ __forceinline__ uint4 mma_lds128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

// Shared memory of a CTA: the E2M1 table (8 bytes, padded to 16), x_frag (k / 128 groups x
// 256 bytes), the activation scales times 0.5 (k / 32 floats), the warps' stages, then
// red_bytes of row sums.
struct MmaSmem {
  int frag, xd, stage, red, total;
};
inline MmaSmem mma_smem(int64_t k, int nw, int ns, int red_bytes) {
  MmaSmem m{};
  m.frag = 16;
  m.xd = m.frag + static_cast<int>(k / 128) * kMmaFragGroupBytes;
  m.stage = m.xd + static_cast<int>(k / 32) * 4;
  m.stage = (m.stage + 15) & ~15;
  m.red = m.stage + nw * ns * kMmaStageBytes;
  m.total = m.red + red_bytes;
  return m;
}

// x_frag, the activation scales and the E2M1 table of one act_q8 row xq (nb NVFP4 blocks) into
// shared memory, by all nthreads threads of the CTA (the caller syncs). Fragment f = (group,
// tile t, lane c of the active four) = 16 bytes {x0, x1, -x0, -x1}: tile t of the group is
// block 2 group + (t >> 1), codes half h = t & 1; lane c's word is sub-block 2h + (c >> 1),
// bytes 4 (c & 1) .. + 3: nibble order of e2m1x8_pn, x_pair_0 / x_pair_1 of the activations 8
// apart. Batches of 4 fragments per thread: their 8 loads (L2 round trips, while the first
// stages stream in) are in flight together rather than one after another.
__device__ __forceinline__ void mma_build_x(uint8_t* smem, const MmaSmem& sm, const uint8_t* xq, int64_t k, int nb,
                                            int nthreads) {
  using namespace q8_detail;
  const int n_frag = (nb / 2) * 16;
  constexpr int kB = 4;
  for (int f0 = static_cast<int>(threadIdx.x); f0 < n_frag; f0 += kB * nthreads) {
    uint32_t a[kB], b[kB];
#pragma unroll
    for (int u = 0; u < kB; ++u) {
      const int f = f0 + u * nthreads, grp = f >> 4, t = (f >> 2) & 3, fc = f & 3;
      const int e = 128 * grp + 64 * (t >> 1) + 16 * (2 * (t & 1) + (fc >> 1)) + 4 * (fc & 1);
      a[u] = b[u] = 0;
      if (f < n_frag) {
        a[u] = __ldg(reinterpret_cast<const uint32_t*>(xq + e));
        b[u] = __ldg(reinterpret_cast<const uint32_t*>(xq + e + 8));
      }
    }
#pragma unroll
    for (int u = 0; u < kB; ++u) {
      const int f = f0 + u * nthreads;
      const uint32_t x0 = x_pair_0(a[u], b[u]), x1 = x_pair_1(a[u], b[u]);
      if (f < n_frag) *reinterpret_cast<uint4*>(smem + sm.frag + 16 * f) = make_uint4(x0, x1, __vneg4(x0), __vneg4(x1));
    }
  }
  float* xd = reinterpret_cast<float*>(smem + sm.xd);
  for (int i = static_cast<int>(threadIdx.x); i < nb * 2; i += nthreads)
    xd[i] = __ldg(reinterpret_cast<const float*>(xq + k + 8 * i)) * 0.5f;
  if (threadIdx.x == 0) {
    reinterpret_cast<uint32_t*>(smem)[0] = kMag0;
    reinterpret_cast<uint32_t*>(smem)[1] = kMag1;
  }
}

}  // namespace ft::cuda::gemv_detail
