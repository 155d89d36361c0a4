// A diagnostic: one thread writes %globaltimer (ns since an arbitrary epoch, GPU clock) to
// a device word, in stream order, so a captured decode step can be timed segment by segment
// (gpu/moe_hybrid.cpp's FT_MOE_HYBRID_CLOCK). Each stamp is one more launch (~2 us in a
// graph): use the differences between segments, not the absolute step time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ft::cuda {

void stamp(uint64_t* at, cudaStream_t s);

}  // namespace ft::cuda
