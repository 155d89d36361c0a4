// NVFP4 decode GEMV on tensor cores fed by bulk copies (gemv.h, integer path, one token,
// dense, sm_90): gemv_mma.cu's sums, bit for bit at the same warp count, from one CTA per SM
// (or C, FT_GEMV_NVFP4_BULK=M,W,S,C) that streams a contiguous range of 16-row tiles through a
// ring of shared-memory stages.
//
// Why: the mma kernel (a CTA per 16-row tile, cp.async 16 bytes a lane) reads 14336x4096 at
// 48-51% of HBM read bandwidth after a dependent kernel, and no read built from 16-byte loads
// did better than 51-58% there; a one-wave read through 32 KB bulk copies reached 73-77% on
// the same 33-66 MB (H200, session 11, ft-bench-gemv-cuda --sol). Here a producer warp issues,
// per stage, one bulk copy per row (16 rows x up to 2304 bytes = 16 steps of the row), so the
// consumers' instructions go to the decode and the mma only, and the first stages are issued
// before the PDL wait (the weights never depend on the kernel before).
//
// Layout. CTA b owns tiles [n_tiles b / grid, n_tiles (b + 1) / grid). A chunk is (tile,
// segment): 16 rows x (up to) kSegSteps steps, each row at kPitch bytes in the stage (2320 =
// 16 mod 128, conflict-free for the lane pattern of mma_step_acc, as 144 is). Consumer warp w
// takes steps w, w + NW, ... of every segment, i.e. steps w, w + NW, ... of the row (kSegSteps
// is a multiple of NW): gemv_mma.cu's order, so the same bits. full[s] completes when stage s
// has landed (one arrival with the expected bytes + the copies), empty[s] when the NW consumer
// warps are done with it. At the end of a tile the consumers meet at a named barrier and the
// first 16 threads sum the warps' row sums in warp order (double-buffered, one barrier a tile).
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

using namespace q8_detail;

constexpr int kRows = kMmaRows;
constexpr int kSegSteps = 16;
constexpr int kSeg = kSegSteps * kMmaRowStep;  // 2304 bytes of a row
constexpr int kPitch = kSeg + 16;              // 2320
constexpr int kStage = kRows * kPitch;         // 37120
constexpr int kMaxStages = 6;

// rs: the row scales of a CTA's rows (at most max_tiles x 16), loaded before the PDL wait (they
// are weights): a row-scale load in the epilogue held the tile's summing warp for an HBM round
// trip, and the next tile's barrier held every warp behind it.
struct BulkSmem {
  int frag, xd, ring, red, rs, total;
};
BulkSmem bulk_smem(int64_t k, int nw, int ns, int64_t max_tiles) {
  BulkSmem m{};
  m.frag = 16;
  m.xd = m.frag + static_cast<int>(k / 128) * kMmaFragGroupBytes;
  m.ring = (m.xd + static_cast<int>(k / 32) * 4 + 127) & ~127;
  m.red = m.ring + ns * kStage;
  m.rs = m.red + 2 * nw * kRows * 4;
  m.total = m.rs + static_cast<int>(max_tiles) * kRows * 4;
  return m;
}

__device__ __forceinline__ void consumer_barrier(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

template <int NW, int NS>
__global__ void __launch_bounds__((NW + 1) * 32, 1) nvfp4_bulk_kernel(const Params p, const BulkSmem sm) {
  static_assert(kSegSteps % NW == 0, "a warp's steps of the row must be gemv_mma.cu's");
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[NS], empty[NS];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t n_tiles = (p.rows + kRows - 1) / kRows;
  const int64_t t0 = n_tiles * blockIdx.x / gridDim.x, t1 = n_tiles * (blockIdx.x + 1) / gridDim.x;
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  const int n_seg = (n_steps + kSegSteps - 1) / kSegSteps;
  const int64_t n_chunks = (t1 - t0) * n_seg;
  uint8_t* ring = smem + sm.ring;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NS; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], NW);
    }
  }
  __syncthreads();

  if (warp == NW) {  // the producer
    for (int64_t q = 0; q < n_chunks; ++q) {
      const int s = static_cast<int>(q % NS);
      if (q >= NS) mbar_wait(&empty[s], static_cast<uint32_t>((q / NS - 1) & 1));
      const int64_t tile = t0 + q / n_seg;
      const int seg = static_cast<int>(q % n_seg);
      const int steps = min(kSegSteps, n_steps - seg * kSegSteps);
      const uint32_t len = static_cast<uint32_t>(steps * kMmaRowStep);
      if (lane == 0) mbar_arrive_expect(&full[s], kRows * len);
      __syncwarp();
      if (lane < kRows) {
        int64_t row = tile * kRows + lane;
        if (row >= p.rows) row = p.rows - 1;  // read, never stored
        bulk_g2s(ring + s * kStage + lane * kPitch, p.w + row * p.row_bytes + static_cast<int64_t>(seg) * kSeg, len,
                 &full[s]);
      }
      if (q == NS - 1) pdl_trigger();
    }
    if (n_chunks < NS) pdl_trigger();
    return;
  }

  constexpr int kThreads = NW * 32;
  float* rs = reinterpret_cast<float*>(smem + sm.rs);
  if (p.row_scale != nullptr)
    for (int64_t i = threadIdx.x; i < (t1 - t0) * kRows; i += kThreads) {
      const int64_t row = t0 * kRows + i;
      rs[i] = row < p.rows ? p.row_scale[row] : 0.0f;
    }
  pdl_wait();
  pdl_trigger();
  float* xd = reinterpret_cast<float*>(smem + sm.xd);
  mma_build_x(smem + sm.frag, xd, p.xq, 0, 0, 1, 1, p.k, nb, kThreads);
  mma_put_table(smem);
  consumer_barrier(kThreads);
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  const int g = lane >> 2, c = lane & 3;
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;
  float* red = reinterpret_cast<float*>(smem + sm.red);

  float acc0 = 0.0f, acc8 = 0.0f;
  for (int64_t q = 0; q < n_chunks; ++q) {
    const int s = static_cast<int>(q % NS);
    mbar_wait(&full[s], static_cast<uint32_t>((q / NS) & 1));
    const int seg = static_cast<int>(q % n_seg);
    const int steps = min(kSegSteps, n_steps - seg * kSegSteps);
    const uint8_t* st = ring + s * kStage;
    for (int j = warp; j < steps; j += NW)
      mma_step_acc<kPitch>(st + j * kMmaRowStep, frag, xd, seg * kSegSteps + j, tab, my_tile, bx, g, c, acc0, acc8);
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
    if (seg == n_seg - 1) {  // the tile's last segment: its row sums
      const int64_t tile = t0 + q / n_seg;
      float* rb = red + (tile & 1) * (NW * kRows);
      acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
      acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 2);
      acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 1);
      acc8 += __shfl_xor_sync(0xFFFFFFFFu, acc8, 2);
      if (c == 0) {
        rb[warp * kRows + g] = acc0;
        rb[warp * kRows + g + 8] = acc8;
      }
      acc0 = acc8 = 0.0f;
      consumer_barrier(kThreads);
      if (threadIdx.x < kRows) {
        const int r = static_cast<int>(threadIdx.x);
        const int64_t row = tile * kRows + r;
        if (row < p.rows) {
          float v = rb[r];
          for (int w = 1; w < NW; ++w) v += rb[w * kRows + r];
          const float sc = p.row_scale != nullptr ? rs[(tile - t0) * kRows + r] * p.scale : p.scale;
          store_out(p.y + row, round_to(p.round, __fmul_rn(v, sc)), p.accumulate);
        }
      }
    }
  }
}

std::atomic<int64_t> g_bulk_launches{0};

template <int NW, int NS>
bool launch_bulk(const Params& p, int ctas, cudaStream_t stream) {
  auto kernel = nvfp4_bulk_kernel<NW, NS>;
  // The opt-in limit counts the static shared memory (the barriers) too.
  static const int static_smem = [kernel] { return max_smem_optin() - allow_max_dynamic_smem(kernel); }();
  const int64_t n_tiles = (p.rows + kRows - 1) / kRows;
  const int64_t n_cta = std::min<int64_t>(n_tiles, static_cast<int64_t>(sm_count()) * ctas);
  const BulkSmem sm = bulk_smem(p.k, NW, NS, (n_tiles + n_cta - 1) / n_cta);
  if (sm.total + static_smem > max_smem_optin()) return false;
  static std::atomic<uint64_t> cache{0};  // that many must fit on an SM at once, or the grid is not one wave
  if (ctas > 1 && cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), (NW + 1) * 32, cache, false) < ctas)
    return false;
  const dim3 grid(static_cast<unsigned>(n_cta));
  launch_pdl(kernel, grid, dim3((NW + 1) * 32), static_cast<size_t>(sm.total), stream, p, sm);
  g_bulk_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The deepest ring that fits (x_frag grows with k: 28 KB at k = 14336).
template <int NW>
bool launch_bulk_fit(const Params& p, int stages, int ctas, cudaStream_t stream) {
  const int want = stages > 0 ? std::min(stages, kMaxStages) : 4;
  for (int ns = want; ns >= 2; --ns) {
    bool ok = false;
    switch (ns) {
      case 6: ok = launch_bulk<NW, 6>(p, ctas, stream); break;
      case 5: ok = launch_bulk<NW, 5>(p, ctas, stream); break;
      case 4: ok = launch_bulk<NW, 4>(p, ctas, stream); break;
      case 3: ok = launch_bulk<NW, 3>(p, ctas, stream); break;
      default: ok = launch_bulk<NW, 2>(p, ctas, stream); break;
    }
    if (ok) return true;
  }
  return false;
}

}  // namespace

bool gemv_nvfp4_mma_bulk(const Params& p, int64_t n_tok, bool grouped, int warps, int stages, int ctas,
                         cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  // As gemv_nvfp4_mma (one token, dense, whole steps, 16-byte aligned rows), on sm_90+.
  if (grouped || n_tok != 1 || nb % kMmaStepBlocks != 0 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      p.row_bytes % 16 != 0 || !bulk_copy_supported())
    return false;
  ctas = ctas > 0 ? ctas : 1;
  if (warps >= 16) return launch_bulk_fit<16>(p, stages, ctas, stream);
  if (warps >= 8) return launch_bulk_fit<8>(p, stages, ctas, stream);
  return launch_bulk_fit<4>(p, stages, ctas, stream);
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_bulk_launches() { return gemv_detail::g_bulk_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
