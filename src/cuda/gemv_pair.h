// Two grouped decode GEMVs (gemv.h) that differ only in their weights, output and scale-bank
// column -- the MoE expert gate and up projections of the same slots -- in one launch where
// the expert tensor-core kernel takes them (NVFP4 on the integer path, k 2048, no combine:
// gemv_mma_experts.cu), else as gemv(a) then gemv(b). Either way every output equals what
// gemv(a) and gemv(b) write, bit for bit: the kernel keeps the slab kernel's float order.
// The one-launch form runs only where that kernel is routed (kNvfp4XmmaRouted: off since H200
// run 11, where the pair took 11.76 us against two slab launches' 11.26; FT_GEMV_NVFP4_XMMA=1
// turns it on, FT_GEMV_NVFP4_PAIR=0 off again), and ignores the process-wide kernel overrides
// of gemv_tuning.h (tests, benchmarks).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/gemv.h"

namespace ft::cuda {

void gemv_pair(const GemvArgs& a, const GemvArgs& b, cudaStream_t stream = nullptr);

}  // namespace ft::cuda
