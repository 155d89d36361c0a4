// GGUF v3 writer (little-endian), byte-for-byte the layout gguf-py writes:
// header, KVs in insertion order, tensor infos with running padded offsets,
// zero padding to the alignment, tensor data each padded to the alignment.
// Used by the test-model generator, tests and tools; llama.cpp loads its files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/ggml_type.h"
#include "format/gguf.h"

namespace ft::gguf {

class Writer {
 public:
  explicit Writer(uint32_t alignment = 32);

  // Metadata, kept in insertion order. Setting an existing key replaces its value in place.
  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_u32_array(const std::string& key, const std::vector<uint32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_bool_array(const std::string& key, const std::vector<bool>& v);

  // Tensors in data order. `ne` has 1..4 dims in ggml order (ne[0] contiguous).
  // The data size must equal the tensor's nbytes.
  void add_tensor(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                  std::vector<uint8_t> data);
  // Streaming variant for big files: `fill(dst, nbytes)` is called once while writing.
  void add_tensor_stream(const std::string& name, GgmlType type, const std::vector<int64_t>& ne,
                         std::function<void(uint8_t* dst, uint64_t nbytes)> fill);

  void write(const std::string& path) const;  // throws ft::Error
  std::vector<uint8_t> to_bytes() const;

  // Where write() puts everything, for tools that fill the tensor data themselves at
  // computed offsets (ft-bigmodel writes tens of GB from many threads): the bytes before
  // the data (header, KVs, tensor infos, padding), each tensor's absolute file offset in
  // add order, and the file size. Tensor data and its padding are not produced.
  struct Layout {
    std::vector<uint8_t> head;
    std::vector<uint64_t> offsets;
    uint64_t file_size = 0;
  };
  Layout layout() const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    std::vector<uint8_t> data;
    std::function<void(uint8_t*, uint64_t)> fill;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace ft::gguf
