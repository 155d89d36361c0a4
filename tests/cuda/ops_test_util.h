// Helpers of the small-kernel GPU tests (tests/cuda/ops_*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/device.h"
#include "cuda/round.h"
#include "engine/exec.h"

#define FT_OPS_REQUIRE_GPU()                                             \
  do {                                                                   \
    if (!::ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

namespace ft::cuda::ops_test {

inline constexpr uint32_t kPoison = 0x7FC0DEADu;  // a NaN no kernel computes

inline uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
inline float poison() {
  float v;
  std::memcpy(&v, &kPoison, 4);
  return v;
}

struct RoundCase {
  Round gpu;
  engine::ActType cpu;
  const char* name;
};
inline const RoundCase kRounds[] = {{Round::kNone, engine::ActType::kF32, "f32"},
                                    {Round::kBF16, engine::ActType::kBF16, "bf16"},
                                    {Round::kF16, engine::ActType::kF16, "f16"}};

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Distance in units in the last place between two finite floats of the same sign (or 0).
inline int64_t ulp_diff(float a, float b) {
  auto key = [](float f) {
    const int64_t u = bits(f);
    return (u & 0x80000000) ? -(u & 0x7FFFFFFF) : u;
  };
  return std::llabs(key(a) - key(b));
}

// Counts of a GPU-vs-CPU comparison: bit-identical, within max_ulp, and worse.
struct Diff {
  int64_t exact = 0, near = 0, bad = 0;
  std::string first_bad;
};
inline Diff compare(const std::vector<float>& got, const std::vector<float>& want, int64_t max_ulp) {
  Diff d;
  for (size_t i = 0; i < want.size(); ++i) {
    if (bits(got[i]) == bits(want[i])) {
      ++d.exact;
    } else if (std::isfinite(got[i]) && std::isfinite(want[i]) && ulp_diff(got[i], want[i]) <= max_ulp) {
      ++d.near;
    } else {
      if (d.bad == 0)
        d.first_bad = "index " + std::to_string(i) + ": gpu " + std::to_string(got[i]) + " cpu " + std::to_string(want[i]);
      ++d.bad;
    }
  }
  return d;
}

}  // namespace ft::cuda::ops_test

namespace ft::cuda::ops_test {

// Like compare(), but "near" means within one unit in the last place of the rounded type
// (fp32: max_f32_ulp units), for kernels whose exp may differ from glibc's by 1 ulp.
inline Diff compare_rounded(const std::vector<float>& got, const std::vector<float>& want, Round r,
                            int64_t max_f32_ulp = 2) {
  Diff d;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got[i], w = want[i];
    if (bits(g) == bits(w)) {
      ++d.exact;
      continue;
    }
    bool ok = std::isfinite(g) && std::isfinite(w);
    if (ok) {
      if (r == Round::kNone) {
        ok = ulp_diff(g, w) <= max_f32_ulp;
      } else {
        int e = 0;
        std::frexp(w, &e);  // |w| in [2^(e-1), 2^e)
        const int mant = r == Round::kBF16 ? 8 : 11;
        double unit = std::ldexp(1.0, e - mant);
        if (r == Round::kF16) unit = std::max(unit, std::ldexp(1.0, -24));
        ok = std::fabs(static_cast<double>(g) - w) <= unit;
      }
    }
    if (ok) {
      ++d.near;
    } else {
      if (d.bad == 0)
        d.first_bad = "index " + std::to_string(i) + ": gpu " + std::to_string(g) + " cpu " + std::to_string(w);
      ++d.bad;
    }
  }
  return d;
}

}  // namespace ft::cuda::ops_test
