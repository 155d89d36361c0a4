// dequant.h. One thread per 8-element piece: consecutive threads take consecutive pieces of
// a row, so the weight reads are contiguous per warp and the stores are 16-byte vectors. The
// lane-major NVFP4 layout has a kernel of its own, staged through shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/dequant.h"
#include "cuda/gemm_decode.cuh"
#include "cuda/nvfp4_tiled.cuh"

namespace ft::cuda {
namespace {

using namespace gemm_detail;

// 8 decoded values to dst element o, rounded to O.
template <DequantOut O>
__device__ __forceinline__ void store8(void* dst, int64_t o, const float (&v)[8]) {
  if constexpr (O == DequantOut::kF32) {
    float4* d = reinterpret_cast<float4*>(static_cast<float*>(dst) + o);
    d[0] = make_float4(v[0], v[1], v[2], v[3]);
    d[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else if constexpr (O == DequantOut::kBF16) {
    __nv_bfloat162 h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(dst) + o) = *reinterpret_cast<const uint4*>(h);
  } else {
    __half2 h[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__half*>(dst) + o) = *reinterpret_cast<const uint4*>(h);
  }
}

template <class F, DequantOut O>
__global__ void dequant_kernel(const uint8_t* w, int64_t row_bytes, int64_t k, int64_t n_rows, void* dst,
                               int64_t ld, bool tiled) {
  const int64_t per_row = k / 8;
  const int64_t total = per_row * n_rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, pc = i - r * per_row;
    float v[8];
    if (std::is_same_v<F, FmtNVFP4> && tiled)  // nvfp4_tiled.h: the piece's block, found through the tiled layout
      decode8<F>(w + nvfp4_tiled_offset(r, (pc >> 3) * F::kBlockBytes, row_bytes), pc & 7, v);
    else
      decode8<F>(w + r * row_bytes, pc, v);
    store8<O>(dst, r * ld + 8 * pc, v);
  }
}

// The lane-major NVFP4 layout (nvfp4_tiled.h "lanes"): one piece of one tile (16 rows x 256 elements, 2304
// contiguous bytes) a CTA iteration, copied 16 bytes a thread into shared memory and decoded from there through
// nvfp4_lane_in_piece, two units of 8 elements a thread (rows q and q + 8); the next piece's copy is in flight
// while this one decodes (two buffers). Llama-8B pp512 against the plain tiled layout's row-order kernel (H100,
// sessions 50-51): each unit's scale byte and two words read straight from global memory -6.5%; this kernel -1.9%;
// two pieces an iteration -5.5%.
constexpr int kLanesThreads = 256;
template <DequantOut O>
__global__ void __launch_bounds__(kLanesThreads) dequant_lanes_kernel(const uint8_t* w, int64_t row_bytes,
                                                                      int64_t k, int64_t n_rows, void* dst,
                                                                      int64_t ld) {
  constexpr int kVecs = kTileStep / 16;  // 144 copies of 16 bytes a piece
  __shared__ alignas(16) uint8_t sp[2][kTileStep];
  // Piece counts fit 32 bits (rows / 16 x k / 256); the 32-bit division is a fraction of the 64-bit one's code.
  const uint32_t n_pieces = static_cast<uint32_t>(k / 256),
                 total = static_cast<uint32_t>(n_rows / kTileRows) * n_pieces;
  const int t = threadIdx.x;
  // This thread's two units (rows q and q + 8, unit e of the piece's 32): where their scale byte and two code
  // words sit in every piece, through the map.
  const int e = t & 31, o = 36 * (e >> 3), s = (e & 7) >> 1;  // the unit's block in the piece, its sub-block
  int at[2][3];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int q = (t >> 5) + 8 * h;
    at[h][0] = nvfp4_lane_in_piece(q, o + s);
    at[h][1] = nvfp4_lane_in_piece(q, o + 4 + 8 * s);
    at[h][2] = nvfp4_lane_in_piece(q, o + 8 + 8 * s);
  }
  uint4 next = make_uint4(0, 0, 0, 0);
  auto fetch = [&](uint32_t tp) {
    const uint32_t tile = tp / n_pieces, piece = tp - tile * n_pieces;
    if (t < kVecs)
      next = __ldg(reinterpret_cast<const uint4*>(w + tile * kTileRows * row_bytes + piece * int64_t{kTileStep}) + t);
  };
  uint32_t tp = blockIdx.x;
  if (tp < total) fetch(tp);
  for (int buf = 0; tp < total; tp += gridDim.x, buf ^= 1) {
    if (t < kVecs) reinterpret_cast<uint4*>(sp[buf])[t] = next;
    __syncthreads();  // the other buffer was last read before this barrier's previous round
    if (tp + gridDim.x < total) fetch(tp + gridDim.x);
    const uint32_t tile = tp / n_pieces, piece = tp - tile * n_pieces;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int q = (t >> 5) + 8 * h;
      // The unit's scale byte and two code words as sub-block 0 of a block in registers (unit e & 1 of it).
      uint32_t blk[3];
      blk[0] = sp[buf][at[h][0]];
      blk[1] = *reinterpret_cast<const uint32_t*>(sp[buf] + at[h][1]);
      blk[2] = *reinterpret_cast<const uint32_t*>(sp[buf] + at[h][2]);
      float v[8];
      decode8<FmtNVFP4>(reinterpret_cast<const uint8_t*>(blk), e & 1, v);
      store8<O>(dst, (tile * int64_t{kTileRows} + q) * ld + 8 * (piece * int64_t{32} + e), v);
    }
  }
}

}  // namespace

void dequant_rows(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t k, int64_t n_rows, void* dst,
                  int64_t ld, DequantOut out, cudaStream_t s, bool tiled_in, bool lanes) {
  if (n_rows <= 0) return;
  const bool tiled = tiled_in;
  if (tiled && (type != GgmlType::NVFP4 || n_rows % kTileRows != 0 || row_bytes % kTilePiece != 0))
    fail_message("dequant_rows: tiled rows must be NVFP4, whole tiles of 16 rows (n_rows = " + std::to_string(n_rows) +
                 ")");
  const int64_t elem = out == DequantOut::kF32 ? 4 : 2;
  if (k % 32 != 0 || ld < k || (ld * elem) % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0) {
    fail_message("dequant_rows: k=" + std::to_string(k) + ", ld=" + std::to_string(ld) +
                 ": expected k a multiple of 32, ld >= k with 16-byte aligned destination rows");
  }
  constexpr int kThreads = 256;
  const int64_t pieces = n_rows * (k / 8);
  const int blocks = static_cast<int>(std::min<int64_t>((pieces + kThreads - 1) / kThreads, 132 * 64));
  if (tiled && lanes) {
    const int64_t n_pieces = n_rows / kTileRows * (k / 256);
    const int grid = static_cast<int>(std::min<int64_t>(n_pieces, 132 * 8));
    switch (out) {
      case DequantOut::kF32: dequant_lanes_kernel<DequantOut::kF32><<<grid, kLanesThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld); break;
      case DequantOut::kBF16: dequant_lanes_kernel<DequantOut::kBF16><<<grid, kLanesThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld); break;
      case DequantOut::kF16: dequant_lanes_kernel<DequantOut::kF16><<<grid, kLanesThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld); break;
    }
    FT_CUDA_CHECK_LAUNCH();
    return;
  }
  const bool ok = gemm_detail::with_format(type, [&](auto f) {
    using F = decltype(f);
    switch (out) {
      case DequantOut::kF32: dequant_kernel<F, DequantOut::kF32><<<blocks, kThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld, tiled); break;
      case DequantOut::kBF16: dequant_kernel<F, DequantOut::kBF16><<<blocks, kThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld, tiled); break;
      case DequantOut::kF16: dequant_kernel<F, DequantOut::kF16><<<blocks, kThreads, 0, s>>>(w, row_bytes, k, n_rows, dst, ld, tiled); break;
    }
  });
  if (!ok) fail_message("dequant_rows: weight type " + std::string(type_name(type)) + " has no GPU decoder");
  FT_CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
