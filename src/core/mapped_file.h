// A whole file mapped read-only (RAII), or anonymous memory that a producer fills and then
// seals read-only (a GGUF built in memory from a Hugging Face checkpoint). The GGUF and the
// safetensors readers both map their files through it.
#pragma once

#include <cstdint>
#include <string>

namespace ft {

class MappedFile {
 public:
  // Maps `path` read-only (MAP_SHARED: pages come from the page cache and cost nothing
  // beyond it). An empty file maps to data() == nullptr, size() == 0. Throws ft::Error
  // "PATH: cannot open: ...", "PATH: not a regular file", "PATH: cannot mmap N bytes: ...".
  static MappedFile open(const std::string& path);
  // `size` zero bytes of private anonymous memory, writable through mutable_data() until
  // seal(). Pages never written are never allocated (reading them maps the zero page).
  // `name` is what errors about the mapping say.
  static MappedFile anonymous(uint64_t size, std::string name);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Writable bytes of an anonymous mapping before seal(); throws otherwise.
  uint8_t* mutable_data();
  // Makes an anonymous mapping read-only.
  void seal();

 private:
  void release();

  std::string path_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool writable_ = false;
};

}  // namespace ft
