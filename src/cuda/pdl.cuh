// Programmatic dependent launch (Hopper+): a kernel launched with launch_pdl() may start
// while the kernel before it in the stream is still finishing, so its launch latency hides
// behind that kernel's tail instead of adding to it. Decode runs ~13 small kernels per
// layer, 600+ per token; each dependent launch otherwise costs a gap of about a microsecond.
//
// Contract of a kernel launched through launch_pdl():
//   - it calls pdl_wait() before its first global-memory access that could race with an
//     earlier kernel (reading what it writes, or writing what it reads); pdl_wait() returns
//     once the earlier kernels in the stream have completed and their writes are visible;
//   - it may call pdl_trigger() once its blocks no longer need the SM exclusively: the next
//     PDL kernel's blocks are then scheduled early and park in their own pdl_wait(). Every
//     kernel here triggers right after its wait: the dependent can only launch once all of
//     this grid's blocks have started (a block that has not started cannot trigger), so the
//     parked blocks never take SM space this grid still needs.
// A kernel launched without the attribute sees pdl_wait()/pdl_trigger() as no-ops, and on
// GPUs before sm_90 both compile to nothing and launch_pdl() is a plain launch.
// Consequence: when this kernel starts, every kernel two or more launches back has completed
// (the one right before has passed its wait, so the one before that is done and visible). Data
// written that far back -- weights, the MoE ids under the down projection, the residual under
// wo / down -- may be read before pdl_wait(); the caller says so (cuda::GemvArgs::ids_early,
// y_early). H200 session 14: the down experts' first loads before the wait, Qwen3-30B-A3B
// decode +5.6%.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.h"

namespace ft::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches use the attribute: device 0 is sm_90 or newer and FT_CUDA_PDL is not 0
// (the switch exists to measure the gain and to rule PDL out when chasing a race).
bool pdl_enabled();

template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  FT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace ft::cuda
