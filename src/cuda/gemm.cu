// gemm.h, dense route: dequantise a weight row-chunk into the workspace, round X once, let
// cuBLAS multiply (fp32 accumulate; kF32 with the pedantic fp32 compute type, so no TF32),
// then one epilogue kernel applies the scales, the rounding and the accumulate.
//
// Workspace layout: [cuBLAS workspace | X rounded (tok_chunk x k) | W chunk (rows x k) |
// Y chunk (fp32, only when accumulating)]. The raw sums go straight into y when not
// accumulating (the epilogue then runs in place), which saves a pass over Y.
//
// Split precisions (kBF16x2/x3): X is rounded into its parts once ([part][token][k], bf16),
// the bf16 weight chunk is multiplied by each part in turn, the 2nd and 3rd cuBLAS calls
// adding into the same fp32 output (beta = 1): no extra output buffer, and each call has
// the plain bf16 GEMM's shape. (One call over a token-concatenated X would need a partial
// sum buffer of parts x tokens x rows and a summing pass.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/dequant.h"
#include "cuda/gemm.h"
#include "cuda/gemm_fused.h"
#include "cuda/gemm_tuning.h"
#include "cuda/nvfp4_tiled.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// cuBLAS's own workspace, set explicitly so that a captured graph never allocates (NVIDIA
// recommends 32 MiB on Hopper).
constexpr size_t kCublasWorkspace = 32 * kMiB;
constexpr size_t kDefaultMax = 256 * kMiB;
constexpr int64_t kRowAlign = 128;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

template <class T>
__global__ void round_x_kernel(const float* x, int64_t ldx, int64_t k, int64_t n_tok, T* dst) {
  const int64_t total = k * n_tok;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / k, e = i - t * k;
    const float v = x[t * ldx + e];
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      dst[i] = __float2bfloat16_rn(v);
    } else {
      dst[i] = __float2half_rn(v);
    }
  }
}

// The split of gemm.h's kBF16x2/x3: parts (each exact in bf16) of v, largest first; the
// last part is rounded by its caller's conversion. v - bf16(v) is exact in fp32.
template <int NP>
__device__ __forceinline__ void split_bf16(float v, __nv_bfloat16* out) {
#pragma unroll
  for (int p = 0; p < NP - 1; ++p) {
    out[p] = __float2bfloat16_rn(v);
    v -= __bfloat162float(out[p]);
  }
  out[NP - 1] = __float2bfloat16_rn(v);
}

// X rounded into NP bf16 parts: part p of element (t, e) at dst[p * k * n_tok + t * k + e].
template <int NP>
__global__ void split_x_kernel(const float* x, int64_t ldx, int64_t k, int64_t n_tok, __nv_bfloat16* dst) {
  const int64_t total = k * n_tok;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / k, e = i - t * k;
    __nv_bfloat16 part[NP];
    split_bf16<NP>(x[t * ldx + e], part);
#pragma unroll
    for (int p = 0; p < NP; ++p) dst[p * total + i] = part[p];
  }
}

// y[t][r] = round(src[t][r] * s_r) (+ y[t][r]); src may be y itself (in place).
__global__ void epilogue_kernel(const float* src, int64_t lds, float* y, int64_t ldy, int64_t rows, int64_t n_tok,
                                const float* row_scale, float scale, Round round, bool accumulate) {
  const int64_t total = rows * n_tok;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / rows, r = i - t * rows;
    const float s = (row_scale != nullptr ? row_scale[r] : 1.0f) * scale;
    float v = round_to(round, src[t * lds + r] * s);
    if (accumulate) v += y[t * ldy + r];
    y[t * ldy + r] = v;
  }
}

int grid_for(int64_t n, int threads) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 132 * 32)));
}

// Weight type the product reads directly (no dequantisation) at precision p.
bool direct_type(GgmlType t, GemmPrec p) {
  const bool bf16_ops = p == GemmPrec::kBF16 || gemm_split_parts(p) > 1;
  return (t == GgmlType::F32 && p == GemmPrec::kF32) || (t == GgmlType::BF16 && bf16_ops) ||
         (t == GgmlType::F16 && p == GemmPrec::kF16);
}

}  // namespace

bool gemm_bf16_exact(GgmlType t) {
  return t == GgmlType::BF16 || t == GgmlType::NVFP4 || t == GgmlType::MXFP4;
}

bool gemm_supported(GgmlType t) {
  return gemm_detail::with_format(t, [](auto) {});
}

int64_t gemm_weight_align(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return 16;  // 16-byte vector loads
    case GgmlType::Q4_K: return 8;   // 8-byte loads of qs
    case GgmlType::NVFP4: return 4;  // 4-byte loads of qs
    case GgmlType::Q8_0:
    case GgmlType::Q6_K: return 2;   // f16 scales
    default: return 1;
  }
}

namespace gemm_detail {

void check_args(const GemmArgs& a, const char* who) {
  const std::string w = who;
  if (!gemm_supported(a.type)) fail_message(w + ": weight type " + std::string(type_name(a.type)) + " is not supported");
  const int64_t bs = traits(a.type).block_size;
  if (a.k <= 0 || a.k % 32 != 0 || a.k % bs != 0) {
    fail_message(w + ": k=" + std::to_string(a.k) + " must be a positive multiple of 32 and of the " +
                 std::string(type_name(a.type)) + " block size " + std::to_string(bs));
  }
  const int64_t al = gemm_weight_align(a.type);
  if (a.row_bytes < row_bytes(a.type, a.k) || a.row_bytes % al != 0 ||
      reinterpret_cast<uintptr_t>(a.w) % static_cast<uintptr_t>(al) != 0) {
    fail_message(w + ": weight rows of " + std::string(type_name(a.type)) + " (row_bytes=" +
                 std::to_string(a.row_bytes) + ") must hold k elements and be " + std::to_string(al) +
                 "-byte aligned");
  }
  if (a.ldx < a.k || a.ldy < a.rows || a.rows < 0 || a.n_tok < 0) {
    fail_message(w + ": expected ldx >= k, ldy >= rows (ldx=" + std::to_string(a.ldx) +
                 ", ldy=" + std::to_string(a.ldy) + ")");
  }
}

}  // namespace gemm_detail

Gemm::Gemm(int64_t max_k, int64_t max_tok, size_t workspace_bytes) : max_k_(max_k), max_tok_(max_tok) {
  if (max_k <= 0 || max_tok <= 0) {
    fail_message("Gemm: max_k=" + std::to_string(max_k) + ", max_tok=" + std::to_string(max_tok) +
                 ": expected positive sizes");
  }
  if (workspace_bytes == 0) {
    // X rounded, plus 8192 weight rows at fp32 and their fp32 outputs: chunks large enough
    // that cuBLAS runs at full speed, capped.
    const size_t want = kCublasWorkspace + align_up(static_cast<size_t>(max_tok * max_k * 2), 256) +
                        8192 * static_cast<size_t>(max_k * 4 + max_tok * 4);
    workspace_bytes = std::min(kDefaultMax, want);
  }
  cublas_ws_bytes_ = std::min(kCublasWorkspace, workspace_bytes / 4);
  ws_ = DeviceBuffer(workspace_bytes);
  FT_CUDA_CHECK(cublasCreate(&handle_));
  FT_CUDA_CHECK(cublasSetWorkspace(handle_, ws_.get(), cublas_ws_bytes_));
  FT_CUDA_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));  // no TF32
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void Gemm::run(const GemmArgs& args, cudaStream_t s) {
  GemmArgs a = args;
  a.prec = gemm_split_prec(a.type, a.prec);
  gemm_detail::check_args(a, "Gemm::run");
  if (a.rows == 0 || a.n_tok == 0) return;
  if (a.tiled && (a.type != GgmlType::NVFP4 || a.rows % kTileRows != 0))
    fail_message("Gemm::run: a tiled weight must be NVFP4 with rows a multiple of 16 (rows = " + std::to_string(a.rows) +
                 ")");
  GemmRoute r = route_;
  if (r == GemmRoute::kAuto) r = gemm_pick_route(a.type, a.prec, a.n_tok);
  if (a.tiled) r = GemmRoute::kCublas;  // the fused kernel reads row-major weights only
  // The fused kernel reads X with float4 loads; anything else goes through cuBLAS.
  const bool x_vec = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.ldx % 4 == 0;
  if (r == GemmRoute::kFused && (x_vec || route_ == GemmRoute::kFused)) {
    gemm_detail::FusedParams p{a.type, a.w, a.row_bytes, a.k, a.rows, 0, a.x, a.ldx, a.n_tok, a.y, a.ldy,
                               a.row_scale, a.scale, a.round, a.accumulate, a.prec, 1, nullptr, nullptr, 1,
                               nullptr, 0};
    gemm_detail::fused_gemm(p, s);
    return;
  }
  run_cublas(a, s);
}

void Gemm::run_cublas(const GemmArgs& a, cudaStream_t s) {
  FT_CUDA_CHECK(cublasSetStream(handle_, s));
  const bool f32 = a.prec == GemmPrec::kF32;
  const int parts = gemm_split_parts(a.prec);  // X parts, each multiplied by the same weights
  const bool bf16_ops = a.prec == GemmPrec::kBF16 || parts > 1;
  const bool direct = direct_type(a.type, a.prec) && a.row_bytes % (f32 ? 4 : 2) == 0;
  const size_t esize = f32 ? 4 : 2;
  const cudaDataType_t op_type = f32 ? CUDA_R_32F : bf16_ops ? CUDA_R_16BF : CUDA_R_16F;
  const cublasComputeType_t compute = f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;

  // Plan the chunks: tokens first (X rounded once per token chunk), then as many weight rows
  // as the rest of the workspace holds.
  uint8_t* base = scratch();
  const size_t avail = scratch_bytes();
  const size_t w_row = direct ? 0 : align_up(static_cast<size_t>(a.k) * esize, 16);
  int64_t tc = std::min(a.n_tok, std::max<int64_t>(max_tok_, 1));
  auto x_bytes = [&](int64_t t) {
    return f32 ? size_t{0} : align_up(static_cast<size_t>(parts * t * a.k) * 2, 256);
  };
  auto per_row = [&](int64_t t) { return w_row + (a.accumulate ? static_cast<size_t>(t) * 4 : 0); };
  const int64_t min_rows = std::min<int64_t>(a.rows, kRowAlign);
  // 256: the alignment gap between the W and Y regions.
  auto need = [&](int64_t t, int64_t r) { return x_bytes(t) + 256 + per_row(t) * static_cast<size_t>(r); };
  while (tc > 1 && need(tc, min_rows) > avail) tc = (tc + 1) / 2;
  if (need(tc, min_rows) > avail) {
    fail_message("Gemm::run: workspace of " + std::to_string(ws_.bytes()) + " bytes is too small for k=" +
                 std::to_string(a.k));
  }
  int64_t rc = a.rows;
  if (per_row(tc) > 0) {
    rc = static_cast<int64_t>((avail - x_bytes(tc) - 256) / per_row(tc));
    if (rc < a.rows) rc = std::max(min_rows, rc / kRowAlign * kRowAlign);
    rc = std::min(rc, a.rows);
  }
  void* xq = base;
  uint8_t* wq = base + x_bytes(tc);
  float* yq = reinterpret_cast<float*>(wq + align_up(w_row * static_cast<size_t>(rc), 256));

  const bool need_epilogue = a.accumulate || a.row_scale != nullptr || a.scale != 1.0f || a.round != Round::kNone;
  const float one = 1.0f, zero = 0.0f;
  // Rows outer, tokens inner: every weight is dequantised once; X is rounded once when all
  // tokens fit one chunk (the prefill case), else once per (row chunk, token chunk) -- X is
  // the smaller operand (512 x 4096 against 14336 x 4096 for a Llama-8B projection).
  auto round_x = [&](int64_t t0, int64_t nt) {
    if (parts == 2) {
      split_x_kernel<2><<<grid_for(nt * a.k, 256), 256, 0, s>>>(a.x + t0 * a.ldx, a.ldx, a.k, nt,
                                                                 static_cast<__nv_bfloat16*>(xq));
    } else if (parts == 3) {
      split_x_kernel<3><<<grid_for(nt * a.k, 256), 256, 0, s>>>(a.x + t0 * a.ldx, a.ldx, a.k, nt,
                                                                 static_cast<__nv_bfloat16*>(xq));
    } else if (a.prec == GemmPrec::kBF16) {
      round_x_kernel<<<grid_for(nt * a.k, 256), 256, 0, s>>>(a.x + t0 * a.ldx, a.ldx, a.k, nt,
                                                              static_cast<__nv_bfloat16*>(xq));
    } else {
      round_x_kernel<<<grid_for(nt * a.k, 256), 256, 0, s>>>(a.x + t0 * a.ldx, a.ldx, a.k, nt,
                                                              static_cast<__half*>(xq));
    }
    FT_CUDA_CHECK_LAUNCH();
  };
  const bool x_once = a.n_tok <= tc;
  if (!f32 && x_once) round_x(0, a.n_tok);
  for (int64_t r0 = 0; r0 < a.rows; r0 += rc) {
    const int64_t nr = std::min(rc, a.rows - r0);
    const void* wb;
    int64_t lda;
    if (direct) {
      wb = a.w + r0 * a.row_bytes;
      lda = a.row_bytes / static_cast<int64_t>(esize);
    } else {
      // Tiled: row chunks are whole tiles (rc a multiple of kRowAlign, rows of 16), each at its
      // row-major offset.
      dequant_rows(a.type, a.w + r0 * a.row_bytes, a.row_bytes, a.k, nr, wq, static_cast<int64_t>(w_row / esize),
                   f32 ? DequantOut::kF32 : bf16_ops ? DequantOut::kBF16 : DequantOut::kF16, s, a.tiled,
                   a.lanes);
      wb = wq;
      lda = static_cast<int64_t>(w_row / esize);
    }
    for (int64_t t0 = 0; t0 < a.n_tok; t0 += tc) {
      const int64_t nt = std::min(tc, a.n_tok - t0);
      const void* xb = a.x + t0 * a.ldx;
      int64_t ldb = a.ldx;
      if (!f32) {
        if (!x_once) round_x(t0, nt);
        xb = xq;
        ldb = a.k;
      }
      float* c = a.accumulate ? yq : a.y + t0 * a.ldy + r0;
      const int64_t ldc = a.accumulate ? nr : a.ldy;
      // Column-major view: C (nr x nt, ldc) = W_chunk^T (W rows are columns of lda) * X^T.
      // Split X: part p (nt x k, after the parts before it) adds into C.
      for (int p = 0; p < parts; ++p) {
        const void* xp = static_cast<const __nv_bfloat16*>(xb) + static_cast<int64_t>(p) * nt * a.k;
        FT_CUDA_CHECK(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nr), static_cast<int>(nt),
                                   static_cast<int>(a.k), &one, wb, op_type, static_cast<int>(lda),
                                   parts > 1 ? xp : xb, op_type, static_cast<int>(ldb), p == 0 ? &zero : &one, c,
                                   CUDA_R_32F, static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT));
      }
      if (need_epilogue) {
        epilogue_kernel<<<grid_for(nr * nt, 256), 256, 0, s>>>(
            c, ldc, a.y + t0 * a.ldy + r0, a.ldy, nr, nt, a.row_scale != nullptr ? a.row_scale + r0 : nullptr,
            a.scale, a.round, a.accumulate);
        FT_CUDA_CHECK_LAUNCH();
      }
    }
  }
}

}  // namespace ft::cuda
