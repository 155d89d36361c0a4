// Internal interface between gemv.cu (argument checks, dispatch) and the two kernel
// families (gemv_float.cu, gemv_q8.cu). CUDA translation units only.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_kernel.cuh"
#include "cuda/gemv_tuning.h"
#include "format/ggml_type.h"

namespace ft::cuda::gemv_detail {

// Overrides of the tuning table (0: table).
struct FloatPlan {
  int stages = 0;
};
struct Q8Plan {
  int stages = 0, lanes = 0, rows = 0;
};
// NVFP4 kernel overrides (gemv_set_nvfp4_override; -1 / 0: the plan's).
struct Nvfp4Override {
  int kernel = -1, rows = 0, x_smem = 0;
  int decode = 0, minb = 0;  // gemv_set_nvfp4_variant
  int mma_warps = 0, mma_stages = 0;  // gemv_set_nvfp4_mma
  bool mma_off = false;               // FT_GEMV_NVFP4_MMA=0: the plan's mma launches take the slab kernel
  int persist_groups = 0, persist_stages = 0;  // gemv_set_nvfp4_persist
  bool persist_off = false;  // FT_GEMV_NVFP4_PERSIST=0: the plan without the persistent kernel
  int tma = 0;  // FT_GEMV_NVFP4_TMA: 0 the plan, -1 never, 1 where the mma kernel is planned, 2 wherever it fits
  int tma_warps = 0, tma_chunk = 0, tma_stages = 0;
  bool batch_off = false;  // FT_GEMV_NVFP4_MMA_BATCH=0 / gemv_set_nvfp4_mma_batch: 2..8 tiled tokens on the slab kernel
  int batch_stages = 0;    // FT_GEMV_NVFP4_MMA_BATCH=S (2..4) / gemv_set_nvfp4_mma_batch: its stages (0: the table's)
  bool batch_wave_off = false;  // FT_GEMV_NVFP4_BATCH_WAVE=0: its grid a CTA a tile, not one wave
  bool experts_off = false;  // FT_GEMV_NVFP4_EXPERTS=0 / gemv_set_nvfp4_experts: the slab / packed kernels take them
  bool lean_dense_off = false;  // FT_GEMV_NVFP4_LEAN_DENSE=0 / gemv_set_nvfp4_lean_dense: the slab kernel takes them
  int expert_rows = 0, expert_minb = 0;  // FT_GEMV_NVFP4_EXPERT_PLAN=R,B: the lean expert slab launches' (0: the plan's)
  int dense_rows = 0, dense_xs = -1;  // FT_GEMV_NVFP4_DENSE_PLAN=R,X: the lean dense launches' rows, X 1 activations in smem
  int dense_minb = 0;                 // FT_GEMV_NVFP4_DENSE_PLAN=R,X,B: and their blocks an SM (4, 6, 8; 0: the plan's)
  // FT_GEMV_NVFP4_TILED_PLAN="ROWSxK=W,S[,SMEM];..": the tiled one-token mma launches of those shapes at W warps,
  // S stages (0: the routed choice), with at least SMEM bytes of dynamic shared memory (0: what they need), which
  // caps their blocks an SM.
  struct TiledShape {
    int64_t rows, k;
    int warps, stages, smem;
  };
  TiledShape tiled_plan[8] = {};
  int n_tiled_plan = 0;
};

// Widest cp.async vector (16, 8, 4) that keeps every row, expert and chunk aligned; 0: none.
inline int gemv_vector_bytes(const Params& p, int chunk_bytes) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.w);
  for (int vb : {16, 8, 4}) {
    if (base % vb == 0 && p.row_bytes % vb == 0 && chunk_bytes % vb == 0 &&
        (p.ids == nullptr || p.expert_bytes % vb == 0))
      return vb;
  }
  return 0;
}

// Allows `kernel` the most dynamic shared memory the device grants a block: the opt-in limit
// less the kernel's static shared memory (which the limit counts too; setting the whole limit
// on a kernel with static shared memory fails with cudaErrorInvalidValue). Returns that amount.
template <class K>
int allow_max_dynamic_smem(K kernel) {
  cudaFuncAttributes fa{};
  FT_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  const int dyn = max_smem_optin() - static_cast<int>(fa.sharedSizeBytes);
  FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
  return dyn;
}

// Resident CTAs per SM of `kernel` at `smem` bytes and `threads`, cached per kernel in `cache`
// (smem << 32 | ctas; one occupancy query per size, not per launch); above 48 KB the kernel is
// first allowed the opt-in maximum (unless set_limit is false: the caller set its own).
template <class K>
int cached_ctas_per_sm(K kernel, size_t smem, int threads, std::atomic<uint64_t>& cache, bool set_limit = true) {
  const uint64_t c = cache.load(std::memory_order_relaxed);
  if ((c >> 32) == smem && (c & 0xFFFFFFFFu) != 0) return static_cast<int>(c & 0xFFFFFFFFu);
  if (set_limit && smem > size_t{48} << 10) allow_max_dynamic_smem(kernel);
  int blocks = 0;
  FT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  cache.store((static_cast<uint64_t>(smem) << 32) | static_cast<uint64_t>(blocks), std::memory_order_relaxed);
  return blocks;
}

// The grid of a warp-per-item kernel (kWarps warps a CTA, `ctas` CTAs an SM resident): as many
// warps as fit at once, fewer when that balances the items better (every warp gets the same
// number, +-1). The generic, slab, packed and lean kernels all launch this way.
inline dim3 warp_grid(int64_t n_items, int ctas) {
  const int64_t w_max = static_cast<int64_t>(ctas) * sm_count() * kWarps;
  const int64_t per_warp = (n_items + w_max - 1) / w_max;
  const int64_t warps = (n_items + per_warp - 1) / per_warp;
  return dim3(static_cast<unsigned>((warps + kWarps - 1) / kWarps));
}

// Launches gemv_kernel<Policy, NT, R> on p (plan fields lpr_log2, stages, cbp, chunk_* set)
// for n_out out rows: as many warps as fit on the GPU at once, fewer when that balances the
// row groups better (every warp gets the same number, +-1).
template <class Policy, int NT, int R>
void launch_kernel(Params p, int64_t n_out, cudaStream_t stream) {
  auto kernel = gemv_kernel<Policy, NT, R>;
  const int rw = R * (32 >> p.lpr_log2);
  p.n_rg = (p.rows + rw - 1) / rw;
  p.n_out = n_out;
  const size_t smem = static_cast<size_t>(kWarps) * p.stages * rw * p.cbp;
  if (smem > static_cast<size_t>(max_smem_optin())) fail_message("cuda gemv: plan needs too much shared memory");
  static const bool attr_set = [kernel] {
    FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem_optin()));
    return true;
  }();
  (void)attr_set;
  // CTAs per SM for this shared-memory size, cached (smem << 32 | blocks).
  static std::atomic<uint64_t> cache{0};
  uint64_t c = cache.load(std::memory_order_relaxed);
  int blocks = static_cast<int>(c & 0xFFFFFFFFu);
  if ((c >> 32) != smem || blocks == 0) {
    FT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kWarps * 32, smem));
    if (blocks < 1) fail_message("cuda gemv: kernel does not fit on an SM");
    cache.store((static_cast<uint64_t>(smem) << 32) | static_cast<uint64_t>(blocks), std::memory_order_relaxed);
  }
  kernel<<<warp_grid(p.n_rg * n_out, blocks), kWarps * 32, smem, stream>>>(p);
  FT_CUDA_CHECK_LAUNCH();
}

// Kernels that did Params::nq_count's tail on this thread's launches (gemv.cu launches
// norm_fold_produce after a call none of whose kernels said so).
void note_nq_tail();
// A tensor-core launch of an instance without the NaN codes' fix-up (Params::scales_clean; gemv_mma.cu,
// gemv_mma_tma.cu): gemv_nvfp4_clean_launches counts them.
void note_clean_launch();

// n_tok: tokens, or slots in grouped mode (Params.n_tok is 1 there).
void gemv_float(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const FloatPlan& plan,
                cudaStream_t stream);
void gemv_q8(GgmlType type, const Params& p, int64_t n_tok, bool grouped, const Q8Plan& plan, cudaStream_t stream);
// The NVFP4 integer-path kernels (gemv_nvfp4.cu); false when the plan or the alignment of
// the weights leaves the product to gemv_q8.
bool gemv_nvfp4(const Params& p, int64_t n_tok, bool grouped, const Nvfp4Override& over, cudaStream_t stream);
// A tiled weight (Params::tiled, cuda/nvfp4_tiled.h; dense, integer path): one token on
// gemv_mma.cu (gemv_nvfp4_tiled_mma), 2..8 on gemv_mma_batch.cu, else (or where those decline) the slab kernel. Of `over`, only the mma kernel's warps
// and stages apply (benchmarks sweep them). True when the tensor-core kernel took it (it alone does
// Params::glu_xq's dense SwiGLU tail).
// mma_only: false without launching anything where the tensor-core kernel declines.
bool gemv_nvfp4_tiled(const Params& p, int64_t n_tok, const Nvfp4Override& over, cudaStream_t stream,
                      bool mma_only = false);
// The tensor-core kernel (gemv_mma.cu): one token, dense, k % 256 == 0, 16-byte aligned rows;
// false (nothing launched) for other shapes or when its shared memory does not fit.
// smem_floor: at least that many bytes of dynamic shared memory a block (Nvfp4Override::TiledShape::smem).
bool gemv_nvfp4_mma(const Params& p, int64_t n_tok, bool grouped, int warps, int stages, cudaStream_t stream,
                    int smem_floor = 0);
// The tensor-core kernel of 2..8 tokens on a tiled weight (gemv_mma_batch.cu): each token's rows those of
// gemv_nvfp4_mma's one-token launch; false (nothing launched) where it declines (one-token-only
// features, shapes the one-token plan gives 16 warps, shared memory).
// stages: cp.async stages a warp (2..4; else gemv_nvfp4_batch_stages's). wave: one wave of CTAs that walk the
// tiles (else a CTA a tile; the same bits).
bool gemv_nvfp4_mma_batch(const Params& p, int64_t n_tok, int stages, bool wave, cudaStream_t stream);
// The persistent tensor-core kernel (gemv_mma_persist.cu): the same shapes and the same bits as
// gemv_nvfp4_mma at warps = fold; CTAs of `groups` x fold warps walk the 16-row tiles.
bool gemv_nvfp4_mma_persist(const Params& p, int64_t n_tok, bool grouped, int fold, int groups, int stages,
                            cudaStream_t stream);
// The warp-fed bulk-copy mma kernel (gemv_mma_tma.cu, sm_90+): the same shapes as gemv_nvfp4_mma,
// another fp32 order; warps 4 or 8, chunks of 2 / 4 / 8 steps, 1 or 2 in flight (0: its defaults).
// The lean expert kernels (gemv_nvfp4_lean.cu): a grouped one-token launch that the plan `pl`
// gives the slab kernel without a combine (R rows an item) or the packed kernel's combine with one
// row an item and 8 slots, 16-byte vectors, activations from global memory; the same bits as those
// kernels. false (nothing launched) for anything else. n_out: out rows (the pair's doubled).
bool gemv_nvfp4_experts(const Params& p, int64_t n_out, int64_t nb, int n_sub, const GemvNvfp4Plan& pl,
                        cudaStream_t stream);
// The lean slab kernel (gemv_nvfp4_lean.cu) on a dense one-token launch that the plan `pl` gives the
// slab kernel (row-major, 16-byte vectors; xs: activations in shared memory, xs_row bytes); the
// same bits. false (nothing launched) for anything else.
bool gemv_nvfp4_lean_dense(const Params& p, int64_t nb, const GemvNvfp4Plan& pl, bool xs, int xs_row,
                           cudaStream_t stream);
bool gemv_nvfp4_mma_tma(const Params& p, int64_t n_tok, bool grouped, int warps, int chunk, int stages,
                        cudaStream_t stream);

}  // namespace ft::cuda::gemv_detail
