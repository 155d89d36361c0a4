// Which dense GEMM route (gemm.h) runs a shape: the tuning table, apart from kernel code.
//
// Rows are tried in order; the first whose token range and weight class match wins. The
// default table is a byte-count argument, not yet a measurement: the cuBLAS route moves
// about 4 bytes per weight (bf16 written by the dequantiser, read by cuBLAS) on top of the
// weight itself, the fused route only the weight (0.56 bytes for NVFP4), so at few tokens
// (memory-bound) the fused kernel should win for block-quantised weights. Retune from
// tools/bench_gemm_cuda.cu on each GPU (both routes are printed per shape).
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
    {32, true, GemmRoute::kFused},
};

// kF32 always takes cuBLAS (cublasSgemm-exact, and the fused fp32 kernel is a simple one).
inline GemmRoute gemm_pick_route(GgmlType t, GemmPrec p, int64_t n_tok) {
  if (p == GemmPrec::kF32) return GemmRoute::kCublas;
  const bool quantised = t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
  for (const GemmRouteRule& r : kGemmRouteTable) {
    if (n_tok <= r.max_tok && quantised == r.quantised) return r.route;
  }
  return GemmRoute::kCublas;
}

}  // namespace ft::cuda
