// SwiGLU of one element, the arithmetic of glu.h: round(silu(g) * u) (silu with exp in double,
// ops_math.cuh). Shared by the SwiGLU kernel and the GEMV tail that writes the same values
// (GemvArgs::glu_h).
#pragma once

#include "cuda/ops_math.cuh"
#include "cuda/round.cuh"

namespace ft::cuda {

__device__ __forceinline__ float swiglu1(float g, float u, Round r) { return round_to(r, ops::mul_rn(ops::silu(g), u)); }

}  // namespace ft::cuda
