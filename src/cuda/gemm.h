// Prefill GEMM on the GPU: the CUDA twin of quant::matmul_ref for any number of tokens.
//
//   Y[t][r] = round( (sum_k W[r][k] * X[t][k]) * s_r )  (+ Y[t][r] when accumulate)
//   s_r     = (row_scale ? row_scale[r] : 1) * scale
//
// W stays in its GGUF type (F32, F16, BF16, Q8_0, Q4_K, Q6_K, MXFP4, NVFP4) in device
// memory; X and Y are fp32. The product runs at one operand precision (GemmPrec):
//   kF32   exact fp32 products and sums (cublasSgemm, pedantic math: no TF32);
//   kBF16  / kF16: W and X rounded to bf16/f16, tensor cores, fp32 accumulation (kF16 needs
//          |W|, |X| < 65504: larger values become inf, as in any f16 GEMM).
// The scale and rounding are applied to the fp32 sum in an epilogue (like
// quant::detail::matmul_finish), so a tiny NVFP4 scale never meets a 16-bit value unscaled.
//
// Dense routes (GemmRoute; gemm_tuning.h picks one per call):
//   kCublas  weight row-chunks are dequantised into the Gemm's workspace (nothing for
//            F32/kF32, BF16/kBF16, F16/kF16: cuBLAS reads the weights as they are), X is
//            rounded once, cuBLAS multiplies, an epilogue kernel scales/rounds/accumulates;
//   kFused   the grouped route's kernel with one group: weight tiles dequantised into shared
//            memory, mma.sync (no weight scratch; the table's choice for block-quantised
//            weights at <= 32 tokens, where the cuBLAS route's extra bytes dominate).
//
// Grouped (MoE prefill) route: gemm_grouped multiplies every expert's weights by the
// token-slots sorted to it (moe_sort), one launch, expert counts read on the device.
//
// Requirements (ft::Error otherwise): k a multiple of 32 and of the block size; W and
// row_bytes aligned to gemm_weight_align(type) (packed GGUF rows always are); for the
// grouped route and the fused dense kernel X 16-byte aligned with ldx % 4 == 0.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/buffer.h"
#include "cuda/round.h"
#include "format/ggml_type.h"

namespace ft::cuda {

// Operand precision: kF32 = exact fp32 (cublasSgemm, pedantic math, NO TF32); kBF16/kF16 =
// tensor cores, fp32 accumulate.
// kBF16x2 / kBF16x3 (split operands): X = x_hi + x_mid (+ x_lo), each part bf16 (x_hi =
// bf16(x), x_mid = bf16(x - x_hi), x_lo = bf16(x - x_hi - x_mid)), every part multiplied by the
// SAME bf16 weights on tensor cores into one fp32 accumulator. For weights exact in bf16
// (gemm_bf16_exact: BF16, NVFP4, MXFP4) the products are then exact up to the split's residual:
// 3 parts hold all 24 bits of an fp32 x (fp32-exact products, only the sum's order differs
// from kF32), 2 parts ~16 bits (x's relative residual <= 2^-17). Gemm::run and gemm_grouped
// run other weight types at kF32 (gemm_split_prec). Cost: 2 / 3 bf16 products instead of one
// fp32 one (tensor cores: ~15x the fp32 FMA rate on the H200).
enum class GemmPrec { kF32, kBF16, kF16, kBF16x2, kBF16x3 };

// Parts of a split precision (kBF16x2: 2, kBF16x3: 3), 1 otherwise.
inline int gemm_split_parts(GemmPrec p) { return p == GemmPrec::kBF16x2 ? 2 : p == GemmPrec::kBF16x3 ? 3 : 1; }
// True for weight types whose every value is exact in bf16 (NVFP4: e2m1 x ue4m3 has <= 6
// significant bits; MXFP4: e2m1 x a power of two; BF16).
bool gemm_bf16_exact(GgmlType t);
// The precision a split request runs at: p when it is no split or t is exact in bf16, else
// kF32 (Q8_0, Q4_K, Q6_K, F16, F32 weights are not exact in bf16).
inline GemmPrec gemm_split_prec(GgmlType t, GemmPrec p) {
  return gemm_split_parts(p) == 1 || gemm_bf16_exact(t) ? p : GemmPrec::kF32;
}

struct GemmArgs {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;  // device weights: `rows` rows of k elements, row_bytes apart
  int64_t row_bytes = 0, k = 0, rows = 0;
  const float* x = nullptr;  // device fp32 activations, X[t][k] at x + t*ldx
  int64_t ldx = 0;
  int64_t n_tok = 0;
  float* y = nullptr;  // device fp32 output, Y[t][r] at y + t*ldy + r
  int64_t ldy = 0;
  const float* row_scale = nullptr;  // device {rows}; nullptr: none
  float scale = 1.0f;
  Round round = Round::kNone;
  bool accumulate = false;  // y = round(sum * s_r) + y (the add is not rounded again)
  GemmPrec prec = GemmPrec::kBF16;
  // NVFP4 in the tiled layout (cuda/nvfp4_tiled.h): the cuBLAS route, its dequantiser reading it.
  bool tiled = false;
  bool lanes = false;  // with tiled: its lane-major variant
};

// True for the weight types the GEMM decodes.
bool gemm_supported(GgmlType t);
// Byte alignment the decoders need of W and row_bytes (vector loads of the block formats).
int64_t gemm_weight_align(GgmlType t);

// Which dense route Gemm::run takes (tests and benchmarks force one; kAuto asks the table).
enum class GemmRoute { kAuto, kCublas, kFused };

// Token tile of the fused tensor-core kernel (32 or 64; 0 = automatic: 32 when the groups
// average <= 32 positions, else 64), for tests and benchmarks (process-wide, not thread-safe).
void gemm_set_fused_tile_override(int bt);
// NVFP4 weights in the fused kernel: the pair-layout path of gemm_fp4.cuh (table lookups) or
// the generic decoder (default, until the benchmark says otherwise); for tests and
// benchmarks (process-wide, not thread-safe).
void gemm_set_fused_fp4_fast(bool on);
// Launches of the fused kernel so far (dense and grouped; tests tell the routes apart by it).
int64_t gemm_fused_launches();

// Owns the cuBLAS handles and one bounded device workspace (declared size: the engine adds it
// to its memory report). Not thread-safe; one Gemm per stream.
class Gemm {
 public:
  // max_k, max_tok: the largest k and n_tok that run() sees with the full chunk width (larger
  // calls still work, in more row/token chunks). workspace_bytes 0: a default <= 256 MiB.
  Gemm(int64_t max_k, int64_t max_tok, size_t workspace_bytes = 0);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  size_t workspace_bytes() const { return ws_.bytes(); }

  // Enqueues the product on stream s. Any rows (e.g. a 151936-row output head): weights are
  // dequantised in row chunks that fit the workspace.
  void run(const GemmArgs& a, cudaStream_t s);

  // Forces a dense route (kAuto: the tuning table).
  void set_route(GemmRoute r) { route_ = r; }

  // Internal: the workspace after the cuBLAS part (grouped route scratch).
  uint8_t* scratch() const { return ws_.as<uint8_t>() + cublas_ws_bytes_; }
  size_t scratch_bytes() const { return ws_.bytes() - cublas_ws_bytes_; }

 private:
  void run_cublas(const GemmArgs& a, cudaStream_t s);

  int64_t max_k_, max_tok_;
  DeviceBuffer ws_;
  size_t cublas_ws_bytes_ = 0;
  cublasHandle_t handle_ = nullptr;
  GemmRoute route_ = GemmRoute::kAuto;
};

// MoE prefill: token-slots sorted by expert on the device (graph-friendly, no host sync).
// ids: [n_slots] expert of each slot (n_slots = n_tok * n_used). Produces order[n_slots]
// (slots sorted by expert, stable: ascending slot index within an expert) and per expert
// offsets[n_expert + 1] (device). Slots whose id is outside [0, n_expert) are left out:
// offsets[n_expert] then counts only the valid slots and order's tail is not written.
// ws: moe_sort_workspace_bytes(n_slots, n_expert) bytes of device memory.
size_t moe_sort_workspace_bytes(int64_t n_slots, int64_t n_expert);
void moe_sort(const int32_t* ids, int64_t n_slots, int64_t n_expert, int32_t* order, int32_t* offsets, void* ws,
              cudaStream_t s);

// Grouped GEMM: for every expert e and every sorted position j in [offsets[e], offsets[e+1]):
//   Y row j = round((W_e · X row x_row(j)) * s_e * s_r * scale)   (+ Y row j when accumulate)
// where W_e = w + e*expert_bytes, x_row(j) = order[j] / x_div (x_div = n_used for gate/up,
// whose slots share their token's input; pass order = nullptr when X is already in sorted
// order: x_row(j) = j), s_e = bank ? bank[e*4 + bank_col] : 1, s_r = g.row_scale ?
// g.row_scale[r] : 1 (the same for every expert). g.n_tok is the number of slots
// (n_slots; an upper bound of offsets[n_expert]) and sizes the launch; g.rows is the rows of
// one expert. One launch for all experts; counts are read on the device.
// kBF16/kF16: tensor-core tiles dequantised on the fly; kF32: an fp32 tiled kernel.
struct GroupedGemmArgs {
  GemmArgs g;
  int64_t expert_bytes = 0;
  int64_t n_expert = 0;
  const int32_t* order = nullptr;
  const int32_t* offsets = nullptr;
  int64_t x_div = 1;
  const float* bank = nullptr;
  int bank_col = 0;
};
void gemm_grouped(Gemm& ctx, const GroupedGemmArgs& a, cudaStream_t s);

}  // namespace ft::cuda
