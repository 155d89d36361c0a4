// Activation rows that exercise the quantisers' corner cases: random magnitudes, an
// all-zero block, blocks whose x * id lands exactly on .5 (ties), a lone spike, tiny
// values (fp16 d subnormal), and equal-magnitude opposite-sign maxima (Q8_K keeps the first).
#pragma once

#include <cmath>
#include <random>
#include <vector>

namespace ft::quant::testing {

// n must be a multiple of 256; returns n values.
inline std::vector<float> act_rows_with_corners(int64_t n, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> half(-254, 254);
  for (int64_t b = 0; b < n / 32; ++b) {
    float* v = x.data() + 32 * b;
    switch (b % 8) {
      case 0:  // all zero
        for (int i = 0; i < 32; ++i) v[i] = 0.0f;
        break;
      case 1:  // amax 127 -> id = 1, values on multiples of 0.5: ties everywhere
        for (int i = 0; i < 32; ++i) v[i] = 0.5f * static_cast<float>(half(rng));
        v[7] = (b % 16 == 1) ? 127.0f : -127.0f;
        break;
      case 2:  // one spike
        for (int i = 0; i < 32; ++i) v[i] = 1e-3f * unit(rng);
        v[static_cast<int>(b) % 32] = 50.0f;
        break;
      case 3:  // tiny: fp16 d underflows to a subnormal
        for (int i = 0; i < 32; ++i) v[i] = 1e-6f * unit(rng);
        break;
      case 4:  // equal magnitude, opposite signs
        for (int i = 0; i < 32; ++i) v[i] = unit(rng);
        v[3] = 2.0f;
        v[20] = -2.0f;
        break;
      default: {
        const float s = std::ldexp(1.0f, static_cast<int>(b % 13) - 6);
        for (int i = 0; i < 32; ++i) v[i] = s * unit(rng);
      }
    }
  }
  return x;
}

}  // namespace ft::quant::testing
