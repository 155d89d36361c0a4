#include "moe_cpu/host_bw.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"

namespace ft::moe_cpu {

float read_sum_ref(const float* p, size_t n) {
  float a[8] = {};
  for (size_t i = 0; i < n; i += 64)
    for (int j = 0; j < 8; ++j)
      for (int l = 0; l < 8; ++l) a[l] += p[i + 8 * j + l];
  float r = 0.0f;
  for (float v : a) r += v;
  return r;
}

float read_sum(const float* p, size_t n) {
  if (isa_supported(Isa::kAvx2)) return detail::read_sum_avx2(p, n);
  return read_sum_ref(p, n);
}

HostReadResult host_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  bytes = bytes / 4096 * 4096;
  if (bytes == 0 || reps < 1) fail("host read bandwidth: need at least 4 KiB and one repetition");
  void* mem = std::aligned_alloc(4096, bytes);
  if (mem == nullptr) fail("host read bandwidth: cannot allocate {} MiB", bytes >> 20);
  const size_t n = bytes / sizeof(float);
  auto* f = static_cast<float*>(mem);
  // Chunks of 1 MiB handed out dynamically (a late worker costs one chunk, not a share).
  const int nt = pool.size();
  const int64_t chunk = (1 << 20) / sizeof(float);
  const int64_t n_chunks = static_cast<int64_t>(n / chunk);
  const size_t n_used = static_cast<size_t>(n_chunks) * chunk;
  if (n_chunks == 0) fail("host read bandwidth: need at least 1 MiB");
  // Touch every page from the pool, so first-touch places pages near their readers.
  pool.parallel_for(n_chunks, 1, [&](int64_t a, int64_t b, int) {
    for (size_t i = a * chunk; i < static_cast<size_t>(b * chunk); ++i) f[i] = 1.0f / static_cast<float>(1 + (i & 1023));
  });
  std::vector<double> part(static_cast<size_t>(nt));
  HostReadResult r;
  double sum_gbs = 0.0;
  for (int rep = -1; rep < reps; ++rep) {
    std::fill(part.begin(), part.end(), 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n_chunks, 1, [&](int64_t a, int64_t b, int tid) {
      part[static_cast<size_t>(tid)] += read_sum(f + a * chunk, static_cast<size_t>((b - a) * chunk));
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (double v : part) r.checksum += v;
    if (rep < 0) continue;  // warm-up
    const double gbs = static_cast<double>(n_used * sizeof(float)) / s * 1e-9;
    r.gbs = std::max(r.gbs, gbs);
    sum_gbs += gbs;
  }
  r.mean_gbs = sum_gbs / reps;
  std::free(mem);
  return r;
}

}  // namespace ft::moe_cpu
