// The L2 priority of weight streams (sm_80+ cache hints). A decode step reads every weight once
// (Llama-8B ~5 GB) through a 50-60 MB L2; under the default policy those lines push out what the
// step does reuse -- activations, norm weights, the KV of short contexts, the kernels' own code --
// so small kernels of the chain start on HBM misses (norm_fold.cuh measured a norm weight's miss).
// With FT_WEIGHT_EVICT_FIRST=1 the weight-streaming copies (tiled / bulk-copy / lean NVFP4 GEMVs,
// the BF16/F16 head) carry an L2::evict_first policy, so L2 evicts them before anything else.
// Set per source file by the CMake option FT_CUDA_WEIGHT_EVICT_FIRST; 0 keeps the plain forms.
// CUDA only.
#pragma once

#include <cstdint>

#ifndef FT_WEIGHT_EVICT_FIRST
#define FT_WEIGHT_EVICT_FIRST 0
#endif

namespace ft::cuda {

#if FT_WEIGHT_EVICT_FIRST && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FT_WEIGHT_HINT 1
// Not volatile: the same policy every call, so the compiler may make it once a kernel.
__device__ __forceinline__ uint64_t weight_policy() {
  uint64_t p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
#else
#define FT_WEIGHT_HINT 0
#endif

// cp_async16 (cp_async.cuh) for weight bytes.
__device__ __forceinline__ void cp_async16_weight(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
#if FT_WEIGHT_HINT
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
               "l"(weight_policy())
               : "memory");
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#endif
}

// A 16-byte read-once load that skips L1 (the register-direct GEMVs' weights).
__device__ __forceinline__ uint4 ld_weight16(const void* p) {
  uint4 v;
#if FT_WEIGHT_HINT
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(weight_policy()));
#else
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
#endif
  return v;
}

// bulk_copy.cuh's bulk_g2s for weight bytes (sm_90+).
__device__ __forceinline__ void bulk_g2s_weight(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
#if FT_WEIGHT_HINT
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          d),
      "l"(src), "r"(bytes), "r"(b), "l"(weight_policy())
      : "memory");
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
               "l"(src), "r"(bytes), "r"(b)
               : "memory");
#endif
#endif
}

}  // namespace ft::cuda
