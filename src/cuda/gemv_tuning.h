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
  int split;   // warps splitting a row's k: 1, 2, 4
  int stages;  // cp.async chunks in flight per warp: 1..4
};

// Enough warps for the H200's 132 SMs: below this many the split grows.
inline constexpr int64_t kGemvTargetWarps = 4096;
// One-token launches with fewer warps than this trade rows per lane for more warps.
inline constexpr int64_t kGemvMinWarps = 2048;

inline int gemv_q8_min_lanes(GgmlType) { return 4; }

// The plan of the integer path for `rows` x `k` weights, n_tok tokens per slot and n_slots
// slots (grid rows: 1 for dense, token-slots or combine tokens for MoE).
inline GemvQ8Plan gemv_q8_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_tok, int64_t n_slots) {
  GemvQ8Plan pl{32, 4, 1, 3};
  // Lanes: the widest that leaves at most 1/8 of the lanes idle on the last chunk.
  const int64_t units = (k + 63) / 64;
  for (int lanes = 32; lanes >= gemv_q8_min_lanes(type); lanes /= 2) {
    pl.lanes = lanes;
    const int64_t idle = (units + lanes - 1) / lanes * lanes - units;
    if (idle * 8 <= units) break;
  }
  const int64_t slices = 32 / pl.lanes;
  if (n_tok == 1) {
    pl.rows = 4;
    while (pl.rows > 1 && (rows + pl.rows * slices - 1) / (pl.rows * slices) * n_slots < kGemvMinWarps) pl.rows /= 2;
  } else {
    pl.rows = n_tok == 2 ? 4 : 2;
  }
  const int64_t warps = (rows + pl.rows * slices - 1) / (pl.rows * slices) * n_slots;
  const int64_t chunks = (k + 64 * pl.lanes - 1) / (64 * pl.lanes);
  pl.split = 1;
  while (pl.split < 4 && 2 * pl.split <= chunks && warps * pl.split < kGemvTargetWarps) pl.split *= 2;
  const int64_t per_warp = (chunks + pl.split - 1) / pl.split;
  pl.stages = static_cast<int>(per_warp < 3 ? per_warp : 3);
  return pl;
}

}  // namespace ft::cuda
