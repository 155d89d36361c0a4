// Launch plans of the decode GEMV (gemv.cu), apart from the kernels so that a retune never
// touches kernel logic. Measured on the H200 (benches/h200.md, "Decode GEMV"); the rules
// below hold for other GPUs in shape, the constants are the H200's.
#pragma once

#include <cstdint>

#include "format/ggml_type.h"

namespace ft::cuda {

struct GemvQ8Plan {
  int lanes;   // lanes per row: 4, 8, 16, 32 (each takes 64 elements per chunk)
  int rows;    // rows per lane (template instances: 1, 2, 4 for one token)
  int stages;  // cp.async chunks in flight per warp: 1..4
};

// Warps resident on the H200 at the integer kernels' occupancy (132 SMs x 32); only used to
// estimate how many work items each warp will stream.
inline constexpr int64_t kGemvResidentWarps = 132 * 32;
// A warp should stream at least this many chunks, so that its copies overlap its arithmetic.
inline constexpr int64_t kGemvMinItemsPerWarp = 8;

inline int gemv_q8_min_lanes(GgmlType) { return 4; }

// The plan of the integer path for `rows` x `k` weights, n_tok tokens per out row, n_out
// out rows (1 for dense, token-slots or combined tokens for MoE) of n_sub sub-slots each
// (n_used for the combine, else 1).
inline GemvQ8Plan gemv_q8_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_tok, int64_t n_out, int64_t n_sub) {
  GemvQ8Plan pl{32, 1, 4};
  // Lanes: the widest that leaves at most 1/8 of the lanes idle on the last chunk.
  const int64_t units = (k + 63) / 64;
  for (int lanes = 32; lanes >= gemv_q8_min_lanes(type); lanes /= 2) {
    pl.lanes = lanes;
    const int64_t idle = (units + lanes - 1) / lanes * lanes - units;
    if (idle * 8 <= units) break;
  }
  const int64_t slices = 32 / pl.lanes;
  const int64_t chunks = (k + 64 * pl.lanes - 1) / (64 * pl.lanes);
  if (n_tok == 1) {
    // Rows per lane: more reuse of each activation load, but fewer, longer work lists.
    for (int r = 4; r >= 1; r /= 2) {
      pl.rows = r;
      const int64_t groups = (rows + r * slices - 1) / (r * slices) * n_out;
      const int64_t items = (groups + kGemvResidentWarps - 1) / kGemvResidentWarps * chunks * n_sub;
      if (items >= kGemvMinItemsPerWarp) break;
    }
  } else {
    pl.rows = n_tok == 2 ? 4 : 2;
  }
  return pl;
}

}  // namespace ft::cuda
