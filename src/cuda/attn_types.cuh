// fp32 -> KV-cache element conversion of kv_store and the tensor-core kernel (device side).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ft::cuda::attn_detail {

// fp32 -> cache element, round to nearest even (as engine::KvCache::store).
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

}  // namespace ft::cuda::attn_detail
