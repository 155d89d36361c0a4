// Exact scalar conversions between fp32 and the 16-bit float formats.
// fp16 -> fp32 and bf16 -> fp32 are exact (subnormals, inf, NaN included);
// fp32 -> fp16 / bf16 round to nearest even, as ggml does.
#pragma once

#include <cstdint>
#include <cstring>

namespace ft {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return bits_to_f32(sign);
    // subnormal: man * 2^-24
    float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) {
    // inf, or NaN made quiet with its payload kept, as F16C's vcvtph2ps does
    return bits_to_f32(sign | 0x7f800000 | (man != 0 ? 0x00400000u : 0u) | (man << 13));
  }
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (a >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (a < 0x38800000) {
    // subnormal or zero in fp16: round(|f| * 2^24) with ties to even
    const float v = bits_to_f32(a) * 16777216.0f;  // exact scaling
    uint32_t r = static_cast<uint32_t>(v);
    const float frac = v - static_cast<float>(r);
    if (frac > 0.5f || (frac == 0.5f && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent, round mantissa 23 -> 10 bits, ties to even
  a += 0xc8000fff + ((a >> 13) & 1);  // (-112 << 23) + rounding bias
  return static_cast<uint16_t>(sign | (a >> 13));
}

}  // namespace ft
