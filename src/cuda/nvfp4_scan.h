// Whether an NVFP4 matrix's UE4M3 block scales avoid the NaN codes 0x7F and 0xFF (decoded as 0 and
// 480 by every reader): GemvArgs::scales_clean, which lets the tensor-core GEMVs decode scales
// without the codes' fix-up (gemv_q8_formats.cuh nvfp4_scales2). Real releases never store those
// codes (a quantiser writes 0x00..0x7E), so every projection of a sane file is clean; a file that has
// them keeps the checked decoder, never wrong sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

// Scans the scale words of `rows` rows of k NVFP4 elements (device w, row_bytes apart; row-major, or
// tiled -- nvfp4_tiled.h keeps each 36-byte block whole and 36-aligned, rows unpadded) on stream s and
// waits for the answer: true when no scale byte is 0x7F or 0xFF. Load time only (one sync a call).
bool nvfp4_scales_clean(const uint8_t* w, int64_t rows, int64_t row_bytes, int64_t k, cudaStream_t s = nullptr);

// The host twin (tests): the same answer from host bytes.
bool nvfp4_scales_clean_host(const uint8_t* w, int64_t rows, int64_t row_bytes, int64_t k);

}  // namespace ft::cuda
