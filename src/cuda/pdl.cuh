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

#include <cstdint>
#include <utility>

#include "cuda/check.h"

#if defined(FT_CHAIN_TRACE) && FT_CHAIN_TRACE && defined(__CUDACC__)
#include "cuda/chain_trace.h"
#define FT_CHAIN_TRACE_ON 1
// The decode-chain timeline's device side (cuda/chain_trace.h; -DFT_CHAIN_TRACE=ON builds only):
// each translation unit's own buffer pointer (no relocatable device code: a __device__ variable
// is per unit), set through the registrar from the host.
namespace ft::cuda::chain_trace_tu {
namespace {
__device__ uint8_t* g_buf = nullptr;
void set_buf(void* b) { FT_CUDA_CHECK(cudaMemcpyToSymbol(g_buf, &b, sizeof b)); }
struct Registrar {
  Registrar() { chain_trace_register(&set_buf); }
};
[[maybe_unused]] const Registrar registrar;
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Before the wait: the record's index (the atomic's round trip overlaps the wait, and kernels reach
// it in launch order: a kernel starts only once its predecessor's blocks have all passed their
// waits) and the start time. After it: the stores only, fire and forget.
__device__ __forceinline__ unsigned reserve(uint8_t* buf) { return atomicAdd(reinterpret_cast<unsigned*>(buf), 1u); }
__device__ __forceinline__ unsigned capacity(const uint8_t* buf) { return reinterpret_cast<const unsigned*>(buf)[1]; }
__device__ __forceinline__ void record(uint8_t* buf, unsigned i, unsigned cap, unsigned long long t0) {
  const unsigned long long t1 = now_ns();
  if (i >= cap) return;
  ChainTraceRec* r = reinterpret_cast<ChainTraceRec*>(buf + kChainTraceHeader) + i;
  r->t0 = t0;
  r->t1 = t1;
  r->grid = gridDim.x * gridDim.y * gridDim.z;
  r->block = blockDim.x * blockDim.y * blockDim.z;
}
}  // namespace
}  // namespace ft::cuda::chain_trace_tu
#endif

namespace ft::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#ifdef FT_CHAIN_TRACE_ON
  uint8_t* tr = nullptr;
  unsigned long long t0 = 0;
  unsigned idx = 0, cap = 0;
  if ((threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0) {
    tr = chain_trace_tu::g_buf;
    if (tr != nullptr) idx = chain_trace_tu::reserve(tr), cap = chain_trace_tu::capacity(tr);
    t0 = chain_trace_tu::now_ns();
  }
#endif
  asm volatile("griddepcontrol.wait;" ::: "memory");
#ifdef FT_CHAIN_TRACE_ON
  if (tr != nullptr) chain_trace_tu::record(tr, idx, cap, t0);
#endif
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

// Launches kernel with programmatic stream serialization where pdl_enabled(): it may start while the
// launch before it on s is still running, and waits for it at its pdl_wait().
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  cudaLaunchAttribute attr[1];
  unsigned n = 0;
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  FT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace ft::cuda
