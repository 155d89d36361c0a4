// The loop nest shared by the SIMD matmul families (included by matmul_avx2.cpp and
// matmul_avx512.cpp only; each instantiates it with its own decoders and tile kernel).
//
// K (the family) provides:
//   K::kMaxT                          most tokens per tile
//   K::F32Vec                         decoder for fp32 rows, one vector per block
//   K::template tile<D, R, T>(w, row_bytes, x, ldx, n_blocks, acc, ld_acc)
//       acc[t*ld_acc + r] += sum over n_blocks D-blocks of W[r] . X[t]   (r < R, t < T)
// D (a decoder) provides kBlock (elements) and kBytes (bytes) per block.
//
// Order of work: k is cut into chunks whose activations (all tokens) fit in L2; within
// a chunk each tile of R rows is decoded from memory once per token group of T tokens
// and stays in L1 across groups, so weights stream from DRAM exactly once per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "quant/dequant.h"
#include "quant/matmul_kernels.h"

namespace ft::quant::detail {

// Prefetches block b of the tile after next (rows 2R..3R-1 from here) while a tile reads
// block b of its own rows: rows are short (a 1024-element NVFP4 row is 9 cache lines),
// too short for the hardware prefetcher to lock on to R interleaved streams. Measured on
// the 2-core EPYC (Zen 3), q8 GEMV from DRAM: NVFP4 1024x1024 173 us without, 79 us one
// tile ahead; two tiles ahead was another ~10% (NVFP4 2048x1024) to ~30% (Q6_K) faster.
template <int R, int kBytes>
inline void prefetch_next_rows(const uint8_t* w, int64_t row_bytes, int64_t b) {
  const uint8_t* p = w + 2 * R * row_bytes + b * kBytes;
  for (int r = 0; r < R; ++r)
    for (int off = 0; off < kBytes; off += 64) __builtin_prefetch(p + r * row_bytes + off, 0, 3);
}

// Elements of k per chunk when there are more tokens than one tile holds: 64 tokens x
// 1024 x 4 B = 256 KiB of activations, inside L2 on the CPUs we target.
inline constexpr int64_t kChunkElems = 1024;

template <class K, class D, int R>
void row_tile(const uint8_t* w, int64_t row_bytes, const float* x, int64_t ldx, int64_t n_tok, int64_t n_blocks,
              float* acc, int64_t ld_acc) {
  int64_t t = 0;
  while (t < n_tok) {
    const int64_t rem = n_tok - t;
    float* out = acc + t * ld_acc;
    const float* xt = x + t * ldx;
    if (K::kMaxT >= 8 && rem >= 8) {
      K::template tile<D, R, (K::kMaxT >= 8 ? 8 : 1)>(w, row_bytes, xt, ldx, n_blocks, out, ld_acc);
      t += 8;
    } else if (rem >= 4) {
      K::template tile<D, R, 4>(w, row_bytes, xt, ldx, n_blocks, out, ld_acc);
      t += 4;
    } else if (rem >= 2) {
      K::template tile<D, R, 2>(w, row_bytes, xt, ldx, n_blocks, out, ld_acc);
      t += 2;
    } else {
      K::template tile<D, R, 1>(w, row_bytes, xt, ldx, n_blocks, out, ld_acc);
      t += 1;
    }
  }
}

// Rows per tile: four independent accumulator chains hide FMA latency when there is
// one token; with more tokens the token dimension supplies them.
inline int rows_per_tile(int64_t n_tok, int64_t rows_left) {
  int r = n_tok == 1 ? 4 : 2;
  while (r > rows_left) r /= 2;
  return r;
}

template <class K, class D>
void dispatch_rows(int R, const uint8_t* w, int64_t row_bytes, const float* x, int64_t ldx, int64_t n_tok,
                   int64_t n_blocks, float* acc, int64_t ld_acc) {
  switch (R) {
    case 4:
      return row_tile<K, D, 4>(w, row_bytes, x, ldx, n_tok, n_blocks, acc, ld_acc);
    case 2:
      return row_tile<K, D, 2>(w, row_bytes, x, ldx, n_tok, n_blocks, acc, ld_acc);
    default:
      return row_tile<K, D, 1>(w, row_bytes, x, ldx, n_tok, n_blocks, acc, ld_acc);
  }
}

inline void store_results(const MatmulArgs& a, int64_t r0, int64_t r1, const float* acc) {
  const int64_t n_rows = r1 - r0;
  for (int64_t t = 0; t < a.n_tok; ++t) {
    for (int64_t r = r0; r < r1; ++r) a.y[t * a.ldy + r] = matmul_finish(a, r, acc[t * n_rows + (r - r0)]);
  }
}

// Weights decoded straight from their blocks by D; elements past the last whole D-block
// (only for F32/F16/BF16, whose type block is 1) are added by a scalar tail.
template <class K, class D>
void run_direct(const MatmulArgs& a, int64_t r0, int64_t r1) {
  const int64_t n_rows = r1 - r0;
  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(n_rows * a.n_tok), 0.0f);
  float* acc = acc_buf.data();
  const int64_t n_full = a.k / D::kBlock;
  const int64_t chunk = a.n_tok <= K::kMaxT ? std::max<int64_t>(n_full, 1)
                                            : std::max<int64_t>(kChunkElems / D::kBlock, 1);
  for (int64_t c0 = 0; c0 < n_full; c0 += chunk) {
    const int64_t c1 = std::min(n_full, c0 + chunk);
    for (int64_t r = r0; r < r1;) {
      const int R = rows_per_tile(a.n_tok, r1 - r);
      dispatch_rows<K, D>(R, a.w + r * a.row_bytes + c0 * D::kBytes, a.row_bytes, a.x + c0 * D::kBlock, a.ldx, a.n_tok,
                          c1 - c0, acc + (r - r0), n_rows);
      r += R;
    }
  }
  const int64_t tail0 = n_full * D::kBlock;
  if (tail0 < a.k) {
    const int64_t type_size = traits(a.type).type_size;  // block size is 1 here
    float wv[D::kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row_ref(a.type, a.w + r * a.row_bytes + tail0 * type_size, wv, a.k - tail0);
      for (int64_t t = 0; t < a.n_tok; ++t) {
        float s = 0.0f;
        for (int64_t e = tail0; e < a.k; ++e) s += wv[e - tail0] * a.x[t * a.ldx + e];
        acc[t * n_rows + (r - r0)] += s;
      }
    }
  }
  store_results(a, r0, r1, acc);
}

// Types without a SIMD decoder: each tile's rows are decoded by dequantize_row_ref into
// a thread-local fp32 buffer once per chunk, then multiplied like F32 rows.
template <class K>
void run_via_ref(const MatmulArgs& a, int64_t r0, int64_t r1) {
  using D = typename K::F32Vec;
  const auto& tr = traits(a.type);
  const int64_t n_rows = r1 - r0;
  thread_local std::vector<float> acc_buf;
  thread_local std::vector<float> wbuf;
  acc_buf.assign(static_cast<size_t>(n_rows * a.n_tok), 0.0f);
  float* acc = acc_buf.data();
  // Chunks are whole type blocks (kChunkElems is a multiple of every block size <= 256).
  const int64_t chunk_elems = a.n_tok <= K::kMaxT ? a.k : std::min<int64_t>(a.k, kChunkElems);
  wbuf.resize(static_cast<size_t>(4 * chunk_elems));
  for (int64_t e0 = 0; e0 < a.k; e0 += chunk_elems) {
    const int64_t e1 = std::min(a.k, e0 + chunk_elems);
    const int64_t byte0 = e0 / tr.block_size * tr.type_size;
    for (int64_t r = r0; r < r1;) {
      const int R = rows_per_tile(a.n_tok, r1 - r);
      for (int i = 0; i < R; ++i) {
        dequantize_row_ref(a.type, a.w + (r + i) * a.row_bytes + byte0, wbuf.data() + i * (e1 - e0), e1 - e0);
      }
      dispatch_rows<K, D>(R, reinterpret_cast<const uint8_t*>(wbuf.data()), (e1 - e0) * 4, a.x + e0, a.ldx, a.n_tok,
                          (e1 - e0) / D::kBlock, acc + (r - r0), n_rows);
      r += R;
    }
  }
  store_results(a, r0, r1, acc);
}

}  // namespace ft::quant::detail
