// NVFP4 layout conversion between ModelOpt checkpoints and ggml's block_nvfp4
// (shared/spec/nvfp4-scales.md §2.3), lossless both ways.
//
// ModelOpt: `weight` u8 [rows, k/2], low nibble = element 2i, high nibble = element 2i+1;
//           `weight_scale` E4M3 [rows, k/16].
// ggml:     per 64 elements a 36-byte block: 4 scale bytes (E4M3 bits, sign stripped),
//           then per 16-group 8 bytes q[j] = code[j] | code[j+8] << 4.
#pragma once

#include <cstdint>

namespace ft::hf {

// rows x k (k % 64 == 0) ModelOpt bytes -> rows * (k/64) * 36 ggml bytes at dst.
void nvfp4_repack_modelopt(const uint8_t* weight, const uint8_t* weight_scale, int64_t rows, int64_t k,
                           uint8_t* dst);
// The inverse (test fixtures): ggml blocks -> ModelOpt weight [rows, k/2] and scale [rows, k/16].
void nvfp4_unpack_to_modelopt(const uint8_t* blocks, int64_t rows, int64_t k, uint8_t* weight,
                              uint8_t* weight_scale);

}  // namespace ft::hf
