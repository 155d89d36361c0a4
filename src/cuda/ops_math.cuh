// Scalar float arithmetic shared by the small kernel families (embed, norm, rope, glu,
// moe_route, sample) and their host-side tests: host- and device-callable.
//
// nvcc contracts a*b+c into one FMA by default; the CPU twins (compiled without -mfma) round
// the product first. Every device operation whose rounding matters therefore goes through
// the *_rn intrinsics, which are never contracted, so kernels round exactly like the CPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define FT_OPS_HD __host__ __device__
#else
#define FT_OPS_HD
#endif

namespace ft::cuda::ops {

FT_OPS_HD inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FT_OPS_HD inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FT_OPS_HD inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
FT_OPS_HD inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// expf as the CPU twins call it (std::exp on a float). glibc's expf is correctly rounded
// except within ~0.001 ulp of a rounding boundary; CUDA's expf is off by up to 2 ulp. On the
// device we evaluate exp in double (1 ulp of a double) and round once to float, which is the
// correctly rounded result except in double-rounding cases: the two agree on all but a tiny
// fraction of inputs, and by at most 1 ulp there (the GPU tests allow exactly that).
FT_OPS_HD inline float exp_f32(float x) {
#ifdef __CUDA_ARCH__
  return static_cast<float>(exp(static_cast<double>(x)));
#else
  return std::exp(x);
#endif
}

FT_OPS_HD inline float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

FT_OPS_HD inline uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
FT_OPS_HD inline float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// The CPU engine's exp_v (engine/vec_math.h: ggml's vector expf, rounded step for step as
// llama.cpp's CPU backend rounds it), the same operations in the same order: every step is a
// correctly rounded IEEE operation, so the bits are the CPU's.
FT_OPS_HD inline float exp_v(float x) {
  const float shift = 0x1.8p23f;
  const float z = fma_rn(x, 0x1.715476p+0f, shift);
  const float n = sub_rn(z, shift);
  const float b = fma_rn(-n, 0x1.7f7d1cp-20f, fma_rn(-n, 0x1.62e4p-1f, x));
  const uint32_t e = float_bits(z) << 23;
  const float k = bits_float(e + float_bits(1.0f));
  const float u = mul_rn(b, b);
  const float j = fma_rn(fma_rn(fma_rn(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma_rn(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, mul_rn(0x1.ffffecp-1f, b));
  if (!(fabsf(n) > 126.0f)) return fma_rn(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = bits_float(g + 0x7f000000u);
  const float s2 = bits_float(e - g);
  if (fabsf(n) > 192.0f) return mul_rn(s1, s1);
  return mul_rn(fma_rn(s2, j, s2), s1);
}

// silu(x) = x / (1 + exp_v(-x)), as engine::silu (vec_math.h).
FT_OPS_HD inline float silu(float x) { return div_rn(x, add_rn(1.0f, exp_v(sub_rn(0.0f, x)))); }


}  // namespace ft::cuda::ops
