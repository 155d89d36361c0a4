// Decode GEMV kernels (gemv.h): one warp-level scheme for every weight type.
//
// A CTA is 4 warps. The `ws` warps of a row group split the row's k into chunks of 1024
// elements (chunk c goes to warp c % ws) and meet in shared memory at the end; each warp
// carries R rows at once so every X value it loads serves R rows. Per chunk a warp
//   1. copies the R rows' chunk bytes global -> registers -> its shared staging buffer with
//      16-byte (Q6_K: 8-byte) coalesced loads, all loads issued before the first store:
//      the block formats (36, 34, 17, 210 bytes) are not vector-aligned per block, but a
//      chunk of 32 units is, so staging turns a strided per-block read into a streaming one;
//   2. has lane l dequantise "unit" l (32 consecutive elements) of each row from shared
//      memory in pieces of 8, FMA them with X in fp32, and apply the block scale once per
//      piece (NVFP4/MXFP4 sub-block scale, K-quant d*sc and dmin*m) -- the scale multiplies
//      the partial sum rather than each weight, which only reorders fp32 rounding.
// E2M1 codes become floats in 4 integer ops: bits (mag << 22 | sign << 31) are the code's
// value times 2^-126 (codes 0 and 1 land on fp32 subnormals, which scale the same way), so
// X is pre-multiplied by 2^64 to keep the products normal and the partial sum is multiplied
// back by 2^63 (2^62 and the doubled-table x2), then by the half-scale (ue4m3_half /
// e8m0_half, exactly the reference decoder's factors). Needs fp32 subnormals: no -ftz.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/gemv_formats.cuh"

namespace ft::cuda {
namespace {

using namespace gemv_detail;

constexpr int kUnit = 32;              // elements per lane per row per chunk
constexpr int kChunk = 32 * kUnit;     // elements per warp per row per chunk
constexpr int kWarps = 4;              // warps per CTA
constexpr float kX2e64 = 18446744073709551616.0f;  // 2^64
constexpr float kX2e63 = 9223372036854775808.0f;   // 2^63

int g_split_override = 0;
int g_stages_override = -1;

struct Params {
  const uint8_t* w;
  int64_t row_bytes, k, rows;
  const float* x;
  int64_t ldx;
  int n_tok;
  float* y;
  int64_t ldy;
  const float* row_scale;
  float scale;
  int round;
  const int32_t* ids;
  int64_t expert_bytes, x_div;
  const float* bank;
  int bank_col;
  int ws;      // warps per row group (1, 2, 4)
  int vec;     // rows (and expert bases) aligned to the vector width
  int stages;  // cp.async pipeline depth (1..4); 0: synchronous staging through registers
};


template <class F>
__host__ __device__ constexpr int chunk_bytes() {
  return kChunk / F::kBlockElems * F::kBlockBytes;
}
template <class F>
__host__ __device__ constexpr int chunk_pad() {
  return (chunk_bytes<F>() + 15) & ~15;
}
// Vector width of the staging copy: chunk offsets must stay aligned to it.
template <class F>
__host__ __device__ constexpr int vec_bytes() {
  return chunk_bytes<F>() % 16 == 0 ? 16 : 8;
}
// Rows per warp: enough X reuse, bounded registers (accumulators, X pieces).
template <class F, int NT>
__host__ __device__ constexpr int rows_per_warp() {
  return chunk_bytes<F>() >= 2048 ? (NT <= 2 ? 2 : 1) : (NT <= 2 ? 4 : 2);
}
// Pipeline depth: 4 chunks per warp (3 loading while one computes) keeps ~100+ KB in
// flight per SM, what HBM latency needs; 2 for the big-chunk float types (shared memory).
template <class F>
__host__ __device__ constexpr int max_stages() {
  return chunk_bytes<F>() >= 2048 ? 2 : 4;
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most n of this thread's groups are pending (n = 0..3).
__device__ __forceinline__ void cp_async_wait(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
  }
}

// Asynchronous copy of bytes [off, off + nbytes) of R rows into a staging buffer (vector
// path only); the ragged tail (< one vector) is copied synchronously.
template <class F, int R>
__device__ __forceinline__ void stage_rows_async(uint8_t* stage, const uint8_t* w, const Params& p, int64_t row0,
                                                 int64_t off, int nbytes, int lane) {
  constexpr int CBP = chunk_pad<F>();
  constexpr int VB = vec_bytes<F>();
  const int nv = nbytes / VB;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (row0 + r < p.rows) {
      const uint8_t* src = w + (row0 + r) * p.row_bytes + off;
      uint8_t* dst = stage + r * CBP;
      for (int i = lane; i < nv; i += 32) {
        if constexpr (VB == 16) {
          cp_async16(dst + 16 * i, src + 16 * i);
        } else {
          cp_async8(dst + 8 * i, src + 8 * i);
        }
      }
      for (int i = nv * VB + lane; i < nbytes; i += 32) dst[i] = src[i];
    }
  }
}

// Synchronous copy (register-staged 16/8-byte loads, or bytes for unaligned rows).
template <class F, int R>
__device__ __forceinline__ void stage_rows(uint8_t* stage, const uint8_t* w, const Params& p, int64_t row0,
                                           int64_t off, int nbytes, int lane) {
  constexpr int CBP = chunk_pad<F>();
  constexpr int VB = vec_bytes<F>();
  using V = std::conditional_t<VB == 16, uint4, uint2>;
  constexpr int kMaxV = (CBP / VB + 31) / 32;
  if (p.vec) {
    const int nv = nbytes / VB;
    V buf[R][kMaxV];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row0 + r < p.rows) {
        const V* src = reinterpret_cast<const V*>(w + (row0 + r) * p.row_bytes + off);
#pragma unroll
        for (int j = 0; j < kMaxV; ++j) {
          const int i = lane + 32 * j;
          if (i < nv) buf[r][j] = __ldg(src + i);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row0 + r < p.rows) {
        V* dst = reinterpret_cast<V*>(stage + r * CBP);
#pragma unroll
        for (int j = 0; j < kMaxV; ++j) {
          const int i = lane + 32 * j;
          if (i < nv) dst[i] = buf[r][j];
        }
        const uint8_t* srcb = w + (row0 + r) * p.row_bytes + off;
        for (int i = nv * VB + lane; i < nbytes; i += 32) stage[r * CBP + i] = srcb[i];
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row0 + r < p.rows) {
        const uint8_t* srcb = w + (row0 + r) * p.row_bytes + off;
        for (int i = lane; i < nbytes; i += 32) stage[r * CBP + i] = srcb[i];
      }
    }
  }
}

// acc[r][t] += chunk c of the R staged rows . X[t]. Lane l takes the 8-element pieces
// l, l+32, l+64, l+96 of the chunk, so a warp's X loads are 1 KB contiguous and its shared
// reads of a row are (nearly) conflict-free. Run 2 on the H200 had lane = one 32-element
// unit: every X load instruction touched 32 different 128-byte lines, and F32/F16 staging
// reads 8-/4-way bank conflicts; all types sat at 20-40% of HBM bandwidth.
template <class F, int NT, int R>
__device__ __forceinline__ void compute_chunk(float (&acc)[R][NT], const uint8_t* stage, const float* x,
                                              const Params& p, int c, int lane) {
  constexpr int CBP = chunk_pad<F>();
  const int units =
      static_cast<int>(min(static_cast<int64_t>(kUnit), (p.k - static_cast<int64_t>(c) * kChunk) / kUnit));
  const float* xc = x + static_cast<int64_t>(c) * kChunk;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int pg = lane + 32 * j;  // piece of the chunk: elements 8*pg .. 8*pg+7
    const int u = pg >> 2, pc = pg & 3;
    if (u >= units) break;
    float xv[NT][8];
    [[maybe_unused]] float xsum[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < p.n_tok) {
        const float4* s = reinterpret_cast<const float4*>(xc + t * p.ldx + 8 * pg);
        const float4 a = __ldg(s), b = __ldg(s + 1);
        xv[t][0] = a.x, xv[t][1] = a.y, xv[t][2] = a.z, xv[t][3] = a.w;
        xv[t][4] = b.x, xv[t][5] = b.y, xv[t][6] = b.z, xv[t][7] = b.w;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[t][i] = 0.0f;
      }
      if constexpr (F::kHasMin) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s += xv[t][i];
        xsum[t] = s;
      }
      if constexpr (F::kE2M1) {
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[t][i] *= kX2e64;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float q[8], d;
      [[maybe_unused]] float m;
      F::piece(stage + r * CBP, u, pc, q, d, m);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) part = fmaf(q[i], xv[t][i], part);
        if constexpr (F::kE2M1) part *= kX2e63;
        acc[r][t] = fmaf(part, d, acc[r][t]);
        if constexpr (F::kHasMin) acc[r][t] = fmaf(-m, xsum[t], acc[r][t]);
      }
    }
  }
}

template <class F, int NT, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int CB = chunk_bytes<F>();
  constexpr int CBP = chunk_pad<F>();
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = warp / p.ws, ks = warp % p.ws;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / p.ws) + g) * R;

  const uint8_t* w = p.w;
  const float* x = p.x;
  float* y = p.y;
  float slot_scale = p.scale;
  if (p.ids != nullptr) {
    const int slot = static_cast<int>(blockIdx.y);
    const int64_t e = p.ids[slot];
    w += e * p.expert_bytes;
    x += (slot / p.x_div) * p.ldx;
    y += slot * p.ldy;
    if (p.bank != nullptr) slot_scale *= p.bank[e * 4 + p.bank_col];
  }

  const int n_stage = p.stages > 0 ? p.stages : 1;
  uint8_t* stages = smem + warp * n_stage * R * CBP;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  const int64_t data_bytes = p.k / F::kBlockElems * F::kBlockBytes;
  const int n_chunks = static_cast<int>((p.k + kChunk - 1) / kChunk);
  // This warp's chunks: ks + i*ws for i < n_mine.
  const int n_mine = ks < n_chunks ? (n_chunks - ks + p.ws - 1) / p.ws : 0;
  auto chunk_off = [&](int i) { return static_cast<int64_t>(ks + i * p.ws) * CB; };
  auto chunk_len = [&](int i) {
    return static_cast<int>(min(static_cast<int64_t>(CB), data_bytes - chunk_off(i)));
  };

  if (p.vec && p.stages > 0) {
    // Pipeline: chunk i lives in stage i % S, with S - 1 chunks in flight ahead of the one
    // being computed. Every iteration commits one group (possibly empty), so waiting for
    // "at most S - 1 pending" means chunk i has landed.
    const int S = p.stages;
    for (int i = 0; i < S - 1; ++i) {
      if (i < n_mine) stage_rows_async<F, R>(stages + (i % S) * R * CBP, w, p, row0, chunk_off(i), chunk_len(i), lane);
      cp_async_commit();
    }
    for (int i = 0; i < n_mine; ++i) {
      const int nxt = i + S - 1;
      if (nxt < n_mine)
        stage_rows_async<F, R>(stages + (nxt % S) * R * CBP, w, p, row0, chunk_off(nxt), chunk_len(nxt), lane);
      cp_async_commit();
      cp_async_wait(S - 1);
      __syncwarp();
      compute_chunk<F, NT, R>(acc, stages + (i % S) * R * CBP, x, p, ks + i * p.ws, lane);
      __syncwarp();  // the stage is refilled in a later iteration
    }
  } else {
    for (int i = 0; i < n_mine; ++i) {
      stage_rows<F, R>(stages, w, p, row0, chunk_off(i), chunk_len(i), lane);
      __syncwarp();
      compute_chunk<F, NT, R>(acc, stages, x, p, ks + i * p.ws, lane);
      __syncwarp();
    }
  }

  // Warp sums, then the ws warps of the row group meet in shared memory (fixed order).
  float* red = reinterpret_cast<float*>(smem + kWarps * n_stage * R * CBP);  // [kWarps][R][NT]
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
      if (lane == 0) red[(warp * R + r) * NT + t] = v;
    }
  __syncthreads();
  if (ks != 0) return;
  for (int i = lane; i < R * NT; i += 32) {
    const int r = i / NT, t = i % NT;
    const int64_t row = row0 + r;
    if (t >= p.n_tok || row >= p.rows) continue;
    float v = 0.0f;
    for (int j = 0; j < p.ws; ++j) v += red[((g * p.ws + j) * R + r) * NT + t];
    const float s = p.row_scale != nullptr ? p.row_scale[row] * slot_scale : slot_scale;
    v *= s;
    if (p.round == 1) v = __bfloat162float(__float2bfloat16_rn(v));
    if (p.round == 2) v = __half2float(__float2half_rn(v));
    y[t * p.ldy + row] = v;
  }
}

template <class F, int NT>
void launch(Params p, int64_t n_slots, cudaStream_t stream) {
  constexpr int R = rows_per_warp<F, NT>();
  constexpr int VB = vec_bytes<F>();
  const int64_t n_chunks = (p.k + kChunk - 1) / kChunk;
  const int64_t row_groups = (p.rows + R - 1) / R;
  // Split k over more warps only while the grid is small (~32 warps per SM fill an H200).
  int ws = 1;
  while (ws < 4 && 2 * ws <= n_chunks && row_groups * n_slots * ws < 4096) ws *= 2;
  if (g_split_override == 1 || g_split_override == 2 || g_split_override == 4) ws = g_split_override;
  p.ws = ws;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.w);
  p.vec = (base % VB == 0 && p.row_bytes % VB == 0 && (p.ids == nullptr || p.expert_bytes % VB == 0)) ? 1 : 0;
  const int chunks_per_warp = static_cast<int>((n_chunks + ws - 1) / ws);
  int stages = g_stages_override >= 0 ? g_stages_override : max_stages<F>();
  if (stages > 4) stages = 4;
  if (stages > chunks_per_warp) stages = chunks_per_warp;  // no deeper than the work
  if (!p.vec) stages = 0;
  p.stages = stages;
  const int n_stage = stages > 0 ? stages : 1;
  const int64_t rows_per_cta = static_cast<int64_t>(kWarps / ws) * R;
  const dim3 grid(static_cast<unsigned>((p.rows + rows_per_cta - 1) / rows_per_cta), static_cast<unsigned>(n_slots));
  const size_t red_bytes = static_cast<size_t>(kWarps) * R * NT * 4;
  const size_t smem = static_cast<size_t>(kWarps) * n_stage * R * chunk_pad<F>() + red_bytes;
  static const bool attr_set = [red_bytes] {
    const size_t most = static_cast<size_t>(kWarps) * 4 * R * chunk_pad<F>() + red_bytes;
    FT_CUDA_CHECK(cudaFuncSetAttribute(gemv_kernel<F, NT, R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(most)));
    return true;
  }();
  (void)attr_set;
  gemv_kernel<F, NT, R><<<grid, kWarps * 32, smem, stream>>>(p);
  FT_CUDA_CHECK_LAUNCH();
}

template <class F>
void dispatch_tokens(const Params& p, int64_t n_tok, bool grouped, cudaStream_t stream) {
  if (grouped) return launch<F, 1>(p, n_tok, stream);
  if (n_tok == 1) return launch<F, 1>(p, 1, stream);
  if (n_tok == 2) return launch<F, 2>(p, 1, stream);
  if (n_tok <= 4) return launch<F, 4>(p, 1, stream);
  return launch<F, 8>(p, 1, stream);
}

int64_t block_elems(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::MXFP4:
      return 32;
    case GgmlType::NVFP4:
      return 64;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return 256;
    default:
      return 1;
  }
}

}  // namespace

bool gemv_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4:
    case GgmlType::NVFP4:
      return true;
    default:
      return false;
  }
}

void gemv_set_split_override(int warps) { g_split_override = warps; }
void gemv_set_stages_override(int stages) { g_stages_override = stages; }

void gemv(const GemvArgs& a, cudaStream_t stream) {
  const std::string tn(type_name(a.type));
  if (!gemv_supported(a.type)) fail_message("cuda gemv: weight type " + tn + " is not supported");
  if (a.k <= 0 || a.k % 32 != 0 || a.k % block_elems(a.type) != 0)
    fail_message("cuda gemv: k = " + std::to_string(a.k) + " must be a positive multiple of 32 and of the " + tn +
                 " block");
  if (a.rows <= 0) fail_message("cuda gemv: rows = " + std::to_string(a.rows) + " must be positive");
  const bool grouped = a.ids != nullptr;
  if (a.n_tok < 1 || (!grouped && a.n_tok > kGemvMaxTokens) || a.n_tok > 65535)
    fail_message("cuda gemv: n_tok = " + std::to_string(a.n_tok) + " out of range (1..8, grouped 1..65535)");
  if (reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.ldx % 4 != 0)
    fail_message("cuda gemv: X must be 16-byte aligned with ldx a multiple of 4");
  if (grouped && a.x_div < 1) fail_message("cuda gemv: x_div must be >= 1");
  if (a.row_bytes < row_bytes(a.type, a.k)) fail_message("cuda gemv: row stride shorter than a row");

  Params p{};
  p.w = a.w;
  p.row_bytes = a.row_bytes;
  p.k = a.k;
  p.rows = a.rows;
  p.x = a.x;
  p.ldx = a.ldx;
  p.n_tok = grouped ? 1 : static_cast<int>(a.n_tok);
  p.y = a.y;
  p.ldy = a.ldy;
  p.row_scale = a.row_scale;
  p.scale = a.scale;
  p.round = static_cast<int>(a.round);
  p.ids = a.ids;
  p.expert_bytes = a.expert_bytes;
  p.x_div = a.x_div;
  p.bank = a.bank;
  p.bank_col = a.bank_col;
  switch (a.type) {
    case GgmlType::F32: return dispatch_tokens<FmtF32>(p, a.n_tok, grouped, stream);
    case GgmlType::F16: return dispatch_tokens<FmtF16>(p, a.n_tok, grouped, stream);
    case GgmlType::BF16: return dispatch_tokens<FmtBF16>(p, a.n_tok, grouped, stream);
    case GgmlType::Q8_0: return dispatch_tokens<FmtQ8_0>(p, a.n_tok, grouped, stream);
    case GgmlType::Q4_K: return dispatch_tokens<FmtQ4_K>(p, a.n_tok, grouped, stream);
    case GgmlType::Q6_K: return dispatch_tokens<FmtQ6_K>(p, a.n_tok, grouped, stream);
    case GgmlType::MXFP4: return dispatch_tokens<FmtMXFP4>(p, a.n_tok, grouped, stream);
    case GgmlType::NVFP4: return dispatch_tokens<FmtNVFP4>(p, a.n_tok, grouped, stream);
    default: break;
  }
}

}  // namespace ft::cuda
