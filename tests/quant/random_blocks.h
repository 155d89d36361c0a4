// Random but well-formed weight rows for any type with a reference decoder: random
// payload bytes, with the scale fields rewritten to finite values of moderate size so
// that sums stay finite and comparisons are meaningful.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "format/ggml_type.h"

namespace ft::quant::testing {

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// One row of n elements of type t (n a multiple of the block size).
inline std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng) {
  const auto& tr = traits(t);
  std::vector<uint8_t> b(static_cast<size_t>(row_bytes(t, n)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> pos(0.001f, 0.05f);
  const int64_t nb = n / tr.block_size;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = b.data() + i * tr.type_size;
    switch (t) {
      case GgmlType::F32: {
        const float v = unit(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::F16:
        put_f16(blk, unit(rng) * 4.0f);
        break;
      case GgmlType::BF16: {
        const uint16_t h = f32_to_bf16(unit(rng) * 4.0f);
        std::memcpy(blk, &h, 2);
        break;
      }
      case GgmlType::Q8_0:
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::IQ3_XXS:
        put_f16(blk, pos(rng));
        break;
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        put_f16(blk, pos(rng));
        put_f16(blk + 2, -pos(rng) * 8.0f);
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_f16(blk, pos(rng) * 0.1f);
        put_f16(blk + 2, pos(rng) * 0.1f);
        break;
      case GgmlType::Q6_K:
        put_f16(blk + 208, pos(rng) * 0.05f);
        break;
      case GgmlType::MXFP4:
        blk[0] = static_cast<uint8_t>(118 + byte(rng) % 16);  // 2^-10 .. 2^5
        break;
      case GgmlType::NVFP4:
        for (int s = 0; s < 4; ++s) blk[s] = static_cast<uint8_t>(byte(rng) & 0x7F);  // 0x7F (NaN -> 0) included
        break;
      default:
        break;
    }
  }
  return b;
}

// The types with a reference decoder ("first" types of the spec).
inline std::vector<GgmlType> first_types() {
  return {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,    GgmlType::Q4_0,
          GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,    GgmlType::Q5_K,
          GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4, GgmlType::IQ3_XXS};
}

// n_rows such rows back to back (a matrix of row_bytes(t, n) bytes a row).
inline std::vector<uint8_t> random_rows(GgmlType t, int64_t n_rows, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> m;
  m.reserve(static_cast<size_t>(n_rows * row_bytes(t, n)));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<uint8_t> row = random_row(t, n, rng);
    m.insert(m.end(), row.begin(), row.end());
  }
  return m;
}

}  // namespace ft::quant::testing
