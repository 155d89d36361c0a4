// gemm_fused.h: GEMM tiles that dequantise the weights on the fly (no weight scratch), one
// launch over (token tile, weight-row tile), with the group table (MoE experts) read on the
// device.
//
// Tensor-core kernel (kBF16 / kF16), 4 warps, CTA tile 128 weight rows x BT tokens, k steps
// of 32 (one "unit" per row, so any k % 32 == 0 works):
//   - thread t decodes piece t % 4 (8 elements) of rows t / 4 + 32 i (i < 4) with decode8
//     and stores them as 16-bit values into shared memory; X rows (gathered through `order`)
//     are loaded as float4 and rounded the same way;
//   - rows of the shared tiles are padded to 40 elements (80 bytes): the 8 row addresses of
//     an ldmatrix phase then fall on distinct bank quads;
//   - mma.sync m16n8k16 (sm_80+), fp32 accumulators; two shared buffers, one barrier per k
//     step: the next step's tile is written while the current one is multiplied.
// The mma's M is the weight rows and N the tokens, so a token tile of a small expert group
// (MoE prefill averages n_tok * n_used / n_expert = 32 slots per expert at pp512 for
// Qwen3-30B-A3B) wastes at most BT - 1 columns; BT = 32 for such groups, 64 otherwise.
//
// Each CTA finds its (group, first position) from its blockIdx.x with find_tile over the
// offsets copied to shared memory (a serial scan of n_group + 1 broadcast reads, ~1% of a
// tile's work for 128 experts); CTAs past the last tile exit at once.
//
// NVFP4 (gemm_set_fused_fp4_fast; on by default since the H200 run, gemm_tuning.h): the pair layout of
// gemm_fp4.cuh -- a byte's two weights side by side, X staged in the same column order --
// turns 8 weights into 4 table lookups and 4 paired multiplies instead of ~50 integer and
// fp32 operations. Whether that wins is a question for the H200: at BT = 32 the generic
// decode is ALU-bound (~250-320 issue cycles per warp and k step, estimated), while the
// table's data-dependent bank conflicts (~3.5-way for random bytes) add ~220 shared-memory
// wavefronts per CTA and k step to the ~210 of the tile stores and ldmatrix, so the two
// estimates are within each other's error. tools/bench_gemm_cuda.cu prints both (+fp4/+gen).
//
// Split precisions (kBF16x2/x3, gemm.h): the weight tile is decoded once per k step and each
// of the NP bf16 parts of X gets its own shared tile (split while staging), one mma per part
// into the same accumulators. NP tiles of 64 tokens would not fit the 48 KB of static shared
// memory (20 KB of weights + 3 x 10 KB), so split runs at BT = 32 (MoE prefill's ~32 slots
// per expert anyway); with the offsets table that leaves room for kMaxGroupsSplit groups.
//
// fp32 kernel (kF32): the same tiling scheme at 64 rows x 32 tokens with fp32 shared tiles
// and FMA, each thread 4 rows x 4 tokens.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/gemm_decode.cuh"
#include "cuda/gemm_fp4.cuh"
#include "cuda/gemm_fused.h"
#include "cuda/gemm_tuning.h"
#include "cuda/round.cuh"

namespace ft::cuda::gemm_detail {
namespace {

constexpr int kThreads = 128;
constexpr int kBK = 32;
constexpr int kMaxGroups = 4096;  // offsets staged in shared memory (16 KB)

int g_tile_override = 0;
bool g_fp4_fast = kFusedNvfp4PairLayout;
std::atomic<int64_t> g_launches{0};  // gemm_fused_launches

// Resolves this CTA's token tile; false when it has none. first/end: positions of the tile's
// group, group: its index.
__device__ bool cta_tile(const FusedParams& p, int bt, int32_t* offs, int64_t& group, int64_t& first,
                         int64_t& end) {
  if (p.offsets == nullptr) {
    group = 0;
    first = static_cast<int64_t>(blockIdx.x) * bt;
    end = p.n_tok;
    return first < end;
  }
  for (int64_t i = threadIdx.x; i <= p.n_group; i += blockDim.x) offs[i] = p.offsets[i];
  __syncthreads();
  if (!find_tile(offs, p.n_group, bt, blockIdx.x, group, first)) return false;
  end = offs[group + 1];
  return true;
}

__device__ __forceinline__ float row_factor(const FusedParams& p, int64_t group, int64_t r) {
  const float rs = p.row_scale != nullptr ? p.row_scale[r] : 1.0f;
  const float bk = p.bank != nullptr ? p.bank[group * 4 + p.bank_col] : 1.0f;
  return rs * p.scale * bk;
}

__device__ __forceinline__ void store_out(const FusedParams& p, int64_t j, int64_t r, float sum, float s) {
  float v = round_to(p.round, sum * s);
  float* dst = p.y + j * p.ldy + r;
  if (p.accumulate) v += *dst;
  *dst = v;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Byte offset of element e (a multiple of 32) in a row of format F.
template <class F>
__device__ __forceinline__ int64_t elem_bytes(int64_t e) {
  if constexpr (F::kBlockElems >= 32) {
    return e / F::kBlockElems * F::kBlockBytes + (e % F::kBlockElems) * F::kBlockBytes / F::kBlockElems;
  } else {
    return e * F::kBlockBytes;
  }
}

// Pulls the weight bytes kPrefetchElems ahead of the current k step into L2, so that the
// decode reads of later steps wait for L2, not HBM (the CTAs of an SM are otherwise in
// lock-step on the same HBM latency; the prefetch does not block the warp).
constexpr int kPrefetchElems = 512;
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

template <class T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// Parts (exact in bf16, largest first) of v for the split precisions; NP = 1: v itself (the
// caller's bf16/f16 conversion rounds it).
template <int NP>
__device__ __forceinline__ void split_parts(float v, float* out) {
#pragma unroll
  for (int q = 0; q < NP - 1; ++q) {
    out[q] = __bfloat162float(__float2bfloat16_rn(v));
    v -= out[q];  // exact: the residual of a rounding to 8 significant bits
  }
  out[NP - 1] = v;
}

// FP4 = true: the NVFP4 pair layout of gemm_fp4.cuh (F must be FmtNVFP4). NP: the parts of
// a split precision (T = bf16), 1 otherwise.
template <class F, class T, int BT, bool FP4, int NP>
__global__ void __launch_bounds__(kThreads) mma_kernel(FusedParams p) {
  static_assert(!FP4 || std::is_same_v<F, FmtNVFP4>, "the pair layout is NVFP4's");
  static_assert(NP == 1 || std::is_same_v<T, __nv_bfloat16>, "split parts are bf16");
  constexpr int BR = 128, LDS = 40;
  constexpr int WM = BT == 64 ? 2 : 4;  // warps along the rows
  constexpr int WN = 4 / WM;
  constexpr int WR = BR / WM, WT = BT / WN;  // warp tile
  constexpr int MT = WR / 16, NT = WT / 8;
  constexpr int XI = FP4 ? BT / 32 : BT / 16;  // X rows per thread per k step
  static_assert(NT % 2 == 0, "B fragments are loaded two n-tiles at a time");
  __shared__ alignas(16) T As[2][BR * LDS];
  __shared__ alignas(16) T Bs[NP][2][BT * LDS];
  __shared__ uint32_t fp4_table[FP4 ? 256 : 1];
  extern __shared__ int32_t offs[];

  int64_t group, first, end;
  if (!cta_tile(p, BT, offs, group, first, end)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if constexpr (FP4) {
    for (int v = tid; v < 256; v += kThreads) fp4_table[v] = e2m1_pair<T>(static_cast<uint32_t>(v));
    __syncthreads();
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * BR;
  const int ntok = static_cast<int>(end - first < BT ? end - first : BT);
  const uint8_t* wg = p.w + group * p.expert_bytes;

  // Loader roles.
  const int wp = tid & 3, wrow = tid >> 2;  // piece, first row (rows wrow + 32 i)
  const uint8_t* wptr[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + wrow + 32 * i;
    wptr[i] = r < p.rows ? wg + r * p.row_bytes : nullptr;
  }
  // Generic: float4 column xc, tokens xrow + 16 i. FP4: part xc of x_pairs, tokens xrow + 32 i.
  const int xc = FP4 ? tid & 3 : tid & 7, xrow = FP4 ? tid >> 2 : tid >> 3;
  constexpr int XSTEP = FP4 ? 32 : 16;
  const float* xptr[XI];
#pragma unroll
  for (int i = 0; i < XI; ++i) {
    const int tl = xrow + XSTEP * i;
    if (tl < ntok) {
      const int64_t j = first + tl;
      const int64_t xr = p.order != nullptr ? p.order[j] / p.x_div : j;
      xptr[i] = p.x + xr * p.ldx + (FP4 ? 0 : 4 * xc);
    } else {
      xptr[i] = nullptr;
    }
  }

  auto load_tile = [&](int64_t kt, int buf) {
    const int64_t pe = kt * kBK + kPrefetchElems;
    if (wp == 0 && pe < p.k) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (wptr[i] != nullptr) prefetch_l2(wptr[i] + elem_bytes<F>(pe));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (wptr[i] != nullptr) {
        if constexpr (FP4) {
          uint32_t q[4];
          nvfp4_pairs<T>(wptr[i], kt, wp, fp4_table, q);
          v = make_uint4(q[0], q[1], q[2], q[3]);
        } else {
          float f[8];
          decode8<F>(wptr[i], kt * (kBK / 8) + wp, f);
          v = make_uint4(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]), pack2<T>(f[4], f[5]), pack2<T>(f[6], f[7]));
        }
      }
      *reinterpret_cast<uint4*>(&As[buf][(wrow + 32 * i) * LDS + 8 * wp]) = v;
    }
#pragma unroll
    for (int i = 0; i < XI; ++i) {
      if constexpr (FP4) {
        uint32_t q[NP][4] = {};
        if (xptr[i] != nullptr) x_pairs_split<T, NP>(xptr[i] + kt * kBK, xc, q);
#pragma unroll
        for (int pt = 0; pt < NP; ++pt) {
          *reinterpret_cast<uint4*>(&Bs[pt][buf][(xrow + 32 * i) * LDS + 16 * (xc >> 1) + 8 * (xc & 1)]) =
              make_uint4(q[pt][0], q[pt][1], q[pt][2], q[pt][3]);
        }
      } else {
        float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (xptr[i] != nullptr) {
          const float4 v = *reinterpret_cast<const float4*>(xptr[i] + kt * kBK);
          f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
        }
        float sp[4][NP];
#pragma unroll
        for (int e = 0; e < 4; ++e) split_parts<NP>(f[e], sp[e]);
#pragma unroll
        for (int pt = 0; pt < NP; ++pt) {
          *reinterpret_cast<uint2*>(&Bs[pt][buf][(xrow + 16 * i) * LDS + 4 * xc]) =
              make_uint2(pack2<T>(sp[0][pt], sp[1][pt]), pack2<T>(sp[2][pt], sp[3][pt]));
        }
      }
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;

  const int wr0 = (warp % WM) * WR, wt0 = (warp / WM) * WT;
  const int64_t nk = p.k / kBK;
  load_tile(0, 0);
  __syncthreads();
  for (int64_t kt = 0; kt < nk; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < nk) load_tile(kt + 1, buf ^ 1);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[MT][4], bf[NT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        ldmatrix_x4(af[m], &As[buf][(wr0 + 16 * m + (lane & 15)) * LDS + kk + 8 * (lane >> 4)]);
      }
      // Split: the smallest part first, so the large products meet the small ones' sum.
#pragma unroll
      for (int pt = NP - 1; pt >= 0; --pt) {
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          uint32_t r[4];
          ldmatrix_x4(r, &Bs[pt][buf][(wt0 + 8 * n + (lane & 7) + 8 * (lane >> 4)) * LDS + kk +
                                      8 * ((lane >> 3) & 1)]);
          bf[n][0] = r[0], bf[n][1] = r[1], bf[n + 1][0] = r[2], bf[n + 1][1] = r[3];
        }
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int n = 0; n < NT; ++n) mma16816<T>(acc[m][n], af[m], bf[n]);
      }
    }
    __syncthreads();
  }

  // Epilogue: c0,c1 at (row g, tokens 2c, 2c+1), c2,c3 at row g + 8.
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + wr0 + 16 * m + g + 8 * h;
      if (r >= p.rows) continue;
      const float s = row_factor(p, group, r);
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int tl = wt0 + 8 * n + 2 * c + e;
          if (tl < ntok) store_out(p, first + tl, r, acc[m][n][2 * h + e], s);
        }
      }
    }
  }
}

// fp32 twin of the tile scheme: 64 rows x 32 tokens, thread (tid % 16, tid / 16) computes
// rows tid % 16 + 16 i and tokens tid / 16 + 8 j.
template <class F>
__global__ void __launch_bounds__(kThreads) f32_kernel(FusedParams p) {
  constexpr int BR = 64, BT = 32, LD = kBK + 1;
  __shared__ float Ws[BR * LD];
  __shared__ float Xs[BT * LD];
  extern __shared__ int32_t offs[];

  int64_t group, first, end;
  if (!cta_tile(p, BT, offs, group, first, end)) return;
  const int tid = threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * BR;
  const int ntok = static_cast<int>(end - first < BT ? end - first : BT);
  const uint8_t* wg = p.w + group * p.expert_bytes;

  const int wp = tid & 3, wrow = tid >> 2;  // rows wrow, wrow + 32
  const int xc = tid & 7, xrow = tid >> 3;  // tokens xrow, xrow + 16
  const uint8_t* wptr[2];
  const float* xptr[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = r0 + wrow + 32 * i;
    wptr[i] = r < p.rows ? wg + r * p.row_bytes : nullptr;
    const int tl = xrow + 16 * i;
    if (tl < ntok) {
      const int64_t j = first + tl;
      const int64_t xr = p.order != nullptr ? p.order[j] / p.x_div : j;
      xptr[i] = p.x + xr * p.ldx + 4 * xc;
    } else {
      xptr[i] = nullptr;
    }
  }
  const int tr = tid & 15, tt = tid >> 4;
  float acc[4][4] = {};
  const int64_t nk = p.k / kBK;
  for (int64_t kt = 0; kt < nk; ++kt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float f[8] = {};
      if (wptr[i] != nullptr) decode8<F>(wptr[i], kt * (kBK / 8) + wp, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) Ws[(wrow + 32 * i) * LD + 8 * wp + e] = f[e];
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (xptr[i] != nullptr) v = *reinterpret_cast<const float4*>(xptr[i] + kt * kBK);
      float* xs = &Xs[(xrow + 16 * i) * LD + 4 * xc];
      xs[0] = v.x, xs[1] = v.y, xs[2] = v.z, xs[3] = v.w;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kBK; ++kk) {
      float wv[4], xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) wv[i] = Ws[(tr + 16 * i) * LD + kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) xv[j] = Xs[(tt + 8 * j) * LD + kk];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(wv[i], xv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = r0 + tr + 16 * i;
    if (r >= p.rows) continue;
    const float s = row_factor(p, group, r);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tl = tt + 8 * j;
      if (tl < ntok) store_out(p, first + tl, r, acc[i][j], s);
    }
  }
}

template <class F, class T, int BT, int NP = 1>
void launch_mma(const FusedParams& p, dim3 grid, size_t smem, cudaStream_t s) {
  if constexpr (std::is_same_v<F, FmtNVFP4>) {
    if (g_fp4_fast) {
      mma_kernel<F, T, BT, true, NP><<<grid, kThreads, smem, s>>>(p);
      return;
    }
  }
  mma_kernel<F, T, BT, false, NP><<<grid, kThreads, smem, s>>>(p);
}

// Split precisions: only the weight formats exact in bf16 (gemm_bf16_exact) get the kernels;
// callers map the others to kF32 first (gemm_split_prec).
template <class F>
constexpr bool kSplitFormat =
    std::is_same_v<F, FmtBF16> || std::is_same_v<F, FmtNVFP4> || std::is_same_v<F, FmtMXFP4>;

// Static shared memory of the split kernel (BT = 32, NP parts), for the offsets table's room.
constexpr size_t split_static_smem(int np) { return 2 * 128 * 40 * 2 + size_t(np) * 2 * 32 * 40 * 2 + 256 * 4; }
constexpr int64_t kMaxGroupsSplit = static_cast<int64_t>((48 * 1024 - split_static_smem(3)) / 4) - 1;

}  // namespace

void fused_gemm(const FusedParams& p, cudaStream_t s) {
  GemmArgs a;
  a.type = p.type, a.w = p.w, a.row_bytes = p.row_bytes, a.k = p.k, a.rows = p.rows;
  a.x = p.x, a.ldx = p.ldx, a.n_tok = p.n_tok, a.y = p.y, a.ldy = p.ldy;
  check_args(a, "fused GEMM");
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || p.ldx % 4 != 0) {
    fail_message("fused GEMM: X must be 16-byte aligned with ldx % 4 == 0 (ldx=" + std::to_string(p.ldx) + ")");
  }
  if (p.n_group < 1 || p.n_group > kMaxGroups || (p.n_group > 1 && p.offsets == nullptr)) {
    fail_message("fused GEMM: n_expert=" + std::to_string(p.n_group) + ": expected 1.." +
                 std::to_string(kMaxGroups) + " with an offsets table for more than one");
  }
  if (p.x_div < 1) fail_message("fused GEMM: x_div must be >= 1");
  const int parts = gemm_split_parts(p.prec);
  if (parts > 1 && !gemm_bf16_exact(p.type)) {
    fail_message("fused GEMM: split precision with " + std::string(type_name(p.type)) +
                 " weights (not exact in bf16; expected gemm_split_prec's kF32)");
  }
  if (parts > 1 && p.n_group > kMaxGroupsSplit) {
    fail_message("fused GEMM: n_expert=" + std::to_string(p.n_group) + ": the split precision allows at most " +
                 std::to_string(kMaxGroupsSplit) + " (shared memory)");
  }
  if (p.rows == 0 || p.n_tok == 0) return;
  const bool f32 = p.prec == GemmPrec::kF32;
  const int br = f32 ? 64 : 128;
  // BT = 32 where the groups are small (avg <= 32 positions per group), else 64.
  int bt = f32 ? 32 : (p.n_tok <= 32 * p.n_group ? 32 : 64);
  if (!f32 && p.type == GgmlType::NVFP4 && g_fp4_fast) bt = kFusedNvfp4Tile;
  if (!f32 && g_tile_override != 0) bt = g_tile_override;
  if (parts > 1) bt = 32;  // NP tiles of 64 tokens do not fit (above)
  const int64_t tiles = (p.n_tok + bt - 1) / bt + (p.offsets != nullptr ? p.n_group : 0);
  const int64_t row_tiles = (p.rows + br - 1) / br;
  if (row_tiles > 65535 || tiles > 0x7FFFFFFF) {
    fail_message("fused GEMM: rows=" + std::to_string(p.rows) + ", n_tok=" + std::to_string(p.n_tok) +
                 ": too many tiles for one launch");
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(row_tiles));
  const size_t smem = p.offsets != nullptr ? static_cast<size_t>(p.n_group + 1) * 4 : 0;
  const bool ok = with_format(p.type, [&](auto fmt) {
    using F = decltype(fmt);
    if (f32) {
      f32_kernel<F><<<grid, kThreads, smem, s>>>(p);
    } else if (parts > 1) {
      if constexpr (kSplitFormat<F>) {
        if (parts == 2) launch_mma<F, __nv_bfloat16, 32, 2>(p, grid, smem, s);
        else launch_mma<F, __nv_bfloat16, 32, 3>(p, grid, smem, s);
      }
    } else if (p.prec == GemmPrec::kBF16) {
      if (bt == 32) launch_mma<F, __nv_bfloat16, 32>(p, grid, smem, s);
      else launch_mma<F, __nv_bfloat16, 64>(p, grid, smem, s);
    } else {
      if (bt == 32) launch_mma<F, __half, 32>(p, grid, smem, s);
      else launch_mma<F, __half, 64>(p, grid, smem, s);
    }
  });
  if (!ok) fail_message("fused GEMM: unsupported weight type");
  FT_CUDA_CHECK_LAUNCH();
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ft::cuda::gemm_detail

namespace ft::cuda {

void gemm_set_fused_tile_override(int bt) {
  if (bt != 0 && bt != 32 && bt != 64) {
    fail_message("gemm_set_fused_tile_override: token tile " + std::to_string(bt) + " is not 0, 32 or 64");
  }
  gemm_detail::g_tile_override = bt;
}

void gemm_set_fused_fp4_fast(bool on) { gemm_detail::g_fp4_fast = on; }

int64_t gemm_fused_launches() { return gemm_detail::g_launches.load(std::memory_order_relaxed); }

}  // namespace ft::cuda
