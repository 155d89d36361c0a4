// Writes safetensors files (test fixtures, tools): header JSON padded with spaces to a
// multiple of 8 bytes, tensors in the given order, data contiguous.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hf/safetensors.h"

namespace ft::hf {

struct StOut {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // numel * dtype_size bytes
};

std::vector<uint8_t> safetensors_bytes(const std::vector<StOut>& tensors);
void write_safetensors(const std::string& path, const std::vector<StOut>& tensors);  // throws ft::Error

}  // namespace ft::hf
