// ggml tensor types as stored in GGUF files (ids are the on-disk values) and
// their block geometry. See shared/spec/gguf-format.md §2.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ft {

enum class GgmlType : int32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

inline constexpr int32_t kGgmlTypeCount = 43;

struct GgmlTypeTraits {
  std::string_view name;  // ggml_type_name, e.g. "q4_K"
  int64_t block_size;     // elements per block (0 = removed id)
  int64_t type_size;      // bytes per block
};

// Traits for an on-disk id; nullopt for ids outside [0, 43) or removed ids.
std::optional<GgmlTypeTraits> ggml_type_traits(int32_t id);
// Traits for a known type (never fails).
const GgmlTypeTraits& traits(GgmlType t);
inline std::string_view type_name(GgmlType t) { return traits(t).name; }
// Parse "nvfp4", "q8_0", "bf16", ... (case-insensitive).
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of one row of n elements (n must be a multiple of the block size).
inline int64_t row_bytes(GgmlType t, int64_t n) {
  const auto& tr = traits(t);
  return n / tr.block_size * tr.type_size;
}

}  // namespace ft
