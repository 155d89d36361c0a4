// NVFP4 expert down projection fused with the weighted combine (MoE decode) on tensor cores, in
// the packed kernel's exact float order: the launches gemv_nvfp4.cu gives its packed kernel with
// the combine (rows of at most 32 blocks, a multiple of 4: the Qwen3-30B-A3B down projection,
// 2048 x 768 = 12 blocks, 8 ranks).
//
// Not routed: slower than the packed kernel on the H200 (run 11, figures in gemv_tuning.h beside
// kNvfp4XcombRouted); kept, with its bit-exact test, for the switch FT_GEMV_NVFP4_XCOMB=1.
//
// Why it was tried: the packed kernel reads these 7 MB at ~22% of the H200's read bandwidth (benches/h200.md
// runs 8-10: 7.1-7.2 us per layer). Here a CTA owns a 16-row tile of one token for all its
// ranks: the (rank, step) units of the tile are spread over its warps (one cp.async ring each),
// the ranks' activations are x_frag in shared memory, and the mma inner loop is gemv_mma.cu's.
//
// Exactness (the CPU expert executor's exact mode mirrors the packed order; cpu/hybrid must give
// fused's tokens): the packed kernel folds each block's 4 sub-blocks from 0 (block_dot), sums a
// rank's blocks in order from 0, scales with one rounded multiply and rounds, then sums the
// ranks in order, one rounding per operation. mma_step_block_folds gives the same block folds;
// the block sums, scales and the combine run here per (rank, row) and per row in that order.
// Tests: gemv_test.cpp CudaGemvNvfp4.ExpertMmaCombineEqualsPackedBitwise.
#include <atomic>
#include <cstdint>
#include <cstdlib>

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
constexpr int kMaxNb = 32;
constexpr int kMaxRanks = 16;

struct XComb {
  int nb;          // blocks per row (multiple of 4, <= 32)
  int n_used;      // ranks per token
  int frag_rank;   // x_frag bytes per rank
  int pstride;     // floats per (rank, row) of block partials: nb + 1
  int part;        // byte offset of the partials (then the ranks' row values)
};

template <int NW, int NS>
__global__ void __launch_bounds__(NW * 32) nvfp4_xcomb_kernel(const Params p, const XComb q, const MmaSmem sm) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int tok = static_cast<int>(blockIdx.y), S = q.n_used, nb = q.nb, n_steps = nb / kMmaStepBlocks;
  const int n_units = S * n_steps;
  const int slot0 = tok * S;
  uint8_t* stages = smem + sm.stage + warp * (NS * kMmaStageBytes);

  const int64_t rows_left = p.rows - row0;
  const int last = rows_left < kRows ? static_cast<int>(rows_left) - 1 : kRows - 1;
  int src_off[kMmaVecPerLane], dst_off[kMmaVecPerLane];
#pragma unroll
  for (int v = 0; v < kMmaVecPerLane; ++v) {
    const int i = lane + 32 * v, r = i / 9, o = i - 9 * r;
    src_off[v] = (r < last ? r : last) * static_cast<int>(p.row_bytes) + 16 * o;
    dst_off[v] = i < kMmaStageBytes / 16 ? r * kMmaRowStep + 16 * o : -1;
  }

  // The expert ids come from the router: everything waits for the previous kernel.
  pdl_wait();
  pdl_trigger();
  // The warp's units u = warp + NW i: rank u / n_steps, step u % n_steps.
  const int my_units = warp < n_units ? (n_units - warp + NW - 1) / NW : 0;
  auto issue = [&](int i) {
    if (i < my_units) {
      const int u = warp + NW * i, j = u / n_steps, stp = u - j * n_steps;
      const uint8_t* src = p.w + static_cast<int64_t>(p.ids[slot0 + j]) * p.expert_bytes + row0 * p.row_bytes +
                           stp * kMmaRowStep;
      uint8_t* dst = stages + (i % NS) * kMmaStageBytes;
#pragma unroll
      for (int v = 0; v < kMmaVecPerLane; ++v)
        if (dst_off[v] >= 0) cp_async16(dst + dst_off[v], src + src_off[v]);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue(i);

  mma_build_x(smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd), p.xq, p.xq_row, slot0, p.x_div, S, p.k, nb,
              NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  float* part = reinterpret_cast<float*>(smem + q.part);

  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);

  for (int i = 0; i < my_units; ++i) {
    cp_async_wait(NS - 2);
    __syncwarp();
    issue(i + NS - 1);
    const int u = warp + NW * i, j = u / n_steps, stp = u - j * n_steps;
    mma_step_block_folds(stages + (i % NS) * kMmaStageBytes, smem + sm.frag + j * q.frag_rank + 16 * c,
                         reinterpret_cast<const float*>(smem + sm.xd) + j * 2 * nb, stp, tab, my_tile, bx, g, c,
                         part + j * kRows * q.pstride, q.pstride);
  }
  cp_async_wait(0);
  __syncthreads();

  // (rank j, row r): the blocks in order from 0, scale, rounding (the packed kernel's piece).
  float* vals = part + S * kRows * q.pstride;
  for (int idx = static_cast<int>(threadIdx.x); idx < S * kRows; idx += NW * 32) {
    const int j = idx / kRows, r = idx - j * kRows;
    const int64_t row = row0 + r;
    if (row >= p.rows) continue;
    const float* pr = part + idx * q.pstride;
    float dot = 0.0f;
    for (int b = 0; b < nb; ++b) dot += pr[b];
    const float ss = slot_scale(p, slot0 + j);
    const float s = p.row_scale != nullptr ? p.row_scale[row] * ss : ss;
    vals[idx] = round_to(p.round, __fmul_rn(dot, s));
  }
  __syncthreads();
  // Row r: the ranks in order, one rounding per operation (no FMA), as the CPU combine.
  if (threadIdx.x < kRows) {
    const int r = static_cast<int>(threadIdx.x);
    const int64_t row = row0 + r;
    if (row < p.rows) {
      float cb = 0.0f;
      for (int j = 0; j < S; ++j) {
        const float pj = __fmul_rn(vals[j * kRows + r], p.slot_w[slot0 + j]);
        cb = j == 0 ? pj : __fadd_rn(cb, pj);
      }
      store_out(p.y + static_cast<int64_t>(tok) * p.ldy + row, round_to(p.round, cb), p.accumulate);
    }
  }
}

std::atomic<int64_t> g_xcomb_launches{0};

// FT_GEMV_NVFP4_XCOMB=1 / 0 overrides kNvfp4XcombRouted (gemv_tuning.h).
const int g_xcomb_env = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_XCOMB");
  if (e == nullptr || *e == '\0') return -1;
  return e[0] == '0' ? 0 : 1;
}();

template <int NW, int NS>
bool launch_xcomb(const Params& p, int64_t n_tokens, cudaStream_t stream) {
  XComb q{};
  q.nb = static_cast<int>(p.k / 64);
  q.n_used = p.n_used;
  q.frag_rank = (q.nb / 2) * kMmaFragGroupBytes;
  q.pstride = q.nb + 1;
  const int S = q.n_used;
  // mma_smem's layout with the ranks' x_frag and scales: frag S x frag_rank, xd S x 2 nb floats.
  MmaSmem sm{};
  sm.frag = 16;
  sm.xd = sm.frag + S * q.frag_rank;
  sm.stage = (sm.xd + S * 2 * q.nb * 4 + 15) & ~15;
  sm.red = sm.stage + NW * NS * kMmaStageBytes;
  q.part = sm.red;
  sm.total = sm.red + (S * kRows * q.pstride + S * kRows) * 4;
  if (sm.total > max_smem_optin()) return false;
  auto kernel = nvfp4_xcomb_kernel<NW, NS>;
  static const bool attr = [&] {
    FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem_optin()));
    return true;
  }();
  (void)attr;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows), static_cast<unsigned>(n_tokens));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, q, sm);
  g_xcomb_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int g_xcomb_set = -1;  // gemv_set_nvfp4_expert_mma

}  // namespace

bool gemv_nvfp4_xcomb_routed() {
  if (g_xcomb_set >= 0) return g_xcomb_set == 1;
  return g_xcomb_env < 0 ? kNvfp4XcombRouted : g_xcomb_env == 1;
}
void gemv_set_xcomb_routed(int v) { g_xcomb_set = v; }

bool gemv_nvfp4_xcomb(const Params& p, int64_t n_slots, int warps, int stages, cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  if (p.ids == nullptr || p.slot_w == nullptr || p.xq == nullptr || p.n_used < 1 || p.n_used > kMaxRanks ||
      n_slots % p.n_used != 0 || n_slots / p.n_used > 65535 || nb % kMmaStepBlocks != 0 || nb > kMaxNb ||
      reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || p.row_bytes % 16 != 0 || p.expert_bytes % 16 != 0 ||
      p.row_bytes * kRows >= (int64_t{1} << 30) || p.x_div < 1 || p.x_div > 0x7FFFFFFF)
    return false;
  const int64_t n_tokens = n_slots / p.n_used;
  switch (warps * 10 + stages) {
    case 42: return launch_xcomb<4, 2>(p, n_tokens, stream);
    case 43: return launch_xcomb<4, 3>(p, n_tokens, stream);
    case 44: return launch_xcomb<4, 4>(p, n_tokens, stream);
    case 82: return launch_xcomb<8, 2>(p, n_tokens, stream);
    case 83: return launch_xcomb<8, 3>(p, n_tokens, stream);
    default: return launch_xcomb<8, 4>(p, n_tokens, stream);
  }
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_xcomb_launches() { return gemv_detail::g_xcomb_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
