// Device side of cuda/round.h (CUDA translation units only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/round.h"

namespace ft::cuda {

__device__ __forceinline__ float round_to(Round r, float v) {
  if (r == Round::kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  if (r == Round::kF16) return __half2float(__float2half_rn(v));
  return v;
}

}  // namespace ft::cuda
