// Bounds-checked little-endian reader over a byte buffer, used by the GGUF parser.
// Every read checks the remaining size first and throws ft::Error naming the file,
// what was being read (`what`, e.g. "metadata key 'general.name'"), the offset and the
// file size, so a truncated or corrupt file can never make us read past the buffer.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ft::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host (GGUF files are little-endian)");

// A key or tensor name as shown in an error message: control bytes escaped (a file must
// not be able to write terminal escapes through our errors) and long names shortened.
inline std::string display_name(std::string_view s) {
  constexpr size_t kMaxShown = 128;
  std::string out;
  for (size_t k = 0; k < s.size() && k < kMaxShown; ++k) {
    const unsigned char ch = static_cast<unsigned char>(s[k]);
    if (ch < 0x20 || ch == 0x7f || ch == '\\') {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (s.size() > kMaxShown) out += fmt::format("...({} bytes)", s.size());
  return out;
}

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Context for truncation errors; set before reading each record.
  std::string what = "header";

  void need(uint64_t n) const {
    if (n > size_ - pos_)
      fail("{}: truncated file: {} needs {} bytes at offset {}, file has {}", path_, what, n, pos_,
           size_);
  }

  template <class T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // Returns a view into the buffer (no copy) of n bytes.
  std::string_view bytes(uint64_t n) {
    need(n);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

  // GGUF string: u64 length then bytes. llama.cpp refuses lengths above 1 GiB.
  std::string_view string() {
    const uint64_t n = read<uint64_t>();
    if (n > kMaxStringLength)
      fail("{}: {} has a string of {} bytes at offset {}, expected at most {} (1 GiB)", path_, what,
           n, pos_ - 8, kMaxStringLength);
    return bytes(n);
  }

  static constexpr uint64_t kMaxStringLength = uint64_t{1} << 30;

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

}  // namespace ft::gguf
