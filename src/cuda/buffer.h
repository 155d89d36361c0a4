// RAII device memory: one cudaMalloc at construction, cudaFree at destruction; move-only.
// Sized at start-up by the engine (no allocation per token).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/check.h"

namespace ft::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) FT_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_ != nullptr) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  // Synchronous copies (set-up and tests; the decode path uses streams).
  void upload(const void* src, size_t n, size_t offset = 0) {
    FT_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice));
  }
  void download(void* dst, size_t n, size_t offset = 0) const {
    FT_CUDA_CHECK(cudaMemcpy(dst, static_cast<const uint8_t*>(ptr_) + offset, n, cudaMemcpyDeviceToHost));
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of a host vector.
template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  if (n > 0) b.download(v.data(), n * sizeof(T));
  return v;
}

}  // namespace ft::cuda
