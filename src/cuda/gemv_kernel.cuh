// The decode GEMV skeleton shared by the float path (gemv_float.cu) and the integer path
// (gemv_q8.cu): grid and slot bookkeeping, the cp.async staging pipeline, the cross-lane and
// cross-warp reduction and the epilogue (scale, rounding, accumulate, MoE combine). A
// Policy supplies compute(): one staged chunk of the warp's rows times the activations.
//
// A CTA is 4 warps. The `ws` warps of a row group split the row's k into chunks (chunk c goes
// to warp c % ws) and meet in shared memory at the end. Within a warp, `lpr` lanes share a
// row (lane kl of them takes unit kl of every chunk) and the 32 / lpr "row slices" take
// different rows; each lane carries R rows (slice rs, row r: staged row r * ns + rs) so every
// activation value it loads serves R rows. lpr < 32 keeps all lanes busy when k is short
// (Qwen3-30B-A3B's expert down projection has 12 NVFP4 blocks per row).
//
// Staging: the warp copies its rows' chunk bytes global -> shared with cp.async (16-, 8- or
// 4-byte vectors, coalesced), `stages` chunks in flight; the block formats (36, 34, 17, 210
// bytes) are not vector-aligned per block, but a chunk is, so staging turns a strided
// per-block read into a streaming one. Each staged row-chunk takes `cbp` bytes (padding
// keeps the compute reads of different row slices on different banks and lets decoders
// read a word past their last byte).
#pragma once

#include <cstdint>

#include "cuda/round.cuh"

namespace ft::cuda::gemv_detail {

constexpr int kWarps = 4;  // warps per CTA

struct Params {
  const uint8_t* w;
  int64_t row_bytes, k, rows;
  const float* x;  // float path
  int64_t ldx;
  const uint8_t* xq;  // integer path
  int64_t xq_row;
  int n_tok;
  float* y;
  int64_t ldy;
  const float* row_scale;
  float scale;
  Round round;
  const int32_t* ids;
  int64_t expert_bytes, x_div;
  const float* bank;
  int bank_col;
  const float* slot_w;
  int n_used;
  int accumulate;
  // Launch plan (gemv_tuning.h).
  int ws;          // warps per row group (1, 2, 4)
  int lpr_log2;    // lanes per row = 1 << lpr_log2 (2..5)
  int vb;          // cp.async vector bytes (16, 8, 4); 0: synchronous byte copies
  int stages;      // chunks in flight per warp (1..4)
  int cbp;         // shared bytes per staged row-chunk
  int chunk_elems, chunk_bytes;
};

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
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

// Copies bytes [off, off + nbytes) of the warp's n_rows rows (row0 + q, q < n_rows) into
// stage + q * cbp. Vectors are spread over the lanes across rows, so short chunks still use
// the whole warp.
__device__ __forceinline__ void stage_rows(uint8_t* stage, const uint8_t* w, const Params& p, int64_t row0,
                                           int n_rows, int64_t off, int nbytes, int lane) {
  const int64_t rows_left = p.rows - row0;
  const int nr = static_cast<int>(rows_left < n_rows ? (rows_left > 0 ? rows_left : 0) : n_rows);
  int tail_from = 0;
  if (p.vb > 0) {
    const int nv = nbytes / p.vb;
    tail_from = nv * p.vb;
    const int total = nv * nr;
    for (int i = lane; i < total; i += 32) {
      const int q = i / nv, v = i - q * nv;
      const uint8_t* src = w + (row0 + q) * p.row_bytes + off + v * p.vb;
      uint8_t* dst = stage + q * p.cbp + v * p.vb;
      if (p.vb == 16) cp_async16(dst, src);
      else if (p.vb == 8) cp_async8(dst, src);
      else cp_async4(dst, src);
    }
  }
  // Ragged tail (or everything, without vectors): synchronous bytes.
  if (tail_from < nbytes) {
    const int nt = nbytes - tail_from;
    for (int i = lane; i < nt * nr; i += 32) {
      const int q = i / nt, b = tail_from + (i - q * nt);
      stage[q * p.cbp + b] = w[(row0 + q) * p.row_bytes + off + b];
    }
  }
}

__device__ __forceinline__ void store_out(float* y, float v, int accumulate) {
  if (accumulate) v += *y;
  *y = v;
}

// Policy: static int64_t data_bytes(const Params&) -- bytes of a row's payload;
//         template <int NT, int R> static void compute(acc, stage, p, slot_x, c, rs, kl, ns)
//         -- acc[r][t] += staged chunk c of the lane's R rows . activations.
template <class Policy, int NT, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const Params p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int lpr = 1 << p.lpr_log2, ns = 32 >> p.lpr_log2;
  const int rs = lane >> p.lpr_log2, kl = lane & (lpr - 1);
  const int g = warp / p.ws, ks = warp % p.ws;
  const int rw = R * ns;  // rows of a row group
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / p.ws) + g) * rw;

  const int n_stage = p.stages;
  uint8_t* stages = smem + warp * n_stage * rw * p.cbp;
  float* red = reinterpret_cast<float*>(smem + kWarps * n_stage * rw * p.cbp);  // [kWarps][rw][NT]

  const int64_t data_bytes = Policy::data_bytes(p);
  const int n_chunks = static_cast<int>((p.k + p.chunk_elems - 1) / p.chunk_elems);
  const int n_mine = ks < n_chunks ? (n_chunks - ks + p.ws - 1) / p.ws : 0;
  auto chunk_off = [&](int i) { return static_cast<int64_t>(ks + i * p.ws) * p.chunk_bytes; };
  auto chunk_len = [&](int i) {
    const int64_t left = data_bytes - chunk_off(i);
    return static_cast<int>(left < p.chunk_bytes ? left : p.chunk_bytes);
  };

  const bool combine = p.slot_w != nullptr;
  const int n_inner = combine ? p.n_used : 1;
  float comb = 0.0f;  // combine: lane i < rw holds row row0 + i
  for (int j = 0; j < n_inner; ++j) {
    const int64_t slot = combine ? static_cast<int64_t>(blockIdx.y) * p.n_used + j : blockIdx.y;
    const uint8_t* w = p.w;
    int64_t xrow = 0;
    float slot_scale = p.scale;
    if (p.ids != nullptr) {
      const int64_t e = p.ids[slot];
      w += e * p.expert_bytes;
      xrow = slot / p.x_div;
      if (p.bank != nullptr) slot_scale *= p.bank[e * 4 + p.bank_col];
    }

    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

    // Pipeline: chunk i lives in stage i % S, with S - 1 chunks in flight ahead of the one
    // being computed. Every iteration commits one group (possibly empty), so waiting for
    // "at most S - 1 pending" means chunk i has landed.
    const int S = n_stage;
    for (int i = 0; i < S - 1; ++i) {
      if (i < n_mine) stage_rows(stages + (i % S) * rw * p.cbp, w, p, row0, rw, chunk_off(i), chunk_len(i), lane);
      cp_async_commit();
    }
    for (int i = 0; i < n_mine; ++i) {
      const int nxt = i + S - 1;
      if (nxt < n_mine)
        stage_rows(stages + (nxt % S) * rw * p.cbp, w, p, row0, rw, chunk_off(nxt), chunk_len(nxt), lane);
      cp_async_commit();
      cp_async_wait(S - 1);
      __syncwarp();
      Policy::template compute<NT, R>(acc, stages + (i % S) * rw * p.cbp + rs * p.cbp, p, xrow, ks + i * p.ws, kl,
                                      ns);
      __syncwarp();  // the stage is refilled in a later iteration
    }

    // Lane sums within a row slice, then the ws warps of the row group meet in shared memory
    // (fixed order: deterministic).
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = acc[r][t];
        for (int o = lpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
        if (kl == 0) red[(warp * rw + r * ns + rs) * NT + t] = v;
      }
    __syncthreads();
    if (ks == 0) {
      const float wk = combine ? p.slot_w[slot] : 0.0f;
      float* y = p.y + (combine ? static_cast<int64_t>(blockIdx.y) : slot) * p.ldy;
      for (int i = lane; i < rw * NT; i += 32) {
        const int q = i / NT, t = i % NT;
        const int64_t row = row0 + q;
        if (t >= p.n_tok || row >= p.rows) continue;
        float v = 0.0f;
        for (int jj = 0; jj < p.ws; ++jj) v += red[((g * p.ws + jj) * rw + q) * NT + t];
        const float s = p.row_scale != nullptr ? p.row_scale[row] * slot_scale : slot_scale;
        v = round_to(p.round, v * s);
        if (combine) {
          // The CPU combine's arithmetic, one rounding per operation (no FMA).
          comb = j == 0 ? __fmul_rn(v, wk) : __fadd_rn(comb, __fmul_rn(v, wk));
        } else {
          store_out(y + t * p.ldy + row, v, p.accumulate);
        }
      }
    }
    __syncthreads();  // red and the stages are reused by the next slot
  }
  if (combine && ks == 0 && lane < rw) {
    const int64_t row = row0 + lane;
    if (row < p.rows) store_out(p.y + static_cast<int64_t>(blockIdx.y) * p.ldy + row, round_to(p.round, comb), p.accumulate);
  }
}

}  // namespace ft::cuda::gemv_detail
