// A one-warp launch that only waits for the launch before it and triggers the next (cuda/pdl.cuh):
// a link with no work, so the launch after it is released only once everything before has completed.
// A diagnostic (gpu/debug_skip.h FT_DEBUG_SPACER): H200 session 31 found Llama-8B's decode 3.7 us a
// layer slower with the attention norm (one CTA) left out than with it.
#pragma once

#include <cuda_runtime.h>

namespace ft::cuda {

void pdl_spacer(cudaStream_t s);

}  // namespace ft::cuda
