// NVFP4 expert gate/up GEMV of MoE decode on tensor cores, in the slab kernel's exact float
// order (grouped, one activation row per slot, no combine, rows of exactly 32 blocks: k 2048,
// the Qwen3-30B-A3B / Qwen3.5-MoE gate and up projections).
//
// Not routed: slower than the slab kernel on the H200 (run 11, figures in gemv_tuning.h beside
// kNvfp4XmmaRouted); kept, with its bit-exact test, as the measured alternative and for the
// switch FT_GEMV_NVFP4_XMMA=1.
//
// Why it was tried: the slab kernel (gemv_nvfp4.cu) reads these 7 MB launches at 22-27% of the H200's read
// bandwidth (benches/h200.md runs 8-10: gate 5.5-5.8 us, up the same) and a Qwen3-30B-A3B
// layer pays two of them. The dense tensor-core kernel (gemv_mma.cu) does a 16-row tile of
// 32-block rows in ~3.8 us per 5.9 MB (5120x2048, run 10). Here that kernel's inner loop runs
// per (16-row tile, slot), and gate and up can share one launch (gemv_pair.h): half the
// launches and their ramp/tail, the two tensors' loads in flight together.
//
// Exactness: the CPU expert executor's exact mode (src/moe_cpu/gpu_dot*) mirrors the slab
// kernel's order, and the cpu/hybrid backends must give fused's tokens. So this kernel keeps
// that order bit for bit instead of the dense mma kernel's: the slab kernel's lane l owns
// block l of a 32-block row and folds its 4 sub-blocks from 0 in order,
//   v_l = fma(is_3, s_3 dx_1, fma(is_2, s_2 dx_1, fma(is_1, s_1 dx_0, fma(is_0, s_0 dx_0, 0))))
// then sums the 32 lanes by the xor butterfly 16, 8, 4, 2, 1, and scales with one rounded
// multiply. The integer sub-block sums is_j are exact in both kernels (mma here, dp4a there).
// Here lane (g, c) of the mma layout holds sub-blocks 2h, 2h + 1 (h = c & 1) of a block for rows
// g and g + 8: lane h = 0 folds the first two, hands the partial to its neighbour (shfl xor 1),
// which folds the last two; the block partials meet in shared memory ([row][block]) and each
// warp then runs the slab kernel's butterfly over a row's 32 blocks. Tests: gemv_test.cpp
// CudaGemvNvfp4.ExpertMmaEqualsSlabBitwise (and the twin).
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
constexpr int kNb = 32;                           // blocks per row (one slab of the slab kernel)
constexpr int kSteps = kNb / kMmaStepBlocks;      // 8
constexpr int kPartStride = kNb + 1;              // floats per row of block partials (bank skew)
constexpr int kPartBytes = kRows * kPartStride * 4;

// The second tensor of a pair launch (gemv_pair): blockIdx.y >= n_slots takes w2 / y2 /
// bank_col2 with everything else of p.
struct XPair {
  const uint8_t* w2;
  float* y2;
  int bank_col2;
  int n_slots;
};

template <int NW, int NS>
__global__ void __launch_bounds__(NW * 32) nvfp4_xmma_kernel(const Params p, const XPair q, const MmaSmem sm) {
  static_assert(kSteps % NW == 0, "every warp takes the same number of steps");
  constexpr int kMySteps = kSteps / NW;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int second = static_cast<int>(blockIdx.y) >= q.n_slots ? 1 : 0;
  const int slot = static_cast<int>(blockIdx.y) - (second ? q.n_slots : 0);
  uint8_t* stages = smem + sm.stage + warp * (NS * kMmaStageBytes);

  // This lane's cp.async vectors of a step (as gemv_mma.cu): vector i = lane + 32 v is 16-byte
  // piece o of row r; rows past the last read the last row (their sums are never stored).
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
  const int32_t expert = p.ids[slot];
  const uint8_t* wbase = (second ? q.w2 : p.w) + static_cast<int64_t>(expert) * p.expert_bytes + row0 * p.row_bytes;
  auto issue = [&](int i) {
    if (i < kMySteps) {
      const uint8_t* src = wbase + (warp + NW * i) * kMmaRowStep;
      uint8_t* dst = stages + (i % NS) * kMmaStageBytes;
#pragma unroll
      for (int v = 0; v < kMmaVecPerLane; ++v)
        if (dst_off[v] >= 0) cp_async16(dst + dst_off[v], src + src_off[v]);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue(i);
  // The slot's scale (slab kernel: slot_scale), loaded while the weights stream in.
  float ss = p.scale;
  if (p.bank != nullptr) ss *= p.bank[static_cast<int64_t>(expert) * 4 + (second ? q.bank_col2 : p.bank_col)];

  mma_build_x(smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd), p.xq, p.xq_row, slot, p.x_div, 1, p.k, kNb,
              NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  const float* xd = reinterpret_cast<const float*>(smem + sm.xd);
  float* part = reinterpret_cast<float*>(smem + sm.red);

  // Lane (g, c) feeds B column g: tile g >> 1 when c >> 1 == g & 1, else none.
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);
  const uint8_t* frag = smem + sm.frag + 16 * c;

#pragma unroll
  for (int i = 0; i < kMySteps; ++i) {
    cp_async_wait(NS - 2);
    __syncwarp();
    issue(i + NS - 1);
    mma_step_block_folds(stages + (i % NS) * kMmaStageBytes, frag, xd, warp + NW * i, tab, my_tile, bx, g, c, part,
                         kPartStride);
  }
  cp_async_wait(0);
  __syncthreads();

  // Row r: lane l holds block l's partial; the slab kernel's butterfly, scale and store.
  float* y = second ? q.y2 : p.y;
  for (int r = warp; r < kRows; r += NW) {
    float v = part[r * kPartStride + lane];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    const int64_t row = row0 + r;
    if (lane == 0 && row < p.rows) {
      const float s = p.row_scale != nullptr ? p.row_scale[row] * ss : ss;
      store_out(y + static_cast<int64_t>(slot) * p.ldy + row, round_to(p.round, __fmul_rn(v, s)), p.accumulate);
    }
  }
}

std::atomic<int64_t> g_xmma_launches{0};

// FT_GEMV_NVFP4_XMMA=1 / 0 overrides kNvfp4XmmaRouted (gemv_tuning.h).
const int g_xmma_env = [] {
  const char* e = std::getenv("FT_GEMV_NVFP4_XMMA");
  if (e == nullptr || *e == '\0') return -1;
  return e[0] == '0' ? 0 : 1;
}();

template <int NW, int NS>
bool launch_xmma(const Params& p, const XPair& q, int n_tensors, cudaStream_t stream) {
  const MmaSmem sm = mma_smem(p.k, NW, NS, kPartBytes);
  if (sm.total > max_smem_optin()) return false;
  auto kernel = nvfp4_xmma_kernel<NW, NS>;
  static const bool attr = [&] {
    if (sm.total > (48 << 10))
      FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem_optin()));
    return true;
  }();
  (void)attr;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows), static_cast<unsigned>(q.n_slots * n_tensors));
  launch_pdl(kernel, grid, dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, q, sm);
  g_xmma_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool xmma_dispatch(const Params& p, const XPair& q, int n_tensors, int warps, int stages, cudaStream_t stream) {
  switch (warps * 10 + stages) {
    case 22: return launch_xmma<2, 2>(p, q, n_tensors, stream);
    case 23: return launch_xmma<2, 3>(p, q, n_tensors, stream);
    case 42: return launch_xmma<4, 2>(p, q, n_tensors, stream);
    case 82: return launch_xmma<8, 2>(p, q, n_tensors, stream);
    default: return launch_xmma<4, 3>(p, q, n_tensors, stream);
  }
}

int g_xmma_set = -1;  // gemv_set_nvfp4_expert_mma

}  // namespace

bool gemv_nvfp4_xmma_routed() {
  if (g_xmma_set >= 0) return g_xmma_set == 1;
  return g_xmma_env < 0 ? kNvfp4XmmaRouted : g_xmma_env == 1;
}
void gemv_set_xmma_routed(int v) { g_xmma_set = v; }

bool gemv_nvfp4_xmma_takes(const Params& p, int64_t n_slots) {
  return p.ids != nullptr && p.slot_w == nullptr && p.xq != nullptr && p.k == 64 * kNb &&
         reinterpret_cast<uintptr_t>(p.w) % 16 == 0 && p.row_bytes % 16 == 0 && p.expert_bytes % 16 == 0 &&
         p.row_bytes * kRows < (int64_t{1} << 30) && n_slots >= 1 && n_slots <= 32767 && p.x_div >= 1 &&
         p.x_div <= 0x7FFFFFFF;
}

bool gemv_nvfp4_xmma(const Params& p, int64_t n_slots, int warps, int stages, cudaStream_t stream) {
  if (!gemv_nvfp4_xmma_takes(p, n_slots)) return false;
  const XPair q{nullptr, nullptr, 0, static_cast<int>(n_slots)};
  return xmma_dispatch(p, q, 1, warps, stages, stream);
}

bool gemv_nvfp4_xmma_pair(const Params& p, const uint8_t* w2, float* y2, int bank_col2, int64_t n_slots, int warps,
                          int stages, cudaStream_t stream) {
  if (!gemv_nvfp4_xmma_takes(p, n_slots) || reinterpret_cast<uintptr_t>(w2) % 16 != 0) return false;
  const XPair q{w2, y2, bank_col2, static_cast<int>(n_slots)};
  return xmma_dispatch(p, q, 2, warps, stages, stream);
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_xmma_launches() { return gemv_detail::g_xmma_launches.load(std::memory_order_relaxed); }
void gemv_set_nvfp4_expert_mma(int xmma, int xcomb) {
  gemv_detail::gemv_set_xmma_routed(xmma);
  gemv_detail::gemv_set_xcomb_routed(xcomb);
}
}  // namespace ft::cuda
