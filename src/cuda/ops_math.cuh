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

// silu(x) = x / (1 + exp(-x)), as engine::silu.
FT_OPS_HD inline float silu(float x) { return div_rn(x, add_rn(1.0f, exp_f32(-x))); }

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

}  // namespace ft::cuda::ops
