// CTA `part` of `n_parts` streams its share of an L2Ahead's ranges into L2 (cuda/l2_ahead.h): thread 0
// issues 16-byte-aligned slices of at most 64 KB by cp.async.bulk.prefetch.L2 (sm_90+; a no-op below).
#pragma once

#include <cstdint>

#include "cuda/l2_ahead.h"

namespace ft::cuda {

__device__ __forceinline__ void l2_ahead_share(const L2Ahead& a, int64_t part, int64_t n_parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x != 0) return;
  constexpr int64_t kMax = 64 << 10;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t n = a.bytes[j] & ~int64_t{15};
    if (n <= 0) continue;
    const int64_t per = ((n + n_parts - 1) / n_parts + 15) & ~int64_t{15};
    const int64_t end = (part + 1) * per < n ? (part + 1) * per : n;
    for (int64_t o = part * per; o < end; o += kMax) {
      const unsigned len = static_cast<unsigned>(end - o < kMax ? end - o : kMax);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(static_cast<const uint8_t*>(a.p[j]) + o),
                   "r"(len)
                   : "memory");
    }
  }
#else
  (void)a, (void)part, (void)n_parts;
#endif
}

}  // namespace ft::cuda
