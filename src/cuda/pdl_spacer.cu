#include "cuda/pdl_spacer.h"

#include "cuda/pdl.cuh"

namespace ft::cuda {
namespace {

__global__ void pdl_spacer_kernel() {
  pdl_wait();
  pdl_trigger();
}

}  // namespace

void pdl_spacer(cudaStream_t s) { launch_pdl(pdl_spacer_kernel, dim3(1), dim3(32), 0, s); }

}  // namespace ft::cuda
