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
    f.file_backed_ = true;
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
      writable_(std::exchange(o.writable_, false)),
      file_backed_(std::exchange(o.file_backed_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    writable_ = std::exchange(o.writable_, false);
    file_backed_ = std::exchange(o.file_backed_, false);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_) ::munmap(data_, static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
  file_backed_ = false;
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

uint64_t MappedFile::drop_pages(const void* p, uint64_t n) const {
  if (!file_backed_ || !data_ || !p || n == 0) return 0;
  const auto lo = reinterpret_cast<uintptr_t>(data_), hi = lo + size_;
  auto a = reinterpret_cast<uintptr_t>(p), b = a + n;
  if (a < lo || b > hi) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  a = (a + page - 1) / page * page;
  b = b / page * page;
  if (b <= a) return 0;
  // Advice only: a failure leaves the pages mapped, which costs memory, not correctness.
  if (::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED) != 0) return 0;
  return b - a;
}

}  // namespace ft
