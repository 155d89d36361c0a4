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
  // Gives back this process's pages of [p, p + n) (the whole pages inside it) once their
  // bytes have been copied elsewhere, e.g. into pinned expert banks or GPU memory: the
  // model's RSS then counts each byte once. A file mapping only (MAP_SHARED, read-only):
  // the bytes stay readable, a later read faults them in again from the page cache. A no-op
  // for anonymous memory (dropping would zero it) and for ranges outside the mapping.
  // Returns the bytes given back.
  uint64_t drop_pages(const void* p, uint64_t n) const;

 private:
  void release();

  std::string path_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool writable_ = false;
  bool file_backed_ = false;
};

}  // namespace ft
