// NVFP4 decode GEMV on tensor cores fed by bulk copies from every warp (opt-in,
// FT_GEMV_NVFP4_TMA): gemv_mma.cu's CTA of 16 rows and its per-step math (mma_step_acc), but
// warp w owns a contiguous range of the row's steps (w * n / NW up to (w + 1) * n / NW) and
// loads it in chunks of J steps: 16 row copies of J x 144 bytes a chunk, one cp.async.bulk per
// row issued by lanes 0..15 and completed on the warp's mbarrier, NS chunks in flight, the first
// ones before pdl_wait. gemv_mma.cu's warps instead stride over the steps (w, w + NW, ...) with
// 16-byte cp.async, 144 bytes of a row a copy.
// Why: H200 session 11 (ft-bench-gemv-cuda --sol): bulk copies of whole row segments read 33-66 MB
// at 80-87% of read bandwidth where every 16-byte-load pattern stayed at 51-72%; the bulk GEMV
// of one CTA per SM (gemv_mma_bulk.cu) lost because its few consumer warps could not keep up.
// Here every warp feeds itself at the mma kernel's occupancy. Sums: a warp's steps in order, then
// the warps in order (fp32 reassociation against the twin gemv_q8_ref, as gemv_mma.cu; not its
// bits). Chunk rows sit kTmaPitch(J) bytes apart: J x 144 padded so that a row's words start 4
// banks after the row before (conflict-free for mma_step_acc's lanes).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/act_q8.h"
#include "cuda/bulk_copy.cuh"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_mma.cuh"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

constexpr int kRows = kMmaRows;

__host__ __device__ constexpr int tma_pitch(int j) { return j * kMmaRowStep + 4 * ((4 - 4 * j) & 31); }
static_assert(tma_pitch(1) == kMmaRowStep && tma_pitch(4) % 128 == 16 && tma_pitch(8) % 16 == 0, "pitch");

struct TmaSmem {
  int frag, xd, bars, stage, red, total;
};
TmaSmem tma_smem(int64_t k, int nw, int ns, int pitch) {
  const MmaSmem m = mma_smem(k, nw, 0, 0, /*xn=*/true);  // table, x_frag (MmaFrag<true>), scales
  TmaSmem t{};
  t.frag = m.frag;
  t.xd = m.xd;
  t.bars = m.stage;  // 16-aligned
  t.stage = t.bars + ((nw * ns * 8 + 15) & ~15);
  t.red = t.stage + nw * ns * kRows * pitch;
  t.total = t.red + nw * kRows * 4;
  return t;
}

// CHK false (Params::scales_clean): the block scales without the NaN codes' fix-up (nvfp4_scales2).
template <int NW, int J, int NS, bool X1 = false, bool CHK = true>
__global__ void __launch_bounds__(NW * 32) nvfp4_tma_kernel(const Params p, const TmaSmem sm) {
  constexpr int kPitch = tma_pitch(J);
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  const int s0 = warp * n_steps / NW, s1 = (warp + 1) * n_steps / NW;
  const int n_chunks = (s1 - s0 + J - 1) / J;
  uint8_t* ring = smem + sm.stage + warp * (NS * kRows * kPitch);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + sm.bars) + warp * NS;
  // Rows past the last read the last row (their sums are never stored).
  const int64_t rows_left = p.rows - row0;
  const int my_row = rows_left > lane ? lane : static_cast<int>(rows_left) - 1;
  const uint8_t* src_row = p.w + (row0 + my_row) * p.row_bytes;

  if (lane == 0)
    for (int i = 0; i < NS; ++i) mbar_init(&bar[i], 1);
  __syncwarp();
  auto issue = [&](int q) {
    if (q >= n_chunks) return;
    const int st0 = s0 + q * J, js = min(J, s1 - st0);
    const uint32_t len = static_cast<uint32_t>(js * kMmaRowStep);
    uint64_t* b = &bar[q % NS];
    if (lane == 0) mbar_arrive_expect(b, kRows * len);
    __syncwarp();
    if (lane < kRows)
      bulk_g2s(ring + (q % NS) * (kRows * kPitch) + lane * kPitch, src_row + static_cast<int64_t>(st0) * kMmaRowStep,
               len, b);
  };

  // PDL: the weights are never written by earlier kernels, so the first chunks load before the
  // wait; the activations only after it.
#pragma unroll
  for (int q = 0; q < NS; ++q) issue(q);
  const float rs = mma_row_scale_early(p, row0);  // a weight: before the wait
  pdl_wait();
  pdl_trigger();

  // X1 (the 4-warp instances): the row in one pass where a thread holds at most 2 fragments and 1
  // scale (k <= 2048: Qwen3-30B-A3B's qkv), as gemv_mma.cu's tiled instances -- one L2 round trip
  // after the wait instead of two. H200 session 27 call 1, Qwen3-30B-A3B tg128 alternating: 495.33 /
  // 497.04 against 491.58 / 492.49 tok/s (+0.8%), the same 64 greedy tokens.
  uint8_t* frag_s = smem + sm.frag;
  float* xd_s = reinterpret_cast<float*>(smem + sm.xd);
  if (!(X1 && mma_build_x_1pass<2, 1, 4, true>(frag_s, xd_s, p.xq, p.k, nb, NW * 32)))
    mma_build_x<true>(frag_s, xd_s, p.xq, 0, 0, 1, 1, p.k, nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  const q8_detail::E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  MmaFrag<true>::B bx[4];  // x only
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = MmaFrag<true>::zero();
  const uint8_t* frag = smem + sm.frag + MmaFrag<true>::kBytes * c;

  float acc0 = 0.0f, acc8 = 0.0f;
  for (int q = 0; q < n_chunks; ++q) {
    mbar_wait(&bar[q % NS], static_cast<uint32_t>((q / NS) & 1));
    const uint8_t* st = ring + (q % NS) * (kRows * kPitch);
    const int st0 = s0 + q * J, js = min(J, s1 - st0);
    for (int j = 0; j < js; ++j)
      mma_step_acc<kPitch, false, true, CHK>(st + j * kMmaRowStep, frag, xd, st0 + j, tab, my_tile, bx, g, c, acc0,
                                             acc8);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the reads above before the next bulk write
#endif
    __syncwarp();
    issue(q + NS);
  }

  // Row sums: the 4 lanes of a row, then the warps in order.
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 2);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 1);
  acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 2);
  float* red = reinterpret_cast<float*>(smem + sm.red);
  if (c == 0) {
    red[warp * kRows + g] = acc0;
    red[warp * kRows + g + 8] = acc8;
  }
  __syncthreads();
  if (threadIdx.x < kRows) {
    const int r = static_cast<int>(threadIdx.x);
    const int64_t row = row0 + r;
    if (row < p.rows) {
      float v = red[r];
      for (int w = 1; w < NW; ++w) v += red[w * kRows + r];
      const float s = mma_row_scale(p, rs, row);
      store_out(p.y + row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
    }
  }
}

std::atomic<int64_t> g_tma_launches{0};

template <int NW, int J, int NS, bool X1 = NW == 4>
bool launch_tma(const Params& p, cudaStream_t stream) {
  const TmaSmem sm = tma_smem(p.k, NW, NS, tma_pitch(J));
  if (sm.total > max_smem_optin()) return false;
  const bool fast = p.scales_clean != 0;
  auto kernel = fast ? nvfp4_tma_kernel<NW, J, NS, X1, false> : nvfp4_tma_kernel<NW, J, NS, X1>;
  static std::atomic<uint64_t> cache[2] = {};
  if (cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), NW * 32, cache[fast ? 1 : 0]) < 1) return false;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, sm);
  g_tma_launches.fetch_add(1, std::memory_order_relaxed);
  if (fast) note_clean_launch();
  return true;
}

}  // namespace

bool gemv_nvfp4_mma_tma(const Params& p, int64_t n_tok, bool grouped, int warps, int chunk, int stages,
                        cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  // As gemv_nvfp4_mma (one token, dense, whole steps, 16-byte aligned rows), on sm_90+.
  if (grouped || n_tok != 1 || nb % kMmaStepBlocks != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      p.row_bytes % 16 != 0 || !bulk_copy_supported())
    return false;
  const int n_steps = static_cast<int>(nb / kMmaStepBlocks);
  const int nw = warps >= 8 ? 8 : 4;
  // Defaults: a warp's whole range in one chunk up to 8 steps (4 at k = 4096, 2 at k = 2048),
  // else chunks of 4 steps, 2 in flight.
  const int per_warp = (n_steps + nw - 1) / nw;
  int j = chunk > 0 ? chunk : per_warp <= 8 ? per_warp : 4;
  j = j <= 2 ? 2 : j <= 4 ? 4 : 8;
  const int ns = stages > 0 ? stages : per_warp <= j ? 1 : 2;
  switch (nw * 100 + j * 10 + (ns >= 2 ? 2 : 1)) {
    case 421: return launch_tma<4, 2, 1>(p, stream);
    case 422: return launch_tma<4, 2, 2>(p, stream);
    case 441: return launch_tma<4, 4, 1>(p, stream);
    case 442: return launch_tma<4, 4, 2>(p, stream);
    case 481: return launch_tma<4, 8, 1>(p, stream);
    case 482: return launch_tma<4, 8, 2>(p, stream);
    case 821: return launch_tma<8, 2, 1>(p, stream);
    case 822: return launch_tma<8, 2, 2>(p, stream);
    case 841: return launch_tma<8, 4, 1>(p, stream);
    case 842: return launch_tma<8, 4, 2>(p, stream);
    case 881: return launch_tma<8, 8, 1>(p, stream);
    default: return launch_tma<8, 8, 2>(p, stream);
  }
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_tma_launches() { return gemv_detail::g_tma_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
