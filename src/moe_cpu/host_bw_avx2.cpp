#include <immintrin.h>

#include "moe_cpu/host_bw.h"

namespace ft::moe_cpu::detail {

// Eight independent 256-bit accumulators (two cache lines per iteration) so the adds never
// limit the loads.
float read_sum_avx2(const float* p, size_t n) {
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (size_t i = 0; i < n; i += 64)
    for (int j = 0; j < 8; ++j) a[j] = _mm256_add_ps(a[j], _mm256_loadu_ps(p + i + 8 * j));
  __m256 s = a[0];
  for (int j = 1; j < 8; ++j) s = _mm256_add_ps(s, a[j]);
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  float r = 0.0f;
  for (float v : t) r += v;
  return r;
}

}  // namespace ft::moe_cpu::detail
