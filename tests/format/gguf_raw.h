// Hand-assembled GGUF bytes for tests that need files our Writer refuses to make
// (broken counts, offsets, ids). Little-endian, layout per shared/spec/gguf-format.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "format/gguf.h"

namespace ft::gguf::test {

struct Raw {
  std::vector<uint8_t> b;

  template <class T>
  Raw& put(T v) {
    const size_t n = b.size();
    b.resize(n + sizeof(T));
    std::memcpy(b.data() + n, &v, sizeof(T));
    return *this;
  }
  Raw& bytes(std::string_view s) {
    const size_t n = b.size();
    b.resize(n + s.size());
    if (!s.empty()) std::memcpy(b.data() + n, s.data(), s.size());
    return *this;
  }
  Raw& str(std::string_view s) {
    put<uint64_t>(s.size());
    return bytes(s);
  }
  Raw& header(int64_t n_tensors, int64_t n_kv, uint32_t version = 3) {
    bytes("GGUF");
    put<uint32_t>(version);
    put<int64_t>(n_tensors);
    return put<int64_t>(n_kv);
  }
  Raw& kv_u32(std::string_view key, uint32_t v) {
    str(key);
    put<int32_t>(4);
    return put<uint32_t>(v);
  }
  Raw& kv_str(std::string_view key, std::string_view v) {
    str(key);
    put<int32_t>(8);
    return str(v);
  }
  // Tensor info record; `type` is the raw ggml id.
  Raw& tensor(std::string_view name, const std::vector<int64_t>& ne, int32_t type, uint64_t offset) {
    str(name);
    put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) put<int64_t>(d);
    put<int32_t>(type);
    return put<uint64_t>(offset);
  }
  Raw& pad(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

// Parses `bytes` as "bad.gguf"; returns the error message, or "" if it parsed.
inline std::string parse_error(const std::vector<uint8_t>& bytes, size_t size = SIZE_MAX) {
  try {
    File::from_memory(bytes.data(), std::min(size, bytes.size()), "bad.gguf");
  } catch (const ft::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ft::gguf::test
