// Which dense GEMM route (gemm.h) runs a shape: the tuning table, apart from kernel code.
//
// Rows are tried in order; the first whose token range and weight class match wins. Retune
// from tools/bench_gemm_cuda.cu on each GPU (both routes are printed per shape).
//
// H200, 2026-11-29 (benches/h200.md): the dequantise + cuBLAS route beats the fused kernel
// at every token count measured, e.g. Llama-8B down (4096x14336 NVFP4) at 9 / 32 / 512
// tokens 88 / 91 / 146 us against 669 / 728 / 1040 us, and at 512 tokens 373-476 against
// 58-85 TFLOP/s over all Llama-8B shapes. The byte-count argument for the fused kernel at few
// tokens did not hold (its weight decode is the bottleneck), so dense GEMMs take cuBLAS.
#pragma once

#include <cstdint>

#include "cuda/gemm.h"

namespace ft::cuda {

struct GemmRouteRule {
  int64_t max_tok;    // applies when n_tok <= max_tok
  bool quantised;     // applies to block-quantised weights (true) or F32/F16/BF16 (false)
  GemmRoute route;
};

inline constexpr GemmRouteRule kGemmRouteTable[] = {
    {INT64_MAX, true, GemmRoute::kCublas},
};

// Grouped (MoE) GEMM, NVFP4 experts: the pair-layout decode and 64-token tiles. Measured on
// the H200 at Qwen3-30B-A3B shapes, 4096 slots over 128 experts: gate|up 537 us (tile 64,
// pair layout) against 622 us (tile 32, generic decode, the former default); down 368
// against 387 us. BF16 experts keep tile 32 (542 against 621 us).
inline constexpr bool kFusedNvfp4PairLayout = true;
inline constexpr int kFusedNvfp4Tile = 64;

// kF32 always takes cuBLAS (cublasSgemm-exact, and the fused fp32 kernel is a simple one).
// The split precisions (kBF16x2/x3) follow the table like kBF16 (not measured separately yet:
// cuBLAS runs one bf16 GEMM per part on the weights dequantised once).
inline GemmRoute gemm_pick_route(GgmlType t, GemmPrec p, int64_t n_tok) {
  if (p == GemmPrec::kF32) return GemmRoute::kCublas;
  const bool quantised = t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
  for (const GemmRouteRule& r : kGemmRouteTable) {
    if (n_tok <= r.max_tok && quantised == r.quantised) return r.route;
  }
  return GemmRoute::kCublas;
}

}  // namespace ft::cuda
