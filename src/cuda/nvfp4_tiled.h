// The tiled NVFP4 layout of a dense weight matrix on the device, and its in-place repack.
//
// Row-major (the GGUF layout): row r's 36-byte blocks one after another, row_bytes a row.
// Tiled: the same bytes cut into 144-byte pieces (4 blocks = 256 elements) and, within each
// group of 16 rows (a tile: the tensor-core GEMV's CTA), stored piece-major:
//
//   tile t = r / 16 at t * 16 * row_bytes (as in row-major: a tile keeps its byte range);
//   piece p of row r at tile + p * 2304 + (r % 16) * 144;  block j at piece j / 4, + (j % 4) * 36.
//
// So one step of gemv_mma.cu (16 rows x 4 blocks) is one contiguous 2304-byte piece instead
// of 16 pieces of 144 bytes a row apart. Why: H200 session 19 (ft-bench-gemv-cuda --experts,
// its "dense" and "dense tiled" rows, back to back): 28672x4096 23.58 -> 22.67 us, 14336x4096
// 13.72 -> 12.58, 4096x14336 (row-major: the slab kernel) 14.20 -> 12.54; Llama-8B tg128 +3.1-3.4%
// against FT_NVFP4_TILE=0, alternating in one call.
//
// Who reads tiled weights: the one-token tensor-core GEMV (gemv_mma.cu), the slab kernel
// (batched decode, gemv_nvfp4.cu) and the dequantiser of the cuBLAS GEMM route (dequant.cu);
// GemvArgs::tiled / GemmArgs::tiled say so. The float GEMVs and the grouped kernels refuse them,
// Gemm::run sends them to cuBLAS whatever route is forced, and the bulk-copy tensor-core GEMV
// (gemv_mma_tma.cu, slower on tiled weights at every chunking, session 19) never sees them; so
// gpu/weights.cpp tiles only dense NVFP4 projections of a session on the integer path
// (GpuNumerics::q8).
//
// Lanes (GemvArgs::lanes; scanned-clean weights only; on by default on the H200, gemv_tuning.h
// nvfp4_lanes_default; FT_NVFP4_LANES=1 / 0 forces it): each 2304-byte piece further
// permuted lane-major (nvfp4_tiled.cuh nvfp4_lane_in_piece), so that a lane of the tensor-core GEMV copies
// and reads its 72 bytes of a step as 4 x 16 + 8 contiguous bytes, in the order it uses them, instead of
// 5 cp.async vectors of the piece and 22 shared loads at computed offsets. Why try it: on the H200 the tiled
// GEMV's own work holds it (H100 session 49, the weights in L2: 4096x14336 10.55 us checked, 9.44 clean,
// where L2 reads the bytes in 6.4-7.6), and a register-fed prototype of this layout (tools/gemv_direct_proto.cuh)
// ran 8.88 us there -- the same bits. The slab kernel and the dequantiser read it through the same map,
// word by word.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/nvfp4_tiled.cuh"

namespace ft::cuda {

// Whether a matrix of `rows` rows of k NVFP4 elements, row_bytes apart, has a tiled layout (what
// the readers take): rows a multiple of 16, k of 256, rows exactly k / 64 * 36 bytes (no padding).
bool nvfp4_tile_ok(int64_t rows, int64_t k, int64_t row_bytes);
// Whether nvfp4_tile can repack rows of row_bytes on this GPU: a tile in one block's shared memory
// (227 KB on the H200, ~99 KB on RTX 30/40/50 -- Llama-8B's down projection, 129 KB a tile, stays
// row-major there).
bool nvfp4_tile_fits(int64_t row_bytes);

// Repacks w (device, row-major, nvfp4_tile_ok and nvfp4_tile_fits) into the tiled layout in place,
// on stream s; lanes: its lane-major variant (nvfp4_tiled.cuh nvfp4_lane_in_piece).
void nvfp4_tile(uint8_t* w, int64_t rows, int64_t row_bytes, cudaStream_t s, bool lanes = false);

// Matrices tiled by nvfp4_tile so far (tests check that a session tiled).
int64_t nvfp4_tile_launches();

// The host twin: dst (rows x row_bytes) = src tiled, byte by byte through nvfp4_tiled_offset (tests).
void nvfp4_tile_host(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, bool lanes = false);

}  // namespace ft::cuda
