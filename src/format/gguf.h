// GGUF v2/v3 reader: mmap-based, validates everything llama.cpp validates (and a
// little more), and never reads outside the mapping. Layout: shared/spec/gguf-format.md.
//
// Every error is an ft::Error whose message starts with the file name and names
// the key, tensor or offset that is wrong and what was expected.
//
// Where we differ from llama.cpp's reader (tests/oracle/gguf_compat_test.cpp checks the
// rest is the same verdict): nested arrays are accepted (depth <= 8); tensor names with a
// NUL byte and overflowing shapes are refused even when llama.cpp would take them; every
// tensor's data must lie inside the file (llama.cpp's model loader check), but the
// padding after the last tensor may be missing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "format/ggml_type.h"

namespace ft::gguf {

enum class ValueType : int32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars live in u/i/f/b/str according to `type`
// (unsigned ints in u, signed ints in i, floats in f); arrays in `arr`, whose
// elements all have type `elem_type` (nested arrays are allowed by this reader).
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string str;
  ValueType elem_type = ValueType::UINT8;
  std::vector<Value> arr;

  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
  // Human-readable rendering (arrays abbreviated after `max_items`).
  std::string to_string(size_t max_items = 8) const;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;            // relative to the data section
  uint64_t nbytes = 0;            // exact data size (without padding)
  // Points into the mapping, or (a Hugging Face directory loaded directly) into the
  // checkpoint's own files: read a tensor through `data`, never through base() + offset.
  const uint8_t* data = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t row_bytes() const { return ft::row_bytes(type, ne[0]); }
  std::string shape_string() const;  // "[4096, 14336]"
};

class File {
 public:
  // Maps and validates `path`. Throws ft::Error on any problem.
  static std::unique_ptr<File> open(const std::string& path);
  // Parses a caller-owned buffer (no copy; it must outlive the File). `name` is used in errors.
  static std::unique_ptr<File> from_memory(const uint8_t* data, size_t size, std::string name);
  // A GGUF built in memory (hf::open_hf_as_gguf): `image` holds the header and the tensors
  // written into it; a non-null external[i] is tensor i's data elsewhere (the same bytes,
  // in memory that `owner` keeps mapped), and its range in `image` is never written or read.
  // external is empty or has one entry per tensor. The File is named image.path().
  static std::unique_ptr<File> from_image(MappedFile image, const std::vector<const uint8_t*>& external,
                                          std::shared_ptr<const void> owner);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  const uint8_t* base() const { return base_; }
  // Gives back this process's pages of tensor bytes already copied to where they run
  // (MappedFile::drop_pages); a no-op for files held in memory. Returns the bytes given back.
  uint64_t drop_pages(const void* p, uint64_t n) const { return map_.drop_pages(p, n); }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. A present key of the wrong type (or an integer out of range)
  // throws "FILE: metadata key KEY has type T, expected ...". Integer getters accept any
  // integer type whose value fits; float getters accept FLOAT32/FLOAT64 and integers.
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Arrays of the named element kind (integers/floats converted, range-checked).
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  // Required variants: throw "FILE: missing metadata key KEY" when absent.
  uint64_t require_uint(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::string require_string(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  MappedFile map_;                    // owned mapping (empty for from_memory)
  std::shared_ptr<const void> owner_;  // keeps external tensor data mapped (from_image)
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<std::string_view, size_t>> kv_index_;      // sorted by key
  std::vector<std::pair<std::string_view, size_t>> tensor_index_;  // sorted by name
};

}  // namespace ft::gguf
