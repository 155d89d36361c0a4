// NVFP4 decode GEMV on the integer path (gemv.h with xq), streaming kernel: each CTA reads a
// CONTIGUOUS byte range of the weights (whole rows: R packed rows are R * row_bytes
// contiguous bytes) through a ring of `stages` shared-memory slots filled with 16-byte
// cp.async.cg, then decodes the staged blocks with the slab kernel's block math
// (gemv_nvfp4_dot.cuh; twin gemv_q8_ref's dot_nvfp4).
//
// Why: the slab kernel (gemv_nvfp4.cu) gives each warp 2-4 steps of one slab in flight
// (14336 rows / 4 rows per item over ~2100 warps), so its loads never reach a steady
// state: 36-40% of the H200's read bandwidth dense, 22% on the expert shapes (benches/h200.md
// runs 4-5). Here a persistent grid of one wave streams ~total / n_CTA bytes per CTA with
// stages - 1 slots in flight while it computes one, and the copy has no per-row bookkeeping:
// thread t copies vectors t, t + T, ... of the slot.
//
// A stage is bps = 32 x warps x M consecutive blocks of one slot's matrix (the blocks of a
// CTA's rows in row-major order; a stage never crosses a slot). Thread t computes blocks
// t + T m (m < M): consecutive lanes read blocks 36 bytes = 9 words apart, conflict-free,
// and writes each block's dot to a per-stage float array. After the next barrier, warp w
// sums the rows w, w + W, ... that touch the stage (lanes over the row's blocks, a butterfly:
// fixed order) and either finishes the row (scale, rounding, store: gemv.h's epilogue) or,
// for the stage's last row when it continues, hands the partial sum to the next stage.
// Deterministic, no atomics.
//
// gemv_pair: two products of the same shape and inputs (MoE gate and up) in one launch, the
// second's slots after the first's, so each launch streams twice the bytes.
//
// Dense weights are prefetched before pdl_wait() (no kernel writes them), so the ring fills
// while the previous kernel drains; grouped ones wait for the expert ids first.
#include <atomic>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/gemv_launch.h"
#include "cuda/gemv_nvfp4_dot.cuh"
#include "cuda/gemv_tuning.h"
#include "cuda/pdl.cuh"

namespace ft::cuda::gemv_detail {
namespace {

constexpr int kBlk = 36;  // bytes per NVFP4 block (64 elements)

// Launch-time constants.
struct StreamArgs {
  int nb;           // blocks per row
  int bps;          // blocks per stage: 32 x warps x M
  int stages;       // ring slots (2..8)
  int stage_bytes;  // bytes per slot: bps * 36 + 16 (16-byte alignment slack of the range)
  float inv_nb;     // 1 / nb (column of a stage block without an integer division)
  int64_t n_gr;     // rows of all slots: slots x rows (grouped) or rows, x 2 for a pair
  int64_t rows;     // rows per slot matrix
  // Pair (gemv_pair): slots [n_slot, 2 n_slot) are the second product's, whose own weights,
  // output and scales are below (the rest of Params is shared). n_slot: slots per product.
  int64_t n_slot;
  const uint8_t* w2;
  float* y2;
  int64_t ldy2;
  const float* row_scale2;
  float scale2;
  int bank_col2;
};

// cp.async of 16 bytes, of which the first src_bytes (0..16) come from src and the rest is
// zero: the last vector of a range never reads past it.
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes) : "memory");
}
// Waits until at most n (0..7) of this thread's cp.async groups are pending.
__device__ __forceinline__ void cp_async_wait_upto(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
  }
}

// A stage of the CTA's work: blocks [b, b + n) of slot `slot`'s matrix (n = 0: past the end).
// Stages step through each slot's part of the CTA's row range [g0, g1) (g = slot * rows + row).
struct Cursor {
  int64_t slot;
  uint32_t b, b_end;  // first block of the stage, end of the slot's part (rows x nb < 2^31)
  int n;
};

__device__ __forceinline__ void cursor_fix(Cursor& c, const StreamArgs& g) {
  const uint32_t left = c.b_end - c.b;
  c.n = left < static_cast<uint32_t>(g.bps) ? static_cast<int>(left) : g.bps;
}
__device__ __forceinline__ Cursor cursor_start(const StreamArgs& g, int64_t g0, int64_t g1) {
  Cursor c;
  c.slot = g0 / g.rows;
  const int64_t r0 = g0 - c.slot * g.rows;
  const int64_t r1 = g1 - c.slot * g.rows < g.rows ? g1 - c.slot * g.rows : g.rows;
  c.b = static_cast<uint32_t>(r0 * g.nb);
  c.b_end = static_cast<uint32_t>(r1 * g.nb);
  cursor_fix(c, g);
  if (g0 >= g1) c.n = 0;
  return c;
}
__device__ __forceinline__ void cursor_next(Cursor& c, const StreamArgs& g, int64_t g1) {
  if (c.n == 0) return;
  c.b += static_cast<uint32_t>(c.n);
  if (c.b >= c.b_end) {  // next slot's part: from its row 0
    ++c.slot;
    const int64_t r1 = g1 - c.slot * g.rows;
    if (r1 <= 0) {
      c.n = 0;
      return;
    }
    c.b = 0;
    c.b_end = static_cast<uint32_t>((r1 < g.rows ? r1 : g.rows) * g.nb);
  }
  cursor_fix(c, g);
}

// Whether cursor slot u belongs to the second product of a pair, and its slot there.
__device__ __forceinline__ bool second_of(const StreamArgs& g, int64_t u, int64_t& slot) {
  const bool second = u >= g.n_slot;
  slot = second ? u - g.n_slot : u;
  return second;
}

// First weight byte of a stage (slot base + 36 b).
__device__ __forceinline__ const uint8_t* stage_src(const Params& p, const StreamArgs& g, const Cursor& c) {
  int64_t slot;
  const uint8_t* base = second_of(g, c.slot, slot) ? g.w2 : p.w;
  if (p.ids != nullptr) base += static_cast<int64_t>(p.ids[slot]) * p.expert_bytes;
  return base + static_cast<int64_t>(c.b) * kBlk;
}

template <int NT, int M>
__global__ void __launch_bounds__(256) stream_kernel(const Params p, const StreamArgs g) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int T = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5, lane = tid & 31, W = T >> 5;
  const int S = g.stages;
  float* vals = reinterpret_cast<float*>(smem + static_cast<size_t>(S) * g.stage_bytes);  // [2][NT][bps]
  // Partial sums of a row that continues into the next stage, [2][NT] by stage parity. No
  // static shared memory: the kernel is allowed the opt-in maximum of dynamic memory, which
  // fails (cudaErrorInvalidValue) when static memory is added to it.
  float* carry = vals + 2 * NT * g.bps;
  const int64_t g0 = g.n_gr * blockIdx.x / gridDim.x, g1 = g.n_gr * (blockIdx.x + 1) / gridDim.x;
  const bool grouped = p.ids != nullptr;

  // Copies stage c into ring slot `ring` (whole 16-byte vectors from the aligned address at
  // or below its first byte: within the weights, which start 16-aligned), then commits a
  // group (empty past the end, so that group counts stay uniform).
  auto issue = [&](const Cursor& c, int ring) {
    if (c.n > 0) {
      const uint8_t* src = stage_src(p, g, c);
      const uint8_t* a = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(src) & ~uintptr_t{15});
      const int bytes = static_cast<int>(src - a) + c.n * kBlk;
      const int nv = (bytes + 15) >> 4;
      uint8_t* dst = smem + static_cast<size_t>(ring) * g.stage_bytes;
      for (int v = tid; v < nv; v += T) {
        const int rem = bytes - 16 * v;
        cp_async16_zfill(dst + 16 * v, a + 16 * v, rem < 16 ? rem : 16);
      }
    }
    cp_async_commit();
  };

  // Block dots of stage c (in ring slot `ring`) into vals[par].
  auto compute = [&](const Cursor& c, int ring, int par) {
    const uint8_t* src = stage_src(p, g, c);
    const uint8_t* st = smem + static_cast<size_t>(ring) * g.stage_bytes + (reinterpret_cast<uintptr_t>(src) & 15);
    const int c0 = static_cast<int>(c.b % static_cast<uint32_t>(g.nb));
    int64_t slot;
    second_of(g, c.slot, slot);
    const int64_t xrow = grouped ? slot / p.x_div : 0;
    const uint8_t* x0 = p.xq + xrow * p.xq_row;
    float* v = vals + par * NT * g.bps;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int j = tid + T * m;
      if (j < c.n) {
        const int q = c0 + j;
        const int col = q - static_cast<int>((static_cast<float>(q) + 0.5f) * g.inv_nb) * g.nb;
        float acc[1][NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[0][t] = 0.0f;
        block_dot<NT, 1, false>(acc, st + kBlk * j, 0, x0, p.xq_row, p.k, col, NT);
#pragma unroll
        for (int t = 0; t < NT; ++t) v[t * g.bps + j] = acc[0][t];
      }
    }
  };

  // Row sums of stage c from vals[par]; finished rows go through the epilogue.
  auto row_sums = [&](const Cursor& c, int par) {
    if (c.n == 0) return;
    const uint32_t nb = static_cast<uint32_t>(g.nb);
    const uint32_t r0 = c.b / nb, r1 = (c.b + static_cast<uint32_t>(c.n) - 1) / nb;
    const float* v = vals + par * NT * g.bps;
    for (uint32_t r = r0 + warp; r <= r1; r += W) {
      const uint32_t rb = r * nb, re = rb + nb;
      const int lo = static_cast<int>((rb > c.b ? rb : c.b) - c.b);
      const int hi = static_cast<int>((re < c.b + c.n ? re : c.b + c.n) - c.b);
      float s[NT];
#pragma unroll
      for (int t = 0; t < NT; ++t) s[t] = 0.0f;
      for (int j = lo + lane; j < hi; j += 32)
#pragma unroll
        for (int t = 0; t < NT; ++t) s[t] += v[t * g.bps + j];
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s[t] += __shfl_xor_sync(0xFFFFFFFFu, s[t], o);
      if (lane != 0) continue;
      const bool head = rb < c.b;                  // began in an earlier stage
      const bool tail = re > c.b + c.n;            // continues in the next
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float tot = head ? carry[(par ^ 1) * NT + t] + s[t] : s[t];
        if (tail) {
          carry[par * NT + t] = tot;
          continue;
        }
        int64_t slot;
        const bool second = second_of(g, c.slot, slot);
        float ss = second ? g.scale2 : p.scale;  // slot_scale() of the product
        if (grouped && p.bank != nullptr)
          ss *= p.bank[static_cast<int64_t>(p.ids[slot]) * 4 + (second ? g.bank_col2 : p.bank_col)];
        const float* rs = second ? g.row_scale2 : p.row_scale;
        const float sc = rs != nullptr ? rs[r] * ss : ss;
        float* y = (second ? g.y2 : p.y) + (grouped ? slot : t) * (second ? g.ldy2 : p.ldy) + r;
        store_out(y, round_to(p.round, __fmul_rn(tot, sc)), p.accumulate);
      }
    }
  };

  Cursor ci = cursor_start(g, g0, g1);
  Cursor cc = ci, cr = ci;
  if (!grouped) {
    for (int s = 0; s < S - 1; ++s) issue(ci, s), cursor_next(ci, g, g1);
    pdl_wait();
    pdl_trigger();
  } else {
    pdl_wait();
    pdl_trigger();
    for (int s = 0; s < S - 1; ++s) issue(ci, s), cursor_next(ci, g, g1);
  }
  for (int it = 0;; ++it) {
    cp_async_wait_upto(S - 2);  // this thread's copies of stage `it` have landed
    __syncthreads();            // everyone's; and every thread is done with stage it - 1
    issue(ci, (it + S - 1) % S);
    cursor_next(ci, g, g1);
    if (it > 0) row_sums(cr, (it - 1) & 1), cursor_next(cr, g, g1);
    if (cc.n == 0) break;
    compute(cc, it % S, it & 1);
    cursor_next(cc, g, g1);
  }
}

// Resident CTAs per SM of `kernel` at (smem, threads), cached per kernel.
template <class K>
int stream_ctas_per_sm(K kernel, size_t smem, int threads, std::atomic<uint64_t>& cache) {
  const uint64_t key = (static_cast<uint64_t>(smem) << 24) | (static_cast<uint64_t>(threads) << 8);
  const uint64_t c = cache.load(std::memory_order_relaxed);
  if ((c & ~uint64_t{0xFF}) == key && (c & 0xFF) != 0) return static_cast<int>(c & 0xFF);
  if (smem > static_cast<size_t>(max_smem_optin())) fail_message("cuda gemv: stream plan needs too much shared memory");
  FT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem_optin()));
  int blocks = 0;
  FT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  if (blocks < 1) fail_message("cuda gemv: stream kernel does not fit on an SM");
  if (blocks > 255) blocks = 255;
  cache.store(key | static_cast<uint64_t>(blocks), std::memory_order_relaxed);
  return blocks;
}

// Dynamic shared memory of a plan: the ring, the block dots of two stages, the carries.
size_t stream_smem(const GemvStreamPlan& pl, int nt) {
  const size_t bps = static_cast<size_t>(32 * pl.warps * (pl.m <= 1 ? 1 : pl.m == 2 ? 2 : 4));
  return static_cast<size_t>(pl.stages) * (bps * kBlk + 16) + 2 * static_cast<size_t>(nt) * (bps + 1) * 4;
}

template <int NT, int M>
void launch_stream(const Params& p, const StreamArgs& g0, const GemvStreamPlan& pl, cudaStream_t stream) {
  auto kernel = stream_kernel<NT, M>;
  StreamArgs g = g0;
  g.bps = 32 * pl.warps * M;
  g.stages = pl.stages;
  g.stage_bytes = g.bps * kBlk + 16;
  const int threads = 32 * pl.warps;
  const size_t smem = stream_smem(pl, NT);
  static std::atomic<uint64_t> cache{0};
  const int fit = stream_ctas_per_sm(kernel, smem, threads, cache);
  const int per_sm = pl.ctas_per_sm < fit ? pl.ctas_per_sm : fit;
  int64_t n_cta = static_cast<int64_t>(per_sm) * sm_count();
  if (n_cta > g.n_gr) n_cta = g.n_gr;
  launch_pdl(kernel, dim3(static_cast<unsigned>(n_cta)), dim3(static_cast<unsigned>(threads)), smem, stream, p, g);
}

template <int NT>
void stream_m(const Params& p, const StreamArgs& g, const GemvStreamPlan& pl, cudaStream_t s) {
  if (pl.m <= 1) return launch_stream<NT, 1>(p, g, pl, s);
  if (pl.m == 2) return launch_stream<NT, 2>(p, g, pl, s);
  return launch_stream<NT, 4>(p, g, pl, s);
}

}  // namespace

bool gemv_nvfp4_stream(const Params& p, int64_t n_tok, bool grouped, const GemvStreamPlan& pl, cudaStream_t stream,
                       const Params* second) {
  const int64_t nb = p.k / 64;
  const int64_t n_slot = grouped ? n_tok : 1;
  // What the kernel handles: packed rows (a CTA's rows are one byte range), weights from a
  // 16-byte boundary, 4-byte aligned experts, one or two tokens dense, no combine, and block
  // indices of a slot's matrix below 2^31.
  if (p.slot_w != nullptr || (!grouped && n_tok > 2)) return false;
  if (p.row_bytes != nb * kBlk || reinterpret_cast<uintptr_t>(p.w) % 16 != 0) return false;
  if (second != nullptr && reinterpret_cast<uintptr_t>(second->w) % 16 != 0) return false;
  if (grouped && p.expert_bytes % 4 != 0) return false;
  if (p.rows * nb >= (int64_t{1} << 31)) return false;
  if (pl.stages < 2 || pl.stages > 8 || (pl.warps != 4 && pl.warps != 8) || pl.ctas_per_sm < 1) return false;
  const int nt = grouped ? 1 : static_cast<int>(n_tok);
  if (stream_smem(pl, nt) > static_cast<size_t>(max_smem_optin())) return false;  // the plan must fit one CTA
  StreamArgs g{};
  g.nb = static_cast<int>(nb);
  g.inv_nb = 1.0f / static_cast<float>(nb);
  g.rows = p.rows;
  g.n_slot = n_slot;
  g.n_gr = p.rows * n_slot * (second != nullptr ? 2 : 1);
  if (second != nullptr) {
    g.w2 = second->w;
    g.y2 = second->y;
    g.ldy2 = second->ldy;
    g.row_scale2 = second->row_scale;
    g.scale2 = second->scale;
    g.bank_col2 = second->bank_col;
  }
  if (nt == 1) stream_m<1>(p, g, pl, stream);
  else stream_m<2>(p, g, pl, stream);
  return true;
}

}  // namespace ft::cuda::gemv_detail
