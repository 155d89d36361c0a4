// Hopper's bulk L2 prefetch: one instruction streams a 16-byte aligned span of global memory
// into L2 (fire and forget: no registers, no shared memory, no completion to wait for), so a
// kernel can start the next GEMV's weights on their way while latency-bound small kernels
// leave the HBM idle. A hint only: nothing computed depends on it, and below sm_90 it compiles
// to nothing. Device side of cuda/l2_prefetch.h, plus the chunk plan both sides share (the
// host test checks it without a GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/l2_prefetch.h"

namespace ft::cuda {

// Streams [p, p + bytes) into L2; p 16-byte aligned, bytes a positive multiple of 16.
__device__ __forceinline__ void l2_prefetch_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// The 16-byte aligned part of [p, p + bytes) (inward: never a byte outside the span, whose
// neighbours may be unmapped), streamed in pieces of at most kL2Chunk bytes by one thread.
__device__ __forceinline__ void l2_prefetch_span(const void* p, int64_t bytes) {
  const uint64_t b = (reinterpret_cast<uint64_t>(p) + 15) & ~uint64_t{15};
  const uint64_t e = (reinterpret_cast<uint64_t>(p) + static_cast<uint64_t>(bytes > 0 ? bytes : 0)) & ~uint64_t{15};
  for (uint64_t a = b; a < e; a += kL2Chunk) {
    const uint64_t n = e - a < static_cast<uint64_t>(kL2Chunk) ? e - a : static_cast<uint64_t>(kL2Chunk);
    l2_prefetch_bulk(reinterpret_cast<const void*>(a), static_cast<uint32_t>(n));
  }
}

// Chunk c of the plan r (chunks of kL2Chunk bytes, range after range): its address and bytes;
// false past the last chunk. Host-callable: tests/cuda/l2_prefetch_test.cpp checks that the
// chunks tile the aligned ranges exactly.
__host__ __device__ inline bool l2_chunk(const L2Plan& r, int64_t c, uint64_t& addr, uint32_t& bytes) {
  for (int i = 0; i < r.n; ++i) {
    if (c >= r.first[i + 1]) continue;
    addr = r.begin[i] + static_cast<uint64_t>(c - r.first[i]) * static_cast<uint64_t>(kL2Chunk);
    const uint64_t left = r.end[i] - addr;
    bytes = static_cast<uint32_t>(left < static_cast<uint64_t>(kL2Chunk) ? left : static_cast<uint64_t>(kL2Chunk));
    return true;
  }
  return false;
}

}  // namespace ft::cuda
