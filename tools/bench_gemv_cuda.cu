// ft-bench-gemv-cuda: decode GEMV (src/cuda/gemv.h) weight-read bandwidth against the
// measured HBM read bandwidth of the same run, for the float path (fp32 X) and the integer
// path (X quantised once by quantize_act_q8, outside the timed loop; its own cost is printed
// separately).
//
//   ft-bench-gemv-cuda [--pool-gib N] [--copies N] [--launches N] [--quick] [--no-sweep] [--nvfp4] [--variants] [--dense] [--experts] [--sol] [--persist] [--tiled] [--clean] [--direct] [--batch]
//
// --variants: --nvfp4's routed cases of 1-2 tokens and its one-token variant sweep only (e.g.
// beside FT_CUDA_PDL=0); it includes the mma kernel's instances on the dense shapes.
// --dense: those dense one-token cases only (routed plan and mma instances; for ncu).
// --experts: the MoE expert gate (slab) and down + combine (packed) cases, and the dense
// one-token shapes routed, slab, mma and tiled (cuda/nvfp4_tiled.h); each once back to back and once after a dependent quantize_act_q8 ("dep", as in a
// decode step, where PDL cannot overlap one GEMV's weight stream with another's; the
// quantiser's time alone is subtracted).
//
// --sol: speed of light per benchmark shape: a plain streaming-read kernel (16-byte loads, 4 in
// flight per thread, an XOR reduction written once per CTA) over exactly the bytes the GEMV
// reads (weights + scales; experts: the 8 chosen experts' matrices), back to back and after the
// dependent quantiser (dep), beside the routed GEMV's time in the same mode. "SOL" waits for
// the previous kernel before its first load; "SOL-pre" loads first and waits only to store
// (a kernel that streamed all its weights while the previous one runs).
// --persist: the dense one-token shapes (and NVFP4 output heads) in the dep mode: session 7's
// plan (persistent kernel off), the routed plan, slab and mma forced, and every instance of the
// persistent mma kernel (gemv_mma_persist.cu: fold warps / groups per CTA / stages).
//
// --tiled: the tiled layout's (cuda/nvfp4_tiled.h) one-token kernel on the dense shapes, dep mode:
// the routed choice, dep and back to back, and gemv_mma.cu at each warps x stages (not with --no-sweep).
//
// --batch: Llama-8B's dense shapes tiled (clean scales) at 1..8 tokens, back to back: the batch tensor-core
// kernel (gemv_mma_batch.cu) against the slab kernel at 2..8 tokens.
//
// --nvfp4: only the NVFP4 integer-path cases (gemv_nvfp4.cu against the generic kernel) and
// a sweep of its plans (kernel / rows / activations from shared or global memory; one token:
// decoder b = byte_perm, p = sign-split, and the launch bound in 128-thread blocks per SM).
//
// Every case cycles through copies of its weights spread over a pool much larger than L2
// (default 2 GiB; the H200 has 50-60 MB of L2), so each launch reads from HBM. Launches are
// captured into a CUDA graph (launch gaps would otherwise dominate the 2-10 us kernels) and
// timed with events: median over 7 replays, per launch. Weights are random bytes written by
// a device hash (never zeros). GB/s counts the weight bytes one launch must read; "% read BW"
// divides it by the streaming-read kernel's rate measured at start-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/bulk_copy.cuh"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_tiled.h"
#include "cuda/pdl.cuh"
#include "gemv_direct_proto.cuh"

using namespace ft;
using namespace ft::cuda;

namespace {

__global__ void fill_random(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85EBCA77u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    p[i] = h;
  }
}

// Streaming read: 4 independent 16-byte loads in flight per thread, XOR-folded.
__global__ void read_stream(const uint4* p, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9E3779B9u) out[0] = acc;  // keeps the loads; practically never taken
}

// Speed of light of one launch: blockIdx.y = span (an expert's matrix, or the dense one),
// grid-stride 16-byte loads, 4 in flight per thread, XOR-folded and written once per CTA (so
// nothing is optimised away). Waits for the previous kernel (PDL) before its first load.
struct SolSpans {
  const uint4* p[8];
  int64_t n;  // 16-byte vectors per span
};
// PRE: the loads before the wait (only the result's store after it): what a kernel that could
// issue all its weight loads while the previous kernel runs would take.
template <bool PRE>
__global__ void __launch_bounds__(512) sol_read(const SolSpans s, uint32_t* out) {
  if (!PRE) pdl_wait(), pdl_trigger();
  const uint4* p = s.p[blockIdx.y];
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < s.n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < s.n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if (PRE) pdl_wait(), pdl_trigger();
  __shared__ uint32_t red[16];
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t v = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) v ^= red[w];
    out[blockIdx.y * gridDim.x + blockIdx.x] = v;
  }
}

// Session 11: two more speeds of light, one wave of CTAs each streaming a contiguous slice of
// its span (no grid-stride tail; the question of run 13: can one launch of 5-66 MB read at 80%
// at all?).
//   sol 3/4: "bulk" -- one thread per CTA issues 1D bulk copies (cp.async.bulk, sm_90) of
//            kBulkChunk bytes into a kBulkStages-deep ring of shared memory, completion on an
//            mbarrier per stage (4: the first stages issued before the PDL wait);
//   sol 5:   "ldg" -- 256 threads a CTA, 8 16-byte loads in flight per thread over the slice.
constexpr int kBulkStages = 6;
constexpr int kBulkChunk = 32768;

template <bool PRE>
__global__ void __launch_bounds__(32) sol_bulk(const SolSpans s, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t bars[kBulkStages];
  const int64_t bytes = s.n * 16;
  const int64_t b0 = bytes * blockIdx.x / gridDim.x / 16 * 16, b1 = bytes * (blockIdx.x + 1) / gridDim.x / 16 * 16;
  const uint8_t* src = reinterpret_cast<const uint8_t*>(s.p[blockIdx.y]);
  const int64_t n_chunks = (b1 - b0 + kBulkChunk - 1) / kBulkChunk;
  uint32_t acc = 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kBulkStages; ++i) mbar_init(&bars[i], 1);
    auto issue = [&](int64_t c) {
      if (c >= n_chunks) return;
      const int64_t o = b0 + c * kBulkChunk;
      const uint32_t len = static_cast<uint32_t>(b1 - o < kBulkChunk ? b1 - o : kBulkChunk);
      mbar_arrive_expect(&bars[c % kBulkStages], len);
      bulk_g2s(ring + (c % kBulkStages) * kBulkChunk, src + o, len, &bars[c % kBulkStages]);
    };
    if (!PRE) pdl_wait(), pdl_trigger();
    for (int c = 0; c < kBulkStages; ++c) issue(c);
    if (PRE) pdl_wait(), pdl_trigger();
    for (int64_t c = 0; c < n_chunks; ++c) {
      mbar_wait(&bars[c % kBulkStages], static_cast<uint32_t>((c / kBulkStages) & 1));
      acc ^= reinterpret_cast<const uint32_t*>(ring + (c % kBulkStages) * kBulkChunk)[0];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the read above before the next bulk write
#endif
      issue(c + kBulkStages);
    }
    out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
  }
}

// sol 6: "rows" -- the bulk GEMV's copy pattern alone (gemv_mma_bulk.cu, removed in session 36: it lost
// end to end, benches/h200.md, sessions 11-12): one CTA a SM over a
// contiguous range of 16-row tiles, a chunk = 16 row copies of up to 2304 bytes into rows 2320
// bytes apart, 4 chunks in flight, one warp issuing and waiting (no compute).
__global__ void __launch_bounds__(32) sol_rows(const uint8_t* w, int64_t rows, int64_t row_bytes, uint32_t* out) {
  constexpr int kNS = 4, kSeg = 2304, kPitch = 2320, kStage = 16 * kPitch;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t bars[kNS];
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t n_tiles = (rows + 15) / 16;
  const int64_t t0 = n_tiles * blockIdx.x / gridDim.x, t1 = n_tiles * (blockIdx.x + 1) / gridDim.x;
  const int n_seg = static_cast<int>((row_bytes + kSeg - 1) / kSeg);
  const int64_t n_chunks = (t1 - t0) * n_seg;
  if (lane == 0)
    for (int i = 0; i < kNS; ++i) mbar_init(&bars[i], 1);
  __syncwarp();
  auto issue = [&](int64_t q) {
    if (q >= n_chunks) return;
    const int st = static_cast<int>(q % kNS);
    const int64_t tile = t0 + q / n_seg;
    const int seg = static_cast<int>(q % n_seg);
    const int64_t left = row_bytes - static_cast<int64_t>(seg) * kSeg;
    const uint32_t len = static_cast<uint32_t>(left < kSeg ? left : kSeg);
    if (lane == 0) mbar_arrive_expect(&bars[st], 16 * len);
    __syncwarp();
    if (lane < 16) {
      int64_t row = tile * 16 + lane;
      if (row >= rows) row = rows - 1;
      bulk_g2s(ring + st * kStage + lane * kPitch, w + row * row_bytes + static_cast<int64_t>(seg) * kSeg, len, &bars[st]);
    }
  };
  for (int q = 0; q < kNS; ++q) issue(q);
  pdl_wait();
  pdl_trigger();
  uint32_t acc = 0;
  for (int64_t q = 0; q < n_chunks; ++q) {
    mbar_wait(&bars[q % kNS], static_cast<uint32_t>((q / kNS) & 1));
    acc ^= reinterpret_cast<const uint32_t*>(ring + (q % kNS) * kStage)[lane];
    __syncwarp();
    issue(q + kNS);
  }
  if (acc == 0x9E3779B9u) out[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(256) sol_ldg(const SolSpans s, uint32_t* out) {
  pdl_wait();
  pdl_trigger();
  constexpr int kU = 8;
  const int64_t b0 = s.n * blockIdx.x / gridDim.x, b1 = s.n * (blockIdx.x + 1) / gridDim.x;
  const uint4* p = s.p[blockIdx.y];
  uint32_t acc = 0;
  int64_t i = b0 + threadIdx.x;
  for (; i + (kU - 1) * 256 < b1; i += kU * 256) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = __ldcs(p + i + u * 256);
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < b1; i += 256) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc == 0x9E3779B9u) out[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

void randomize(DeviceBuffer& b, uint32_t seed) {
  fill_random<<<1024, 256>>>(b.as<uint32_t>(), b.bytes() / 4, seed);
  FT_CUDA_CHECK_LAUNCH();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per call of `body` (run `per_rep` times per timed replay) over 7 replays.
template <class F>
double time_graph(int per_rep, F&& body) {
  cudaStream_t s;
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  FT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_rep; ++i) body(i, s);
  FT_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  FT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  FT_CUDA_CHECK(cudaEventCreate(&e0));
  FT_CUDA_CHECK(cudaEventCreate(&e1));
  for (int w = 0; w < 2; ++w) FT_CUDA_CHECK(cudaGraphLaunch(exec, s));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    FT_CUDA_CHECK(cudaEventRecord(e0, s));
    FT_CUDA_CHECK(cudaGraphLaunch(exec, s));
    FT_CUDA_CHECK(cudaEventRecord(e1, s));
    FT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    FT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3 / per_rep);
  }
  FT_CUDA_CHECK(cudaEventDestroy(e0));
  FT_CUDA_CHECK(cudaEventDestroy(e1));
  FT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FT_CUDA_CHECK(cudaGraphDestroy(graph));
  FT_CUDA_CHECK(cudaStreamDestroy(s));
  return median(t);
}

struct Case {
  std::string name;
  GgmlType type;
  int64_t rows, k;
  int64_t n_tok = 1;
  // grouped (MoE): n_expert > 0
  int64_t n_expert = 0;
  int n_used = 0;
  bool shared_input = false;
  int stages = -1;
  bool q8 = false;
  bool combine = false;  // grouped down projection fused with the weighted expert sum
  int lanes = 0, rows_per_lane = 0;
  int nv_kernel = -1, nv_rows = 0, nv_xs = 0;  // gemv_set_nvfp4_override
  int nv_dec = 0, nv_minb = 0;                  // gemv_set_nvfp4_variant
  int nv_mma_w = 0, nv_mma_s = 0;               // gemv_set_nvfp4_mma
  int nv_pg = 0, nv_ps = 0;                     // gemv_set_nvfp4_persist (nv_pg -1: persistent off)
  int sol = 0;  // the speed-of-light read of the same bytes instead of the GEMV: 1 wait first, 2 loads first
  // Each launch after quantize_act_q8 of its input, as in a decode step (the GEMV depends on the
  // kernel before it: PDL cannot overlap two GEMVs' weight streams as it does back to back);
  // the quantiser's own time, measured alone, is subtracted.
  bool dep = false;
  // Dense NVFP4 weights in the tiled layout (cuda/nvfp4_tiled.h; GemvArgs::tiled): the kernel a
  // tiled call takes.
  bool tiled = false;
  // Tiled, 2..8 tokens: the slab kernel instead of the batch tensor-core kernel (gemv_set_nvfp4_mma_batch), or
  // that kernel at batch_stages (0: the table's).
  bool batch_off = false;
  int batch_stages = 0;
};

double g_read_bw = 0;  // bytes/s
int g_sms = 0;
// --copies N: exactly N copies of each case's weights, whatever the pool (0: the pool's count, at least 3).
// N 1 keeps a matrix of up to ~40 MB in L2 (50 MB on the H100): the kernel then runs off HBM's limit, a proxy
// for the per-weight work that holds it below a faster HBM's (the H200's).
int64_t g_copies = 0;
// --clean: tiled launches as for scanned weights (GemvArgs::scales_clean, nvfp4_scan.h) -- the instances without
// the UE4M3 NaN codes' fix-up (74 fewer of a step loop's 338 SASS instructions, bench/sass_local.sh). The
// bench's random scale bytes hold NaN codes, so only the timing means anything.
bool g_clean = false;

// Seconds per launch (dep: minus the quantiser's own time); prints a table row when `print`.
double run_case(const Case& c, size_t pool_bytes, int launches, bool print = true) {
  const int64_t rb = row_bytes(c.type, c.k);
  const bool grouped = c.n_expert > 0;
  const int64_t matrix_bytes = rb * c.rows * (grouped ? c.n_expert : 1);
  const int64_t copies =
      g_copies > 0 ? g_copies : std::max<int64_t>(3, static_cast<int64_t>(pool_bytes) / matrix_bytes);
  DeviceBuffer w(static_cast<size_t>(matrix_bytes * copies));
  randomize(w, 17);
  if (c.tiled)  // random bytes, so tiling only moves them: the timing of the tiled reads
    for (int64_t i = 0; i < copies; ++i) nvfp4_tile(w.as<uint8_t>() + i * matrix_bytes, c.rows, rb, nullptr);
  const int64_t n_slot = grouped ? c.n_tok * c.n_used : c.n_tok;
  const int64_t x_rows = grouped ? (c.shared_input ? c.n_tok : n_slot) : c.n_tok;
  DeviceBuffer x(static_cast<size_t>(x_rows * c.k * 4));
  {  // inputs in [-1, 1]
    std::vector<float> hx(static_cast<size_t>(x_rows * c.k));
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    x.upload(hx.data(), hx.size() * 4);
  }
  DeviceBuffer y(static_cast<size_t>(2 * n_slot * c.rows * 4));
  DeviceBuffer xq(act_q8_bytes(c.k, x_rows));
  if (c.q8) quantize_act_q8(x.as<float>(), c.k, c.k, x_rows, xq.get(), nullptr);
  DeviceBuffer slot_w(static_cast<size_t>(n_slot * 4));
  {
    std::vector<float> hw(static_cast<size_t>(n_slot), 0.125f);
    slot_w.upload(hw.data(), hw.size() * 4);
  }
  DeviceBuffer bank(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1) * 16));
  {
    std::vector<float> hb(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1) * 4), 0.5f);
    bank.upload(hb.data(), hb.size() * 4);
  }
  // Grouped: launch i takes experts (i*n_used + j) mod n_expert of copy (i*n_used / n_expert)
  // mod copies, so a launch never re-reads what a recent one left in L2.
  DeviceBuffer ids(static_cast<size_t>(std::max<int64_t>(launches * n_slot, 1) * 4));
  if (grouped) {
    std::vector<int32_t> h(static_cast<size_t>(launches * n_slot));
    for (int i = 0; i < launches; ++i)
      for (int64_t s = 0; s < n_slot; ++s)
        h[static_cast<size_t>(i * n_slot + s)] = static_cast<int32_t>((i * n_slot + s) % c.n_expert);
    ids.upload(h.data(), h.size() * 4);
  }
  gemv_set_stages_override(c.stages);
  gemv_set_lanes_override(c.lanes);
  gemv_set_rows_override(c.rows_per_lane);
  gemv_set_nvfp4_override(c.nv_kernel, c.nv_rows, c.nv_xs);
  gemv_set_nvfp4_variant(c.nv_dec, c.nv_minb);
  gemv_set_nvfp4_mma(c.nv_mma_w, c.nv_mma_s);
  gemv_set_nvfp4_persist(c.nv_pg, c.nv_ps);
  gemv_set_nvfp4_mma_batch(!c.batch_off, c.batch_stages);
  const int64_t tma_before = gemv_nvfp4_tma_launches(), batch_before = gemv_nvfp4_mma_batch_launches();
  const int64_t mma_before = gemv_nvfp4_mma_launches(), persist_before = gemv_nvfp4_persist_launches();
  DeviceBuffer sol_out(static_cast<size_t>(g_sms) * 4 * 8 * 4);
  auto body = [&](int i, cudaStream_t s) {
    GemvArgs a;
    a.type = c.type;
    a.row_bytes = rb;
    a.k = c.k;
    a.rows = c.rows;
    a.x = x.as<float>();
    a.ldx = c.k;
    a.n_tok = n_slot;
    a.y = y.as<float>();
    a.ldy = c.rows;
    a.xq = c.q8 ? xq.get() : nullptr;
    if (grouped) {
      const int64_t copy = (static_cast<int64_t>(i) * n_slot / c.n_expert) % copies;
      a.w = w.as<uint8_t>() + copy * matrix_bytes;
      a.ids = ids.as<int32_t>() + static_cast<int64_t>(i) * n_slot;
      a.expert_bytes = rb * c.rows;
      a.x_div = c.shared_input ? c.n_used : 1;
      a.bank = bank.as<float>();
      a.bank_col = c.shared_input ? 0 : 2;
      if (c.combine) {
        a.slot_w = slot_w.as<float>();
        a.n_used = c.n_used;
      }
    } else {
      a.w = w.as<uint8_t>() + (i % copies) * matrix_bytes;
      a.tiled = c.tiled;
      a.scales_clean = c.tiled && g_clean;
    }
    if (c.dep) quantize_act_q8(x.as<float>(), c.k, c.k, x_rows, xq.get(), s);
    if (c.sol) {  // the bytes this launch's GEMV reads: the matrix, or its n_slot experts'
      SolSpans sp{};
      const int n_sp = grouped ? static_cast<int>(n_slot) : 1;
      sp.n = rb * c.rows / 16;
      for (int j = 0; j < n_sp; ++j) {
        const int64_t e = grouped ? (static_cast<int64_t>(i) * n_slot + j) % c.n_expert : 0;
        sp.p[j] = reinterpret_cast<const uint4*>(a.w + e * a.expert_bytes);
      }
      if (c.sol == 3 || c.sol == 4) {  // one CTA a SM in all, split over the spans
        const unsigned gx = static_cast<unsigned>(std::max(1, g_sms / n_sp));
        const size_t sm = size_t{kBulkStages} * kBulkChunk;
        launch_pdl(c.sol == 4 ? sol_bulk<true> : sol_bulk<false>, dim3(gx, static_cast<unsigned>(n_sp)), dim3(32), sm,
                   s, sp, sol_out.as<uint32_t>());
      } else if (c.sol == 6) {  // the bulk GEMV's copies (dense only)
        static const bool attr = [] {
          FT_CUDA_CHECK(cudaFuncSetAttribute(sol_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 16 * 2320));
          return true;
        }();
        (void)attr;
        const unsigned gx = static_cast<unsigned>(std::min<int64_t>((c.rows + 15) / 16, g_sms));
        launch_pdl(sol_rows, dim3(gx), dim3(32), size_t{4} * 16 * 2320, s, a.w, c.rows, rb, sol_out.as<uint32_t>());
      } else if (c.sol == 5) {  // 4 CTAs of 256 threads a SM in all
        const unsigned gx = static_cast<unsigned>(std::max(1, g_sms * 4 / n_sp));
        launch_pdl(sol_ldg, dim3(gx, static_cast<unsigned>(n_sp)), dim3(256), 0, s, sp, sol_out.as<uint32_t>());
      } else {
        // 4 CTAs of 512 threads per SM in all, split over the spans.
        const unsigned gx = static_cast<unsigned>(std::max(1, g_sms * 4 / n_sp));
        launch_pdl(c.sol == 2 ? sol_read<true> : sol_read<false>, dim3(gx, static_cast<unsigned>(n_sp)), dim3(512), 0,
                   s, sp, sol_out.as<uint32_t>());
      }
    } else {
      gemv(a, s);
    }
  };
  double t = time_graph(launches, body);
  double t_quant = 0;
  if (c.dep) {
    t_quant = time_graph(launches, [&](int, cudaStream_t s) { quantize_act_q8(x.as<float>(), c.k, c.k, x_rows, xq.get(), s); });
    t -= t_quant;
  }
  gemv_set_stages_override(-1);
  gemv_set_lanes_override(0);
  gemv_set_rows_override(0);
  gemv_set_nvfp4_override(-1, 0, 0);
  gemv_set_nvfp4_variant(0, 0);
  gemv_set_nvfp4_mma(0, 0);
  gemv_set_nvfp4_persist(0, 0);
  gemv_set_nvfp4_mma_batch(true);
  const bool ran_tma = gemv_nvfp4_tma_launches() > tma_before;
  const bool ran_batch = gemv_nvfp4_mma_batch_launches() > batch_before;
  const bool ran_mma = gemv_nvfp4_mma_launches() > mma_before;
  const bool ran_persist = gemv_nvfp4_persist_launches() > persist_before;
  const double bytes = static_cast<double>(rb * c.rows * n_slot / (grouped ? 1 : c.n_tok));
  const double gbs = bytes / t * 1e-9;
  char shape[64];
  if (grouped)
    std::snprintf(shape, sizeof shape, "%lldx%lld x%d of %lld", static_cast<long long>(c.rows),
                  static_cast<long long>(c.k), c.n_used, static_cast<long long>(c.n_expert));
  else
    std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(c.rows), static_cast<long long>(c.k));
  std::string plan = "auto";
  if (c.q8 && gemv_q8_supported(c.type)) {  // the table's choice
    const GemvQ8Plan pl = gemv_q8_plan(c.type, c.rows, c.k, grouped ? 1 : c.n_tok,
                                       grouped ? (c.combine ? c.n_tok : n_slot) : 1, c.combine ? c.n_used : 1);
    plan = "a" + std::to_string(pl.lanes) + "/" + std::to_string(grouped || c.n_tok == 1 ? pl.rows : 0) + "/" +
           std::to_string(pl.stages);
  }
  const bool nv = c.q8 && c.type == GgmlType::NVFP4 && c.lanes == 0 && c.nv_kernel != 0;
  if (nv) {  // gemv_nvfp4.cu: kernel / rows / activations in shared memory (s) or global (g)
    const int64_t n_out = grouped ? (c.combine ? c.n_tok : n_slot) : 1;
    GemvNvfp4Plan pl = gemv_nvfp4_plan(c.rows, c.k, grouped ? 1 : c.n_tok, n_out, c.combine ? c.n_used : 1, grouped);
    if (c.nv_kernel >= 0) pl.kernel = c.nv_kernel;
    if (c.nv_rows > 0) pl.rows = c.nv_rows;
    if (c.nv_xs > 0) pl.x_smem = c.nv_xs == 2;
    if (c.nv_dec > 0) pl.decode = c.nv_dec;
    if (c.nv_minb > 0) pl.minb = c.nv_minb;
    plan = (c.nv_kernel >= 0 || c.nv_rows > 0 || c.nv_xs > 0 || c.nv_dec > 0 || c.nv_minb > 0 ? "N" : "n") +
           std::to_string(pl.kernel) + "/" + std::to_string(pl.rows) + "/" + (pl.x_smem ? "s" : "g");
    if (!pl.x_smem && (grouped || c.n_tok == 1))  // the variant: decoder (b byte_perm, p sign-split), blocks/SM
      plan += std::string(pl.decode == 1 ? "b" : "p") + std::to_string(pl.minb);
    if (ran_mma)  // the mma kernel (gemv_mma.cu): warps per 16-row CTA / stages
      plan = std::string(c.nv_kernel == 3 || c.nv_mma_w > 0 ? "N" : "n") + "3/" +
             std::to_string(c.nv_mma_w > 0 ? c.nv_mma_w : pl.mma_warps) + "/" +
             std::to_string(c.nv_mma_s > 0 ? c.nv_mma_s : pl.mma_stages);
    if (ran_persist)  // the persistent mma kernel: fold / groups per CTA / stages
      plan = std::string(c.nv_kernel == 4 || c.nv_pg > 0 ? "N" : "n") + "4/" +
             std::to_string(c.nv_mma_w > 0 ? c.nv_mma_w : pl.persist_fold) + "/" +
             std::to_string(c.nv_pg > 0 ? c.nv_pg : pl.persist_groups) + "/" +
             std::to_string(c.nv_ps > 0 ? c.nv_ps : pl.persist_stages);
    if (c.nv_pg < 0) plan += "-p";
  }
  if (c.sol) plan = c.sol == 2 ? "sol-pre" : c.sol == 3 ? "bulk" : c.sol == 4 ? "bulk-pre" : c.sol == 5 ? "ldg" : c.sol == 6 ? "rows" : "sol";
  if (ran_tma) plan = "n5 (bulk-copy mma)";  // gemv_mma_tma.cu at its defaults
  if (ran_batch) plan = c.batch_stages > 0 ? "batch mma S" + std::to_string(c.batch_stages) : "batch mma";
  if (c.tiled) plan += g_clean ? " tiled clean" : " tiled";
  if (c.dep) plan += " dep(q " + std::to_string(static_cast<int>(t_quant * 1e9)) + "ns)";
  if (!nv && (c.stages >= 0 || c.lanes != 0 || c.rows_per_lane != 0)) {
    auto f = [](int v, int dflt) { return v == dflt ? std::string("-") : std::to_string(v); };
    plan = f(c.lanes, 0) + "/" + f(c.rows_per_lane, 0) + "/" + f(c.stages, -1);
  }
  if (!print) return t;
  std::printf("| %-22s | %-5s | %-5s | %-18s | %4lld | %-9s | %8.2f | %8.2f | %7.0f | %5.1f%% |\n", c.name.c_str(),
              std::string(type_name(c.type)).c_str(), c.q8 ? (c.combine ? "q8+c" : "q8") : (c.combine ? "f32+c" : "f32"),
              shape, static_cast<long long>(c.n_tok), plan.c_str(), bytes * 1e-6, t * 1e6, gbs,
              100.0 * bytes / t / g_read_bw);
  std::fflush(stdout);
  return t;
}


// --direct (tools/gemv_direct_proto.cuh): the register-fed prototype of the tiled GEMV beside the tiled
// kernel itself, on one shape. First the check: one random matrix tiled through gemv() (checked scales) and, tiled
// lane-major, through every prototype instance (checked) -- rows bitwise equal, max |diff|. Then back-to-back
// times over `copies` copies (direct layout, random bytes: timing only): the tiled kernel (checked / clean, its
// routed warps x stages) and the prototype at warps x steps ahead, checked and clean.
void run_direct(int64_t rows, int64_t k, size_t pool_bytes, int launches) {
  using namespace ft::cuda::direct_proto;
  const int64_t rb = k / 64 * 36, matrix_bytes = rb * rows;
  const int64_t copies = g_copies > 0 ? g_copies : std::max<int64_t>(3, static_cast<int64_t>(pool_bytes) / matrix_bytes);
  DeviceBuffer x(static_cast<size_t>(k * 4)), xq(act_q8_bytes(k, 1)), y(static_cast<size_t>(rows * 4)),
      y2(static_cast<size_t>(rows * 4));
  {
    std::vector<float> hx(static_cast<size_t>(k));
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    x.upload(hx.data(), hx.size() * 4);
  }
  quantize_act_q8(x.as<float>(), k, k, 1, xq.get(), nullptr);
  auto args = [&](const uint8_t* w, float* out, bool clean, bool lanes = false) {
    GemvArgs a;
    a.type = GgmlType::NVFP4, a.row_bytes = rb, a.k = k, a.rows = rows, a.x = x.as<float>(), a.ldx = k, a.n_tok = 1;
    a.y = out, a.ldy = rows, a.xq = xq.get(), a.w = w, a.tiled = true, a.scales_clean = clean || lanes;
    a.lanes = lanes;
    return a;
  };
  struct Cfg {
    int nw, pd;
    bool ring;  // the per-lane cp.async ring of pd stages (direct_cp_kernel), not pd steps in registers
  };
  const Cfg cfgs[] = {{4, 2, false}, {4, 3, false}, {8, 2, false}, {8, 3, false}, {8, 4, false},
                      {4, 2, true},  {4, 3, true},  {8, 3, true},  {8, 4, true}};
  {  // the check
    DeviceBuffer wt(static_cast<size_t>(matrix_bytes)), wd(static_cast<size_t>(matrix_bytes));
    randomize(wt, 23);
    FT_CUDA_CHECK(cudaMemcpy(wd.get(), wt.get(), static_cast<size_t>(matrix_bytes), cudaMemcpyDeviceToDevice));
    nvfp4_tile(wt.as<uint8_t>(), rows, rb, nullptr);
    nvfp4_tile(wd.as<uint8_t>(), rows, rb, nullptr, /*lanes=*/true);
    gemv(args(wt.as<uint8_t>(), y.as<float>(), false), nullptr);
    std::vector<float> hr(static_cast<size_t>(rows)), hd(static_cast<size_t>(rows));
    y.download(hr.data(), hr.size() * 4);
    for (const Cfg& f : cfgs) {
      FT_CUDA_CHECK(cudaMemset(y2.get(), 0xFF, y2.bytes()));
      if (!launch(DirectParams{wd.as<uint8_t>(), xq.as<uint8_t>(), y2.as<float>(), rows, k}, f.nw, f.pd, true, nullptr,
                  f.ring)) {
        std::printf("direct %lldx%lld %d/%d%s: no instance\n", static_cast<long long>(rows), static_cast<long long>(k),
                    f.nw, f.pd, f.ring ? " ring" : "");
        continue;
      }
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      y2.download(hd.data(), hd.size() * 4);
      int64_t same = 0;
      double md = 0;
      for (int64_t r = 0; r < rows; ++r) {
        same += std::memcmp(&hr[r], &hd[r], 4) == 0;
        md = std::max(md, static_cast<double>(std::fabs(hr[r] - hd[r])));
      }
      std::printf("direct check %lldx%lld %d warps / %d %s: %lld of %lld rows bitwise equal to the tiled kernel, max |diff| %g\n",
                  static_cast<long long>(rows), static_cast<long long>(k), f.nw, f.pd, f.ring ? "stages (ring)" : "ahead",
                  static_cast<long long>(same), static_cast<long long>(rows), md);
    }
  }
  DeviceBuffer w(static_cast<size_t>(matrix_bytes * copies));
  randomize(w, 17);
  auto row = [&](const char* what, double t) {
    const double gbs = static_cast<double>(matrix_bytes) / t * 1e-9;
    std::printf("| %lldx%lld | %s | %.2f | %.0f | %.1f%% |\n", static_cast<long long>(rows), static_cast<long long>(k), what,
                t * 1e6, gbs, 100.0 * gbs * 1e9 / g_read_bw);
  };
  // dep: each launch after quantize_act_q8 of its input, as in a decode step (the quantiser's own time
  // subtracted), so only the loads before the PDL wait overlap the kernel before.
  const double t_quant = time_graph(launches, [&](int, cudaStream_t s) { quantize_act_q8(x.as<float>(), k, k, 1, xq.get(), s); });
  for (bool dep : {false, true}) {
    auto quant = [&](cudaStream_t s) {
      if (dep) quantize_act_q8(x.as<float>(), k, k, 1, xq.get(), s);
    };
    const double tq = dep ? t_quant : 0.0;
    const char* mode = dep ? " dep" : "";
    for (bool clean : {false, true}) {
      const double t = time_graph(launches, [&](int i, cudaStream_t s) {
        quant(s);
        gemv(args(w.as<uint8_t>() + (i % copies) * matrix_bytes, y.as<float>(), clean), s);
      });
      row((std::string(clean ? "tiled clean" : "tiled") + mode).c_str(), t - tq);
    }
    // The engine's lane-major instances (gemv_mma.cu LANES, nvfp4_tiled.h "Lanes"; random bytes: timing only)
    // beside the clean tiled ones, at the plan's warps x stages and forced ones.
    const std::pair<int, int> forced[] = {{0, 0}, {4, 2}, {4, 3}, {8, 3}, {8, 4}};
    for (const auto& [fw, fs] : forced)
      for (bool lanes : {false, true}) {
        if (fw == 0 && !lanes) continue;  // the plan's tiled clean row is above
        gemv_set_nvfp4_mma(fw, fs);
        const int64_t l0 = gemv_nvfp4_lanes_launches();
        const double t = time_graph(launches, [&](int i, cudaStream_t s) {
          quant(s);
          gemv(args(w.as<uint8_t>() + (i % copies) * matrix_bytes, y.as<float>(), true, lanes), s);
        });
        gemv_set_nvfp4_mma(0, 0);
        if (lanes && gemv_nvfp4_lanes_launches() == l0) continue;  // no lanes instance ran
        char what[48];
        if (fw == 0)
          std::snprintf(what, sizeof what, "lanes (plan)%s", mode);
        else
          std::snprintf(what, sizeof what, "%s %d/%d%s", lanes ? "lanes" : "tiled clean", fw, fs, mode);
        row(what, t - tq);
      }
    for (const Cfg& f : cfgs)
      for (bool chk : {true, false}) {
        bool ok = true;
        const double t = time_graph(launches, [&](int i, cudaStream_t s) {
          quant(s);
          ok = launch(DirectParams{w.as<uint8_t>() + (i % copies) * matrix_bytes, xq.as<uint8_t>(), y2.as<float>(), rows, k},
                      f.nw, f.pd, chk, s, f.ring) && ok;
        });
        if (!ok) continue;
        char what[48];
        std::snprintf(what, sizeof what, "direct%s %d/%d%s%s", f.ring ? " ring" : "", f.nw, f.pd, chk ? "" : " clean", mode);
        row(what, t - tq);
      }
  }
}
}  // namespace

int main(int argc, char** argv) {
  double pool_gib = 2.0;
  int launches = 200;
  bool quick = false, sweep = true, nvfp4_only = false, variants_only = false, dense_only = false, experts_only = false;
  bool sol_only = false, persist_only = false, tiled_only = false, direct_only = false, batch_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pool-gib" && i + 1 < argc) pool_gib = std::atof(argv[++i]);
    else if (a == "--launches" && i + 1 < argc) launches = std::atoi(argv[++i]);
    else if (a == "--copies" && i + 1 < argc) g_copies = std::atoll(argv[++i]);
    else if (a == "--quick") quick = true;
    else if (a == "--no-sweep") sweep = false;
    else if (a == "--nvfp4") nvfp4_only = true;
    else if (a == "--variants") nvfp4_only = variants_only = true;
    else if (a == "--dense") nvfp4_only = variants_only = dense_only = true;
    else if (a == "--experts") experts_only = true;
    else if (a == "--sol") sol_only = true;
    else if (a == "--persist") persist_only = true;
    else if (a == "--tiled") tiled_only = true;
    else if (a == "--batch") batch_only = true;
    else if (a == "--clean") g_clean = true;
    else if (a == "--direct") direct_only = true;
    else {
      std::fprintf(stderr, "usage: ft-bench-gemv-cuda [--pool-gib N] [--copies N] [--launches N] [--quick] [--no-sweep] [--nvfp4] [--variants] [--dense] [--experts] [--sol] [--persist] [--tiled] [--clean] [--direct] [--batch]\n");
      return 2;
    }
  }
  try {
    if (!has_device()) {
      std::printf("no CUDA device\n");
      return 0;
    }
    std::printf("device: %s\n", device_summary(0).c_str());
    const size_t pool = static_cast<size_t>(pool_gib * (1ull << 30));

    // HBM read bandwidth: stream 4 GiB.
    {
      DeviceBuffer buf(size_t{4} << 30);
      randomize(buf, 1);
      DeviceBuffer out(16);
      int sms = 0;
      FT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
      g_sms = sms;
      const size_t n = buf.bytes() / 16;
      const double t = time_graph(5, [&](int, cudaStream_t s) {
        read_stream<<<sms * 8, 512, 0, s>>>(buf.as<uint4>(), n, out.as<uint32_t>());
        FT_CUDA_CHECK_LAUNCH();
      });
      g_read_bw = static_cast<double>(buf.bytes()) / t;
      DeviceBuffer dst(buf.bytes() / 2);
      const double tc = time_graph(5, [&](int, cudaStream_t s) {
        FT_CUDA_CHECK(cudaMemcpyAsync(dst.get(), buf.get(), dst.bytes(), cudaMemcpyDeviceToDevice, s));
      });
      std::printf("HBM streaming read: %.0f GB/s (4 GiB, median of 7); D2D copy (read+write): %.0f GB/s\n",
                  g_read_bw * 1e-9, 2.0 * static_cast<double>(dst.bytes()) / tc * 1e-9);
    }

    // The integer path's activation quantiser, per call (one input of k values, n_tok rows).
    for (int64_t k : {4096, 14336})
      for (int64_t nt : {1, 8}) {
        DeviceBuffer xb(static_cast<size_t>(k * nt * 4)), qb(act_q8_bytes(k, nt));
        FT_CUDA_CHECK(cudaMemset(xb.get(), 0, xb.bytes()));
        const double tq = time_graph(launches, [&](int, cudaStream_t s) {
          quantize_act_q8(xb.as<float>(), k, k, nt, qb.get(), s);
        });
        std::printf("quantize_act_q8 k=%lld ntok=%lld: %.2f us\n", static_cast<long long>(k), static_cast<long long>(nt),
                    tq * 1e6);
      }

    std::printf("\nplan = lanes per row / rows per lane / cp.async stages ('-' = table)\n");
    std::printf("\n| case                   | type  | path  | rows x k           | ntok | plan      |     MB   |    us    |  GB/s   | %% read BW |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    std::vector<Case> cases;
    auto key = [](bool q8, int64_t nt) {
      std::vector<Case> v;
      v.push_back({"llama8b ffn gate/up", GgmlType::NVFP4, 14336, 4096, nt});
      v.push_back({"llama8b ffn down", GgmlType::NVFP4, 4096, 14336, nt});
      v.push_back({"qwen3moe expert gate", GgmlType::NVFP4, 768, 2048, nt, 128, 8, true});
      v.push_back({"qwen3moe expert down", GgmlType::NVFP4, 2048, 768, nt, 128, 8, false});
      for (Case& c : v) c.q8 = q8;
      return v;
    };
    const int64_t dense_shapes[][2] = {{14336, 4096}, {28672, 4096}, {6144, 4096}, {4096, 4096},
                                       {4096, 14336}, {5120, 2048},  {2048, 4096}};
    if (direct_only) {
      std::printf("\n| shape | kernel | us | GB/s | %% read BW |\n|---|---|---|---|---|\n");
      for (const auto& d : {std::array<int64_t, 2>{4096, 14336}, std::array<int64_t, 2>{28672, 4096},
                            std::array<int64_t, 2>{14336, 4096}, std::array<int64_t, 2>{6144, 4096}})
        run_direct(d[0], d[1], pool, launches);
      return 0;
    }
    if (batch_only) {
      // A batched decode step's dense projections (Llama-8B's) on tiled weights with clean scales, as the engine
      // loads them, 1..8 tokens back to back: the batch tensor-core kernel (gemv_mma_batch.cu) against the slab
      // kernel it replaces (2..8 tokens); GB/s counts the weights once a launch.
      g_clean = true;
      const int64_t shapes[][2] = {{28672, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}};
      for (const auto& d : shapes)
        for (int64_t nt : {1, 2, 3, 4, 6, 8})
          for (int v : {0, -1, 2, 3, 4}) {  // the table's stages, the slab kernel, forced stages (not with --no-sweep)
            if ((nt == 1 && v != 0) || (!sweep && v > 0)) continue;
            Case c{v < 0 ? "slab" : "batch", GgmlType::NVFP4, d[0], d[1], nt};
            c.q8 = true, c.tiled = true, c.batch_off = v < 0, c.batch_stages = v > 0 ? v : 0;
            run_case(c, pool, launches);
          }
      return 0;
    }
    if (tiled_only) {
      // The tiled layout's one-token kernel over its knobs, after a dependent quantiser (as in a
      // decode step): gemv_mma.cu at warps x stages. (Session 19's sweep also ran the bulk-copy
      // kernel on tiled weights, slower everywhere; it reads row-major weights only now.)
      const int64_t shapes[][2] = {{28672, 4096}, {14336, 4096}, {6144, 4096}, {4096, 14336}, {5120, 2048}};
      struct Ws {
        int w, s;
      };
      for (const auto& d : shapes) {
        Case base{"tiled", GgmlType::NVFP4, d[0], d[1], 1};
        base.q8 = true, base.dep = true, base.tiled = true;
        cases.push_back(base);
        Case b2b = base;  // back to back: the kernel's own time, without the quantize launch between
        b2b.dep = false;
        cases.push_back(b2b);
        if (!sweep) continue;  // --no-sweep: the routed choice only
        for (const Ws ws : {Ws{4, 2}, Ws{4, 3}, Ws{4, 4}, Ws{8, 2}, Ws{8, 3}, Ws{8, 4}, Ws{16, 2}}) {
          Case c = base;
          c.nv_mma_w = ws.w, c.nv_mma_s = ws.s;
          cases.push_back(c);
        }
      }
      for (const Case& c : cases) {
        try {
          run_case(c, pool, launches);
        } catch (const std::exception& e) {
          std::printf("| %s %lldx%lld | error: %s |\n", c.name.c_str(), static_cast<long long>(c.rows),
                      static_cast<long long>(c.k), e.what());
        }
      }
      return 0;
    }
    if (sol_only) {
      // Per shape and mode: the routed GEMV and the pure read of the same bytes.
      std::printf("\n| shape | mode | MB | GEMV us | GEMV %% read BW | SOL us | SOL %% read BW | GEMV / SOL | SOL-pre us | SOL-pre %% | bulk us (%%) | bulk-pre us (%%) | ldg us (%%) | rows (the bulk GEMV's copies alone) |\n");
      std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
      {
        static bool once = [] {
          FT_CUDA_CHECK(cudaFuncSetAttribute(sol_bulk<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBulkStages * kBulkChunk));
          FT_CUDA_CHECK(cudaFuncSetAttribute(sol_bulk<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBulkStages * kBulkChunk));
          return true;
        }();
        (void)once;
      }
      std::vector<std::pair<std::string, Case>> v;
      for (const auto& d : dense_shapes) {
        Case r{"dense", GgmlType::NVFP4, d[0], d[1], 1};
        r.q8 = true;
        v.push_back({std::to_string(d[0]) + "x" + std::to_string(d[1]), r});
      }
      Case gate{"qwen3moe expert gate", GgmlType::NVFP4, 768, 2048, 1, 128, 8, true};
      gate.q8 = true;
      Case down{"qwen3moe down+combine", GgmlType::NVFP4, 2048, 768, 1, 128, 8, false};
      down.q8 = true, down.combine = true;
      v.push_back({"expert gate 768x2048 x8", gate});
      v.push_back({"expert down+comb 2048x768 x8", down});
      for (bool dep : {false, true})
        for (auto& [name, c0] : v) {
          Case c = c0;
          c.dep = dep;
          const double tg = run_case(c, pool, launches, false);
          c.sol = 1;
          const double ts = run_case(c, pool, launches, false);
          c.sol = 2;
          const double tp = run_case(c, pool, launches, false);
          double tx[3];
          for (int j = 0; j < 3; ++j) {
            c.sol = 3 + j;
            tx[j] = run_case(c, pool, launches, false);
          }
          c.sol = 0;
          double trow = 0;
          if (c.n_expert == 0) {
            c.sol = 6;
            trow = run_case(c, pool, launches, false);
            c.sol = 0;
          }
          const double bytes = static_cast<double>(row_bytes(c.type, c.k) * c.rows * (c.n_expert > 0 ? c.n_used : 1));
          auto pc = [&](double t) { return 100.0 * bytes / t / g_read_bw; };
          std::printf("| %s | %s | %.2f | %.2f | %.1f%% | %.2f | %.1f%% | %.2f | %.2f | %.1f%% | %.2f (%.1f%%) | %.2f (%.1f%%) | %.2f (%.1f%%) | %.2f (%.1f%%) |\n",
                      name.c_str(), dep ? "dep" : "b2b", bytes * 1e-6, tg * 1e6, pc(tg), ts * 1e6, pc(ts), tg / ts,
                      tp * 1e6, pc(tp), tx[0] * 1e6, pc(tx[0]), tx[1] * 1e6, pc(tx[1]), tx[2] * 1e6, pc(tx[2]), trow * 1e6,
                      trow > 0 ? pc(trow) : 0.0);
          std::fflush(stdout);
        }
      return 0;
    }
    if (persist_only) {
      // Dep mode (as in a decode step): session 7's plan, the routed plan, slab, mma, and the
      // persistent kernel's instances; plus NVFP4 output heads (Qwen3.6's is NVFP4; Llama-8B's
      // and Qwen3-30B-A3B's are BF16 in our presets, so theirs are "if it were").
      struct Pi {
        int f, g, s;
      };
      const Pi inst[] = {{4, 1, 2}, {4, 1, 3}, {4, 2, 2}, {4, 2, 3}, {4, 2, 4}, {4, 4, 2}, {8, 1, 2},
                         {8, 1, 3}, {8, 1, 4}, {8, 1, 6}, {8, 2, 3}, {16, 1, 2}, {16, 1, 3}};
      std::vector<std::array<int64_t, 2>> shapes;
      for (const auto& d : dense_shapes) shapes.push_back({d[0], d[1]});
      shapes.push_back({248320, 2048});
      shapes.push_back({128256, 4096});
      for (const auto& d : shapes) {
        Case base{"dense", GgmlType::NVFP4, d[0], d[1], 1};
        base.q8 = true, base.dep = true;
        if (d[0] > 100000) base.name = "head";
        Case old = base;
        old.nv_pg = -1;
        cases.push_back(old);
        cases.push_back(base);
        for (int kern : {1, 3}) {
          Case c = base;
          c.nv_kernel = kern;
          cases.push_back(c);
        }
        for (const Pi& pi : inst) {
          Case c = base;
          c.nv_kernel = 4, c.nv_mma_w = pi.f, c.nv_pg = pi.g, c.nv_ps = pi.s;
          cases.push_back(c);
        }
        // gemv_mma.cu's kernel at the one-group instances' warps / stages (the instances it has):
        // with at most one resident wave of tiles the same work and CTA count, so the difference
        // is the prologue (x staged by cp.async) and the register cap.
        for (const Pi& pi : inst) {
          if (pi.g != 1 || pi.f * 10 + pi.s == 86 || pi.f * 10 + pi.s == 163) continue;
          Case c = base;
          c.nv_kernel = 3, c.nv_mma_w = pi.f, c.nv_mma_s = pi.s;
          cases.push_back(c);
        }
      }
      for (const Case& c : cases) {
        try {  // an instance that cannot launch (shared memory) says so and the sweep goes on
          run_case(c, pool, launches);
        } catch (const std::exception& e) {
          std::printf("| %s %lldx%lld N4/%d/%d/%d | error: %s |\n", c.name.c_str(), static_cast<long long>(c.rows),
                      static_cast<long long>(c.k), c.nv_mma_w, c.nv_pg, c.nv_ps, e.what());
        }
      }
      return 0;
    }
    if (experts_only) {
      // The expert gate (slab) and down + combine (packed) and the dense one-token shapes of
      // Llama-8B / Qwen3-30B-A3B (routed plan, slab and mma forced), each once back to back
      // and once after a dependent quantize_act_q8 ("dep", as in a decode step).
      Case gate{"qwen3moe expert gate", GgmlType::NVFP4, 768, 2048, 1, 128, 8, true};
      gate.q8 = true;
      Case down{"qwen3moe down+combine", GgmlType::NVFP4, 2048, 768, 1, 128, 8, false};
      down.q8 = true, down.combine = true;
      const int64_t dense[][2] = {{14336, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}, {28672, 4096},
                                  {5120, 2048},  {2048, 4096}};
      for (bool dep : {false, true}) {
        for (Case c : {gate, down}) {
          c.dep = dep;
          cases.push_back(c);
        }
        for (const auto& d : dense) {
          for (int kern : {-1, 1, 3}) {
            Case r{"dense", GgmlType::NVFP4, d[0], d[1], 1};
            r.q8 = true, r.dep = dep, r.nv_kernel = kern;
            cases.push_back(r);
          }
          const int64_t rb = row_bytes(GgmlType::NVFP4, d[1]);
          if (nvfp4_tile_ok(d[0], d[1], rb) && nvfp4_tile_fits(rb)) {  // what a tiled call takes
            Case r{"dense tiled", GgmlType::NVFP4, d[0], d[1], 1};
            r.q8 = true, r.dep = dep, r.tiled = true;
            cases.push_back(r);
          }
        }
      }
      for (const Case& c : cases) run_case(c, pool, launches);
      return 0;
    }
    if (nvfp4_only) {
      // The new kernels (auto plan), the generic kernel (kernel 0), then a plan sweep.
      for (int64_t nt : {1, 2, 4, 8})
        for (int kern : {-1, 0}) {
          if (dense_only || (variants_only && (kern == 0 || nt > 2))) continue;
          std::vector<Case> v = key(true, nt);
          Case comb = v[3];
          comb.combine = true;
          comb.name = "qwen3moe down+combine";
          v.push_back(comb);
          for (Case& c : v) {
            c.nv_kernel = kern;
            if (kern == 0) c.name += " (generic)";
            cases.push_back(c);
          }
        }
      // The mma kernel's instances (warps per CTA x stages) on the dense one-token shapes of
      // Llama-8B (qkv fused, o, gate/up fused and alone, down) and Qwen3-30B-A3B (qkv, o).
      {
        const int64_t dense[][2] = {{14336, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096},
                                    {28672, 4096}, {5120, 2048},  {2048, 4096}};
        struct Mv {
          int w, s;
        };
        for (const auto& d : dense) {
          Case slab{"dense", GgmlType::NVFP4, d[0], d[1], 1};
          slab.q8 = true;
          cases.push_back(slab);  // the routed plan beside the variants
          for (const Mv mv : {Mv{4, 2}, Mv{4, 3}, Mv{4, 4}, Mv{8, 2}, Mv{8, 3}, Mv{8, 4}, Mv{16, 2}}) {
            Case c = slab;
            c.nv_kernel = 3, c.nv_mma_w = mv.w, c.nv_mma_s = mv.s;
            cases.push_back(c);
          }
        }
      }
      // The one-token variants: decoder x launch bound x rows per warp (slab), decoder x
      // launch bound (packed), for the plan choice in gemv_tuning.h.
      if (!dense_only) {
        std::vector<Case> v = key(true, 1);
        Case comb = v[3];
        comb.combine = true;
        comb.name = "qwen3moe down+combine";
        v.push_back(comb);
        struct Var {
          int dec, minb;
        };
        for (const Case& base : v)
          for (const Var var : {Var{1, 4}, Var{2, 4}, Var{2, 5}, Var{2, 6}, Var{2, 8}}) {
            const bool packed = base.n_expert > 0 && base.k < 2048;
            for (int rows : {1, 2, 4}) {
              if (packed && rows > 1) break;
              Case c = base;
              c.nv_kernel = packed ? -1 : 1, c.nv_rows = packed ? 0 : rows, c.nv_xs = 1;
              c.nv_dec = var.dec, c.nv_minb = var.minb;
              cases.push_back(c);
            }
          }
      }
      if (sweep && !variants_only)
        for (int64_t nt : {1, 8}) {
          std::vector<Case> v = key(true, nt);
          Case comb = v[3];
          comb.combine = true;
          comb.name = "qwen3moe down+combine";
          v.push_back(comb);
          for (const Case& base : v) {
            for (int rows : {1, 2, 4})
              for (int xs : {1, 2}) {
                if (nt > 1 && rows == 1) continue;
                if (base.n_expert > 0 && base.k < 2048 && rows == 1) continue;  // measured in run 4: 2-3x slower
                Case c = base;
                c.nv_kernel = 1, c.nv_rows = rows, c.nv_xs = xs;
                cases.push_back(c);
              }
            if (base.n_expert > 0 && base.k < 2048)
              for (int xs : {1, 2}) {
                Case c = base;
                c.nv_kernel = 2, c.nv_xs = xs;
                cases.push_back(c);
              }
          }
        }
      for (const Case& c : cases) run_case(c, pool, launches);
      return 0;
    }
    for (bool q8 : {true, false})
      for (int64_t nt : {1, 2, 4, 8}) {
        if (quick && nt > 1) continue;
        for (const Case& c : key(q8, nt)) cases.push_back(c);
        Case comb = key(q8, nt)[3];
        comb.combine = true;
        comb.name = "qwen3moe down+combine";
        cases.push_back(comb);
      }
    for (bool q8 : {true, false})
      for (GgmlType t : {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K,
                         GgmlType::BF16, GgmlType::F16, GgmlType::F32}) {
        if (q8 && !gemv_q8_supported(t)) continue;
        Case c{"square 4096", t, 4096, 4096};
        c.q8 = q8;
        cases.push_back(c);
      }
    if (!quick) {
      for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::MXFP4})
        for (int64_t nt : {1, 8}) {
          Case c{"llama8b ffn gate/up", t, 14336, 4096, nt};
          c.q8 = true;
          cases.push_back(c);
        }
      for (int64_t nt : {1, 8}) cases.push_back({"llama8b ffn gate/up", GgmlType::BF16, 14336, 4096, nt});
    }
    if (sweep && !quick) {
      // Tuning sweep of the integer path (NVFP4): lanes x rows x stages, one token; lanes x
      // stages for 8.
      for (int64_t nt : {1, 8})
        for (const Case& base : key(true, nt))
          for (int lanes : {4, 8, 16, 32})
            for (int rows : {1, 2, 4})
              for (int stages : {2, 3, 4}) {
                if (lanes > 2 * (base.k / 64)) continue;  // mostly idle lanes
                if (nt > 1 && rows > 1) continue;         // rows are fixed per token count
                Case c = base;
                c.lanes = lanes, c.rows_per_lane = nt == 1 ? rows : 0, c.stages = stages;
                cases.push_back(c);
              }
      // Float path: stages.
      for (const Case& base : key(false, 1))
        for (int stages : {1, 2, 3, 4}) {
          Case c = base;
          c.stages = stages;
          cases.push_back(c);
        }
    }
    for (const Case& c : cases) run_case(c, pool, launches);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
