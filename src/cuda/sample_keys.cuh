// Sort keys of the GPU sampler (sample.cu), host- and device-callable so that
// tests/cuda/ops_sample_keys_test.cpp checks the order on the host. A key packs a logit and
// its token id so that ascending keys are the CPU sampler's candidate order: logit
// descending, then id ascending (engine/sampler.cpp by_logit). -0 is stored as +0 (the CPU
// comparator sees them equal, so only the id may order them).
#pragma once

#include <cstdint>

#include "cuda/ops_math.cuh"

namespace ft::cuda::sample_detail {

// Monotone map float -> uint32: a < b (as floats, no NaN) <=> ordered(a) < ordered(b).
FT_OPS_HD inline uint32_t ordered(float f) {
  const uint32_t u = ops::float_bits(f == 0.0f ? 0.0f : f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
FT_OPS_HD inline float unordered(uint32_t o) { return ops::bits_float((o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o); }

// Bits of a token id: enough for n_vocab - 1.
FT_OPS_HD inline int id_bits(int64_t n_vocab) {
  int b = 1;
  while ((int64_t{1} << b) < n_vocab) ++b;
  return b;
}

FT_OPS_HD inline uint64_t make_key(float logit, int32_t id, int bits) {
  return (static_cast<uint64_t>(~ordered(logit)) << bits) | static_cast<uint64_t>(static_cast<uint32_t>(id));
}
FT_OPS_HD inline float key_logit(uint64_t k, int bits) { return unordered(~static_cast<uint32_t>(k >> bits)); }
FT_OPS_HD inline int32_t key_id(uint64_t k, int bits) {
  return static_cast<int32_t>(k & ((uint64_t{1} << bits) - 1));
}

// The CPU's repetition penalty on one logit.
FT_OPS_HD inline float penalise(float l, float penalty) {
  return l > 0 ? ops::div_rn(l, penalty) : ops::mul_rn(l, penalty);
}

}  // namespace ft::cuda::sample_detail
