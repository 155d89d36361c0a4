// Deterministic, platform-independent random numbers for test models
// (std::normal_distribution is implementation-defined, so not used).
#pragma once

#include <cmath>
#include <cstdint>

namespace ft::testgen {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}

  // splitmix64
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits.
  float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller, one value per call; computed in double for portability
  // of the rounding, then narrowed).
  float normal() {
    const double u1 = (static_cast<double>(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    const double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  // An independent stream derived from this seed and a label (e.g. a tensor name hash).
  static uint64_t mix(uint64_t seed, uint64_t label) {
    Rng r(seed ^ (label * 0xD1B54A32D192ED03ull));
    return r.next_u64();
  }

 private:
  uint64_t state_;
};

inline uint64_t hash_name(const char* s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001b3ull;
  return h;
}

}  // namespace ft::testgen
