// The last-block ticket of split kernels (attention decode, batch attention): the blocks of one
// output each write their partials, then take a ticket; the one that comes last merges them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ft::cuda {

// Whether this block is the last of n to arrive at ticket t (then it also resets t to zero
// for the next call). The fences make every block's partials visible to the last one.
__device__ __forceinline__ bool take_last(uint32_t* t, int64_t n, int* s_last) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool last = atomicAdd(t, 1u) == static_cast<uint32_t>(n - 1);
    if (last) atomicExch(t, 0u);
    *s_last = last;
  }
  __syncthreads();
  const bool last = *s_last;
  if (last) __threadfence();
  return last;
}

}  // namespace ft::cuda
