// NVFP4 MoE decode GEMV on tensor cores fed by bulk copies (grouped mode of gemv.h, integer
// path, one token per slot): the expert gate / up (and their one-launch pair) and the down
// projection with its fused combine, bit for bit the sums of the slab and packed kernels
// (gemv_nvfp4.cu) that it replaces.
//
// Why: the slab / packed kernels read the Qwen3-30B-A3B experts at 19-26% of HBM bandwidth
// (H200 session 12: gate 768x2048 x8 5.8 us, down + combine 2048x768 x8 7.2 us; the gate+up
// pair 11.0 us a layer in a decode step): each warp loads one or two small items with 16-byte
// loads and waits for them, a few waves of warps one after another. Here every CTA issues its
// whole share of the experts' bytes at once (one cp.async.bulk per row and warp, after the
// route is known), all CTAs fit in one wave, and the tensor cores form the sums.
//
// Bits. The integer sum of each 16-element sub-block is exact however it is formed (dp4a in the
// slab / packed kernels, mma.sync here), so the fp32 part decides the bits, and it is theirs:
// per block, a = fma(is_0, sw_0 * dx_0, 0), ... over its 4 sub-blocks in order; then per row
//   slab order (ORDER 0; nb <= 32, one block per lane there): the 32-lane xor tree over
//     a_0 .. a_31 (0 for blocks past nb), done by one thread as the tree lane 0 ends with;
//   packed order (ORDER 1): 0 + a_0 + a_1 + ... in block order;
// then y = round(dot * s) with s = row_scale x scale x bank, and the combine's
// c = y_0 w_0, c = c + y_j w_j in rank order (no FMA), round(c). So the moe_cpu exact mirror
// (moe_cpu/gpu_dot.h), plan_as_combine and every bit-for-bit MoE test hold unchanged.
//
// Layout. A CTA owns a 16-row tile (grid x) of n_dots dot products (grid y: one (slot, half)
// without the combine -- half 1 is the pair's second tensor -- or one token's n_used ranks with
// it). Its units (dot, step) -- a step is 4 NVFP4 blocks, 144 bytes of each of the 16 rows, as
// in gemv_mma.cu -- are split over the NW warps in contiguous ranges; a warp loads a range in
// chunks of up to J steps of one dot, 16 row copies of J x 144 bytes on its mbarrier (rows
// tma_pitch(J) bytes apart in shared memory, conflict-free for the mma lanes), and writes each
// block's value a_b into red[dot][row][b]. After a CTA barrier, thread (dot, row) makes the
// row's sum in the order above; with the combine, the row's first thread sums the ranks.
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
#include "cuda/ops_math.cuh"
#include "cuda/pdl.cuh"
#include "cuda/q8_tail.cuh"

namespace ft::cuda::gemv_detail {
namespace {

constexpr int kRows = kMmaRows;

// Rows of a chunk sit pitch(j) bytes apart: j x 144 padded so that a row's words start 4 banks
// after the row before (gemv_mma_tma.cu's rule).
__host__ __device__ constexpr int moe_pitch(int j) { return j * kMmaRowStep + 4 * ((4 - 4 * j) & 31); }
static_assert(moe_pitch(2) % 128 == 16 && moe_pitch(4) % 128 == 16 && moe_pitch(8) % 128 == 16, "pitch");

struct MoeSmem {
  int frag, xd, bars, stage, red, fin, total;
  int nbp;  // floats per row of red (nb, odd: the final pass reads rows conflict-free)
};
MoeSmem moe_smem(int64_t k, int n_x, int n_dots, int nw, int pitch) {
  const int nb = static_cast<int>(k / 64);
  MoeSmem m{};
  m.nbp = nb | 1;
  m.frag = 16;
  m.xd = m.frag + n_x * (nb / 2) * kMmaFragGroupBytes;
  m.bars = ((m.xd + n_x * 2 * nb * 4) + 15) & ~15;
  m.stage = m.bars + ((nw * 8 + 127) & ~127);
  m.red = m.stage + nw * kRows * pitch;
  m.fin = m.red + n_dots * kRows * m.nbp * 4;
  m.total = m.fin + n_dots * kRows * 4;
  return m;
}

// What a launch computes beyond Params: the fp32 order to mirror (0 slab, 1 packed), halves
// (2: the pair), dots per CTA, and the SwiGLU epilogue (h != nullptr; see gemv_launch.h).
struct MoeRun {
  int order = 0, halves = 1, n_dots = 1;
  float* h = nullptr;
  int64_t ldh = 0;
  uint8_t* hq = nullptr;
  int64_t hq_row = 0;
  Round h_round = Round::kNone;
};

// The row's sum of its block values v[0..nb) (stride 1) in the order of the kernel it mirrors.
__device__ __forceinline__ float row_sum(const float* v, int nb, int order) {
  if (order == 1) {
    float dot = 0.0f;
    for (int b = 0; b < nb; ++b) dot += v[b];
    return dot;
  }
  // The slab kernel's lane tree, lane 0's value: level o adds entry i + o into entry i.
  float t[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float a = i < nb ? v[i] : 0.0f, b = i + 16 < nb ? v[i + 16] : 0.0f;
    t[i] = a + b;
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < o) t[i] = t[i] + t[i + o];
  return t[0];
}

template <int NW, int J>
__global__ void __launch_bounds__(NW * 32) nvfp4_moe_kernel(const Params p, const MoeSmem sm, const MoeRun run) {
  constexpr int kPitch = moe_pitch(J);
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const bool combine = p.slot_w != nullptr, glu = run.h != nullptr;
  const int n_dots = run.n_dots, halves = run.halves;
  // The CTA's rows: one 16-row tile; with the SwiGLU two (a Q8 block of 32 outputs).
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * (glu ? 2 * kRows : kRows);
  const int nb = static_cast<int>(p.k / 64), n_steps = nb / kMmaStepBlocks;
  // Dot d of this CTA: its slot, half (the pair's second tensor), first row and activation row.
  const int task = static_cast<int>(blockIdx.y);
  auto slot_of = [&](int d) { return combine ? task * p.n_used + d : glu ? task : task / halves; };
  auto half_of = [&](int d) { return glu ? d >> 1 : combine ? 0 : task % halves; };
  auto row_of = [&](int d) { return row0 + (glu ? kRows * (d & 1) : 0); };
  const int u0 = warp * (n_dots * n_steps) / NW, u1 = (warp + 1) * (n_dots * n_steps) / NW;
  uint8_t* ring = smem + sm.stage + warp * (kRows * kPitch);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + sm.bars) + warp;
  float* red = reinterpret_cast<float*>(smem + sm.red);

  if (lane == 0) mbar_init(bar, 1);
  __syncwarp();
  // Chunk at unit u: up to J steps of u's dot, not past u1 (returns the unit after it). Rows past
  // the last read the last row (their sums are never stored).
  auto issue = [&](int u) {
    const int d = u / n_steps, s0 = u - d * n_steps;
    const int js = min(min(J, n_steps - s0), u1 - u);
    const uint32_t len = static_cast<uint32_t>(js * kMmaRowStep);
    if (lane == 0) mbar_arrive_expect(bar, kRows * len);
    __syncwarp();
    if (lane < kRows) {
      const int64_t e = p.ids[slot_of(d)];
      const int64_t row = min(row_of(d) + lane, p.rows - 1);
      bulk_g2s(ring + lane * kPitch,
               (half_of(d) ? p.w2 : p.w) + e * p.expert_bytes + row * p.row_bytes +
                   static_cast<int64_t>(s0) * kMmaRowStep,
               len, bar);
    }
    return u + js;
  };

  // The expert ids come from the router: nothing loads before the wait.
  pdl_wait();
  pdl_trigger();
  int next = u0 < u1 ? issue(u0) : u1;
  // Thread (d, r) of the final pass: its row's scale and combine weight, loaded while the weights
  // stream in (after the sums they were two dependent round trips, ids -> bank, on every CTA's tail).
  const int fi = static_cast<int>(threadIdx.x), fd = fi / kRows;
  float f_s = 0.0f, f_w = 0.0f;
  if (fd < n_dots && row_of(fd) + (fi - fd * kRows) < p.rows) {
    const int64_t row = row_of(fd) + (fi - fd * kRows);
    const float ss = slot_scale(p, slot_of(fd), half_of(fd));
    f_s = p.row_scale != nullptr ? p.row_scale[row] * ss : ss;
    if (combine) f_w = p.slot_w[slot_of(fd)];
  }

  // Activation rows (slot / x_div: one for all dots, or one per rank with the combine), the E2M1 table.
  const int n_x = combine ? n_dots : 1;
  mma_build_x(smem + sm.frag, reinterpret_cast<float*>(smem + sm.xd), p.xq, p.xq_row, slot_of(0), p.x_div, n_x, p.k,
              nb, NW * 32);
  mma_put_table(smem);
  __syncthreads();
  const q8_detail::E2m1Table tab{reinterpret_cast<const uint32_t*>(smem)[0], reinterpret_cast<const uint32_t*>(smem)[1]};
  const int my_tile = (c >> 1) == (g & 1) ? g >> 1 : -1;
  uint4 bx[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) bx[t] = make_uint4(0, 0, 0, 0);

  uint32_t phase = 0;
  for (int u = u0; u < u1;) {
    const int d = u / n_steps, s0 = u - d * n_steps, js = next - u, xr = combine ? d : 0;
    const uint8_t* frag = smem + sm.frag + xr * (nb / 2) * kMmaFragGroupBytes + 16 * c;
    const float* xd = reinterpret_cast<const float*>(smem + sm.xd) + xr * 2 * nb;
    float* rd = red + d * kRows * sm.nbp;
    mbar_wait(bar, phase);
    phase ^= 1u;
    for (int j = 0; j < js; ++j) {
      const int step = s0 + j;
      const uint8_t* st = ring + j * kMmaRowStep;
#pragma unroll
      for (int gh = 0; gh < 2; ++gh) {
        int cc[4];
        mma_group_ints<kPitch>(st, frag, 2 * step + gh, gh, tab, my_tile, bx, g, c, cc);
        // Lane (g, c) holds sub-blocks 2h, 2h + 1 of block bb of rows g and g + 8; its partner
        // (c ^ 1) the other two. Lane h = 0 finishes row g's block, h = 1 row g + 8's.
        const int bb = 2 * gh + (c >> 1), h = c & 1, b = kMmaStepBlocks * step + bb, row = g + 8 * h;
        const int o0 = __shfl_xor_sync(0xFFFFFFFFu, h ? cc[0] : cc[2], 1);
        const int o1 = __shfl_xor_sync(0xFFFFFFFFu, h ? cc[1] : cc[3], 1);
        const int i0 = h ? o0 : cc[0], i1 = h ? o1 : cc[1], i2 = h ? cc[2] : o0, i3 = h ? cc[3] : o1;
        float sw[4];
        q8_detail::nvfp4_scales(lds32(st + row * kPitch + 36 * bb), sw);
        const float dx0 = xd[2 * b], dx1 = xd[2 * b + 1];
        float a = fmaf(static_cast<float>(i0), sw[0] * dx0, 0.0f);
        a = fmaf(static_cast<float>(i1), sw[1] * dx0, a);
        a = fmaf(static_cast<float>(i2), sw[2] * dx1, a);
        a = fmaf(static_cast<float>(i3), sw[3] * dx1, a);
        rd[row * sm.nbp + b] = a;
      }
    }
    u = next;
    if (u < u1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the reads above before the next bulk write
#endif
      __syncwarp();
      next = issue(u);
    }
  }
  __syncthreads();

  // Thread (d, r): row r of dot d in the mirrored kernel's order, scaled and rounded (n_dots x 16
  // <= the CTA's threads: gemv_nvfp4_mma_moe).
  float* fin = reinterpret_cast<float*>(smem + sm.fin);
  if (fd < n_dots) {
    const int r = fi - fd * kRows;
    const int64_t row = row_of(fd) + r;
    if (row < p.rows) {
      const float v = round_to(p.round, __fmul_rn(row_sum(red + (fd * kRows + r) * sm.nbp, nb, run.order), f_s));
      if (combine)
        fin[fi] = __fmul_rn(v, f_w);
      else if (glu)
        fin[fi] = v;
      else
        store_out(p.y + (half_of(fd) ? p.y2_off : 0) + static_cast<int64_t>(slot_of(fd)) * p.ldy + row, v,
                  p.accumulate);
    }
  }
  if (!combine && !glu) return;
  __syncthreads();
  if (glu) {
    // Warp 0: lane i's output row0 + i, h = round(silu(gate) * up) as swiglu_q8 forms it, and the
    // 32-value Q8 block of the down projection's input (rows % 32 == 0: the block is whole).
    if (warp == 0) {
      const float hv = round_to(run.h_round, ops::mul_rn(ops::silu(fin[lane]), fin[2 * kRows + lane]));
      run.h[static_cast<int64_t>(task) * run.ldh + row0 + lane] = hv;
      q8_quantize_warp(hv, row0 / 32, p.rows, run.hq + static_cast<int64_t>(task) * run.hq_row);
    }
    return;
  }
  if (threadIdx.x < kRows) {
    const int r = static_cast<int>(threadIdx.x);
    const int64_t row = row0 + r;
    if (row < p.rows) {
      // The CPU combine's arithmetic, ranks in order, one rounding per operation (no FMA).
      float cb = fin[r];
      for (int d = 1; d < n_dots; ++d) cb = __fadd_rn(cb, fin[d * kRows + r]);
      store_out(p.y + static_cast<int64_t>(task) * p.ldy + row, round_to(p.round, cb), p.accumulate);
    }
  }
}

std::atomic<int64_t> g_moe_launches{0};

template <int NW, int J>
bool launch_moe(const Params& p, const MoeRun& run, unsigned row_blocks, unsigned tasks, cudaStream_t stream) {
  const MoeSmem sm = moe_smem(p.k, p.slot_w != nullptr ? run.n_dots : 1, run.n_dots, NW, moe_pitch(J));
  if (sm.total > max_smem_optin()) return false;
  auto kernel = nvfp4_moe_kernel<NW, J>;
  static std::atomic<uint64_t> cache{0};
  if (cached_ctas_per_sm(kernel, static_cast<size_t>(sm.total), NW * 32, cache) < 1) return false;
  launch_pdl(kernel, dim3(row_blocks, tasks), dim3(NW * 32), static_cast<size_t>(sm.total), stream, p, sm, run);
  g_moe_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool gemv_nvfp4_mma_moe(const Params& p, int64_t n_slots, int order, const MoeGlu* glu, int warps,
                        cudaStream_t stream) {
  const int64_t nb = p.k / 64;
  const bool combine = p.slot_w != nullptr;
  MoeRun run;
  run.order = order;
  run.halves = p.w2 != nullptr ? 2 : 1;
  run.n_dots = combine ? p.n_used : glu != nullptr ? 4 : 1;
  if (glu != nullptr) {
    if (p.w2 == nullptr || combine || p.rows % 32 != 0 || p.accumulate) return false;
    run.h = glu->h;
    run.ldh = glu->ldh;
    run.hq = static_cast<uint8_t*>(glu->hq);
    run.hq_row = act_q8_row_bytes(p.rows);
    run.h_round = glu->round;
  }
  const int64_t tasks = combine ? n_slots / p.n_used : glu != nullptr ? n_slots : n_slots * run.halves;
  // Whole steps, at most 32 blocks a row (the slab order's one block per lane), 16-byte aligned
  // rows and experts, at most 8 dots (the final pass's threads); sm_90+.
  if (p.ids == nullptr || nb % kMmaStepBlocks != 0 || nb > 32 || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      (p.w2 != nullptr && reinterpret_cast<uintptr_t>(p.w2) % 16 != 0) || p.row_bytes % 16 != 0 ||
      p.expert_bytes % 16 != 0 || run.n_dots > 8 || tasks < 1 || tasks > 65535 || !bulk_copy_supported())
    return false;
  // Warps: a dot's steps (2..8) over 4 warps; the combine's ranks x steps over 8.
  const int nw = run.n_dots > 1 || warps == 8 ? 8 : 4;
  const int units = run.n_dots * static_cast<int>(nb / kMmaStepBlocks), per_warp = (units + nw - 1) / nw;
  const int j = per_warp <= 2 ? 2 : per_warp <= 4 ? 4 : 8;
  const int rows_cta = glu != nullptr ? 2 * kRows : kRows;
  const unsigned rb = static_cast<unsigned>((p.rows + rows_cta - 1) / rows_cta), t = static_cast<unsigned>(tasks);
  switch (nw * 10 + j) {
    case 42: return launch_moe<4, 2>(p, run, rb, t, stream);
    case 44: return launch_moe<4, 4>(p, run, rb, t, stream);
    case 48: return launch_moe<4, 8>(p, run, rb, t, stream);
    case 82: return launch_moe<8, 2>(p, run, rb, t, stream);
    case 84: return launch_moe<8, 4>(p, run, rb, t, stream);
    default: return launch_moe<8, 8>(p, run, rb, t, stream);
  }
}

}  // namespace ft::cuda::gemv_detail

namespace ft::cuda {
int64_t gemv_nvfp4_moe_launches() { return gemv_detail::g_moe_launches.load(std::memory_order_relaxed); }
}  // namespace ft::cuda
