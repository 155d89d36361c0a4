#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace ft {

MappedFile MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }  // the mapping keeps the file alive
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(f.size_), PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) fail("{}: cannot mmap {} bytes: {}", path, f.size_, std::strerror(errno));
    f.data_ = static_cast<uint8_t*>(m);
  }
  return f;
}

MappedFile MappedFile::anonymous(uint64_t size, std::string name) {
  MappedFile f;
  f.path_ = std::move(name);
  f.size_ = size;
  f.writable_ = true;
  if (size > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fail("{}: cannot map {} bytes of memory: {}", f.path_, size, std::strerror(errno));
    f.data_ = static_cast<uint8_t*>(m);
  }
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      writable_(std::exchange(o.writable_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    writable_ = std::exchange(o.writable_, false);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_) ::munmap(data_, static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

uint8_t* MappedFile::mutable_data() {
  if (!writable_) fail("{}: internal: the mapping is read-only", path_);
  return data_;
}

void MappedFile::seal() {
  if (writable_ && data_ && ::mprotect(data_, static_cast<size_t>(size_), PROT_READ) != 0)
    fail("{}: cannot make the mapping read-only: {}", path_, std::strerror(errno));
  writable_ = false;
}

}  // namespace ft
