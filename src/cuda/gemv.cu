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

namespace ft::cuda {
namespace {

constexpr int kUnit = 32;              // elements per lane per row per chunk
constexpr int kChunk = 32 * kUnit;     // elements per warp per row per chunk
constexpr int kWarps = 4;              // warps per CTA
constexpr float kX2e64 = 18446744073709551616.0f;  // 2^64
constexpr float kX2e63 = 9223372036854775808.0f;   // 2^63

int g_split_override = 0;

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
  int ws;     // warps per row group (1, 2, 4)
  int vec;    // rows (and expert bases) aligned to the vector width
};

__device__ __forceinline__ float ld_f16(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

// ue4m3_half / e8m0_half of dequant.cpp, bit for bit.
__device__ __forceinline__ float ue4m3_half(uint32_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const uint32_t e = (x >> 3) & 0xF, m = x & 7;
  if (e == 0) return static_cast<float>(m) * (1.0f / 1024.0f);
  return __uint_as_float(((e - 8 + 127) << 23) | (m << 20));
}
__device__ __forceinline__ float e8m0_half(uint32_t e) {
  if (e < 2) return __uint_as_float(0x00200000u << e);
  return __uint_as_float((e - 1) << 23);
}

// E2M1 nibble n -> E2M1(n) * 2^-126 (see the file comment).
__device__ __forceinline__ float e2m1_scaled(uint32_t n) {
  return __uint_as_float(((n & 7u) << 22) | ((n & 8u) << 28));
}
// The four nibbles at bits 0-3 of each byte of w.
__device__ __forceinline__ void e2m1x4(uint32_t w, float* q) {
  q[0] = __uint_as_float(((w & 7u) << 22) | ((w & 8u) << 28));
  q[1] = __uint_as_float(((w & 0x700u) << 14) | ((w & 0x800u) << 20));
  q[2] = __uint_as_float(((w & 0x70000u) << 6) | ((w & 0x80000u) << 12));
  q[3] = __uint_as_float(((w & 0x7000000u) >> 2) | ((w & 0x8000000u) << 4));
}

// Each format: block geometry and piece(): the 8 raw values q of piece p (elements 8p..8p+7)
// of unit u in a staged chunk c, with w = d*q - m for every element of the piece.
struct FmtF32 {
  static constexpr int kBlockElems = 1, kBlockBytes = 4;
  static constexpr bool kE2M1 = false, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const float4* s = reinterpret_cast<const float4*>(c + 128 * u + 32 * p);
    const float4 a = s[0], b = s[1];
    q[0] = a.x, q[1] = a.y, q[2] = a.z, q[3] = a.w, q[4] = b.x, q[5] = b.y, q[6] = b.z, q[7] = b.w;
    d = 1.0f, m = 0.0f;
  }
};

struct FmtF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  static constexpr bool kE2M1 = false, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint4 v = *reinterpret_cast<const uint4*>(c + 64 * u + 16 * p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      q[2 * i] = f.x, q[2 * i + 1] = f.y;
    }
    d = 1.0f, m = 0.0f;
  }
};

struct FmtBF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
  static constexpr bool kE2M1 = false, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint4 v = *reinterpret_cast<const uint4*>(c + 64 * u + 16 * p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[2 * i] = __uint_as_float(w[i] << 16);
      q[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
    d = 1.0f, m = 0.0f;
  }
};

// Q8_0: d f16 | qs[32] int8; one block per unit.
struct FmtQ8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static constexpr bool kE2M1 = false, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 34 * u;
    const unsigned short* qs = reinterpret_cast<const unsigned short*>(b + 2 + 8 * p);  // 2-aligned
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t v = qs[i];
      q[2 * i] = static_cast<float>(static_cast<int8_t>(v & 0xFF));
      q[2 * i + 1] = static_cast<float>(static_cast<int8_t>(v >> 8));
    }
    d = ld_f16(b), m = 0.0f;
  }
};

// MXFP4: e8m0 | qs[16]; low nibble of byte j -> element j, high -> j+16; one block per unit.
struct FmtMXFP4 {
  static constexpr int kBlockElems = 32, kBlockBytes = 17;
  static constexpr bool kE2M1 = true, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 17 * u;
    const uint8_t* qs = b + 1 + 8 * (p & 1);
    const int shift = 4 * (p >> 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = e2m1_scaled(static_cast<uint32_t>(qs[i]) >> shift);
    d = e8m0_half(b[0]), m = 0.0f;
  }
};

// NVFP4: d[4] ue4m3 | qs[32]; sub-block s = qs[8s..8s+7], low nibble -> 16s+j, high -> 16s+8+j.
// A unit is half a block (sub-blocks 2h, 2h+1); pieces: s lo, s hi, s+1 lo, s+1 hi.
struct FmtNVFP4 {
  static constexpr int kBlockElems = 64, kBlockBytes = 36;
  static constexpr bool kE2M1 = true, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 36 * (u >> 1);
    const int s = 2 * (u & 1) + (p >> 1);
    const uint32_t* qw = reinterpret_cast<const uint32_t*>(b + 4 + 8 * s);  // 4-aligned
    const int shift = 4 * (p & 1);
    e2m1x4(qw[0] >> shift, q);
    e2m1x4(qw[1] >> shift, q + 4);
    d = ue4m3_half(b[s]), m = 0.0f;
  }
};

// Q4_K: d f16 | dmin f16 | scales[12] | qs[128]; a unit is sub-block j = u % 8 of block u / 8:
// qs[32*(j/2) + l], low nibble for even j, high for odd; w = d*sc_j * q - dmin*m_j.
struct FmtQ4_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  static constexpr bool kE2M1 = false, kHasMin = true;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 144 * (u >> 3);
    const int j = u & 7;
    const uint8_t* sc = b + 4;
    int s, mn;
    if (j < 4) {
      s = sc[j] & 63, mn = sc[j + 4] & 63;
    } else {
      s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
    const uint2 v = *reinterpret_cast<const uint2*>(b + 16 + 32 * (j >> 1) + 8 * p);  // 8-aligned
    const int shift = 4 * (j & 1);
    const uint32_t w0 = v.x >> shift, w1 = v.y >> shift;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[i] = static_cast<float>((w0 >> (8 * i)) & 0xF);
      q[4 + i] = static_cast<float>((w1 >> (8 * i)) & 0xF);
    }
    d = ld_f16(b) * static_cast<float>(s);
    m = ld_f16(b + 2) * static_cast<float>(mn);
  }
};

// Q6_K: ql[128] | qh[64] | scales[16] int8 | d f16; a unit is 32 elements 128h + 32qq + l of
// block u / 8 (h = j/4, qq = j%4), l = 8p + i; scale sc[8h + l/16 + 2qq]; w = d*sc * (q - 32).
struct FmtQ6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static constexpr bool kE2M1 = false, kHasMin = false;
  __device__ static void piece(const uint8_t* c, int u, int p, float* q, float& d, float& m) {
    const uint8_t* b = c + 210 * (u >> 3);
    const int j = u & 7, h = j >> 2, qq = j & 3;
    const uint8_t* ql = b + 64 * h + 32 * (qq & 1) + 8 * p;
    const uint8_t* qh = b + 128 + 32 * h + 8 * p;
    const int lshift = 4 * (qq >> 1), hshift = 2 * qq;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int v = ((ql[i] >> lshift) & 0xF) | (((qh[i] >> hshift) & 3) << 4);
      q[i] = static_cast<float>(v - 32);
    }
    d = ld_f16(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + 8 * h + (p >> 1) + 2 * qq]));
    m = 0.0f;
  }
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
// Rows per warp: enough X reuse, bounded registers (staging buffer and accumulators).
template <class F, int NT>
__host__ __device__ constexpr int rows_per_warp() {
  return chunk_bytes<F>() >= 2048 ? (NT <= 2 ? 2 : 1) : (NT <= 2 ? 4 : 2);
}

// Copies bytes [off, off + nbytes) of R rows into the warp's staging buffer.
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

  uint8_t* stage = smem + warp * R * CBP;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  const int64_t data_bytes = p.k / F::kBlockElems * F::kBlockBytes;
  const int n_chunks = static_cast<int>((p.k + kChunk - 1) / kChunk);
  for (int c = ks; c < n_chunks; c += p.ws) {
    const int64_t off = static_cast<int64_t>(c) * CB;
    const int nbytes = static_cast<int>(min(static_cast<int64_t>(CB), data_bytes - off));
    const int units = static_cast<int>(min(static_cast<int64_t>(kUnit), (p.k - static_cast<int64_t>(c) * kChunk) / kUnit));
    stage_rows<F, R>(stage, w, p, row0, off, nbytes, lane);
    __syncwarp();
    if (lane < units) {
      const float* xu = x + static_cast<int64_t>(c) * kChunk + lane * kUnit;
#pragma unroll
      for (int pc = 0; pc < 4; ++pc) {
        float xv[NT][8];
        [[maybe_unused]] float xsum[NT];
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          if (t < p.n_tok) {
            const float4* s = reinterpret_cast<const float4*>(xu + t * p.ldx + 8 * pc);
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
          F::piece(stage + r * CBP, lane, pc, q, d, m);
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
    __syncwarp();
  }

  // Warp sums, then the ws warps of the row group meet in shared memory (fixed order).
  float* red = reinterpret_cast<float*>(smem + kWarps * R * CBP);  // [kWarps][R][NT]
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
  int ws = n_chunks >= 4 ? 4 : n_chunks >= 2 ? 2 : 1;
  if (g_split_override == 1 || g_split_override == 2 || g_split_override == 4) ws = g_split_override;
  p.ws = ws;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p.w);
  p.vec = (base % VB == 0 && p.row_bytes % VB == 0 && (p.ids == nullptr || p.expert_bytes % VB == 0)) ? 1 : 0;
  const int64_t rows_per_cta = static_cast<int64_t>(kWarps / ws) * R;
  const dim3 grid(static_cast<unsigned>((p.rows + rows_per_cta - 1) / rows_per_cta), static_cast<unsigned>(n_slots));
  const size_t smem = static_cast<size_t>(kWarps) * R * chunk_pad<F>() + static_cast<size_t>(kWarps) * R * NT * 4;
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
