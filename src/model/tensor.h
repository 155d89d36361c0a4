// A weight tensor as it lies in the mapped GGUF file (zero-copy): data pointer, type,
// ggml shape (ne[0] contiguous). An empty Tensor (data == nullptr) is an absent optional.
#pragma once

#include <cstdint>
#include <string>

#include "format/ggml_type.h"

namespace ft::model {

struct Tensor {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  const char* name = "";  // points into the gguf::File's tensor table

  bool empty() const { return data == nullptr; }
  explicit operator bool() const { return data != nullptr; }
  int64_t row_bytes() const { return ft::row_bytes(type, ne[0]); }
  // Bytes of one [ne0, ne1] matrix (one expert of a 3-D expert tensor).
  int64_t matrix_bytes() const { return row_bytes() * ne[1]; }
  const float* f32() const { return reinterpret_cast<const float*>(data); }
};

// A dense projection weight with its NVFP4 second-level scale (1 when the file has none).
struct ScaledTensor {
  Tensor w;
  float scale = 1.0f;
  bool has_scale = false;
  explicit operator bool() const { return !w.empty(); }
};

// A 3-D expert tensor {k, rows, n_expert} with its optional per-expert scale
// ({n_expert} F32 in the mapping; nullptr means 1 for every expert).
struct ExpertTensor {
  Tensor w;
  const float* scale = nullptr;
  explicit operator bool() const { return !w.empty(); }
  float scale_of(int64_t e) const { return scale ? scale[e] : 1.0f; }
  const uint8_t* expert(int64_t e) const { return w.data + e * w.matrix_bytes(); }
};

}  // namespace ft::model
