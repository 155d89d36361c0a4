// Safetensors reader (Hugging Face checkpoints): one file, or a sharded checkpoint
// directory through model.safetensors.index.json. Files are mmap'ed; tensors are
// zero-copy views. Layout: u64 little-endian header length N, N bytes of JSON
// {"__metadata__": {...}, "<name>": {"dtype": "BF16", "shape": [...],
// "data_offsets": [begin, end]}}, then the data (offsets relative to its start).
//
// Every malformed input (truncated header, bad JSON, unknown dtype, offsets past the
// end, a byte count that does not match dtype x shape, a missing shard) is an
// ft::Error naming the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace ft::hf {

enum class Dtype { kBF16, kF16, kF32, kF64, kU8, kI8, kI16, kI32, kI64, kBool, kF8E4M3 };
std::string_view dtype_name(Dtype d);
int dtype_size(Dtype d);

struct StTensor {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;      // row-major, outermost first (as PyTorch)
  const uint8_t* data = nullptr;   // into the mapping
  uint64_t nbytes = 0;
  const std::string* file = nullptr;  // for error messages

  int64_t numel() const;
  std::string shape_string() const;  // "[256, 64]"
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws ft::Error.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses a caller-owned buffer (tests).
  static std::unique_ptr<SafetensorsFile> from_memory(const uint8_t* data, size_t size,
                                                      std::string name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  MappedFile map_;  // empty for from_memory
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// All tensors of a checkpoint directory: model.safetensors.index.json (weight_map ->
// shards; every listed shard must exist and hold the tensors mapped to it), else every
// *.safetensors file in the directory. A tensor name found twice is an error.
class Checkpoint {
 public:
  static std::unique_ptr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const StTensor* find(std::string_view name) const;
  const StTensor& require(std::string_view name) const;  // throws naming the checkpoint
  // Every tensor, sorted by name.
  std::vector<const StTensor*> tensors() const;
  uint64_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StTensor*, std::less<>> index_;
};

// Element i of a float tensor (BF16, F16, F32, F64) as float; throws for other dtypes.
float element_f32(const StTensor& t, int64_t i);
// n elements from `first` converted to float (BF16/F16/F32/F64).
void to_f32(const StTensor& t, int64_t first, int64_t n, float* dst);
bool is_float(Dtype d);

}  // namespace ft::hf
