// Two grouped decode GEMVs (gemv.h) that differ only in their weights, output and scale-bank
// column -- the MoE expert gate and up projections of the same slots -- in one launch where
// the expert tensor-core kernel takes them (NVFP4 on the integer path, k 2048, no combine:
// gemv_mma_experts.cu), else as gemv(a) then gemv(b). Either way every output equals what
// gemv(a) and gemv(b) write, bit for bit: the kernel keeps the slab kernel's float order.
// The one-launch form ignores the process-wide kernel overrides of gemv_tuning.h (tests,
// benchmarks); FT_GEMV_NVFP4_XMMA=0 or FT_GEMV_NVFP4_PAIR=0 turns it off.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/gemv.h"

namespace ft::cuda {

void gemv_pair(const GemvArgs& a, const GemvArgs& b, cudaStream_t stream = nullptr);

}  // namespace ft::cuda
