// A timeline of the decode chain as it really runs (a diagnostic, built only with CMake
// -DFT_CHAIN_TRACE=ON): every kernel's pdl_wait() (cuda/pdl.cuh) has its block 0 / thread 0 read
// %globaltimer before and after griddepcontrol.wait and append {the two times, grid and block
// sizes} to a device buffer. Kernel i's wait returns when kernel i - 1 has completed, so
// consecutive records give each launch's span from its predecessor's completion to its own, inside
// the CUDA graph with PDL's overlap -- what ncu (kernels serialised) and FT_DEBUG_SKIP (one link
// left out at a time) cannot show. `FT_CHAIN_TRACE=PREFIX ft bench ...` writes the last repetition's
// decode steps of each tg test to PREFIX.<test>.csv; bench/chain_trace.py sums them per position in
// a layer. Off (the default build), pdl_wait() is the bare instruction and none of this exists on
// the device. On, it costs nothing measurable (H200 session 23 call 7: tg128 499.36 Qwen3-30B-A3B /
// 458.82 Llama-8B traced, against 487-493 / 454-462 untraced in the session's other calls); the
// record's atomic is taken before the wait (a first form that took it after cost 13% / 7%).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ft::cuda {

// The device buffer: a header (uint32 records taken, uint32 capacity, padding), then the records.
inline constexpr size_t kChainTraceHeader = 16;
struct ChainTraceRec {
  unsigned long long t0, t1;  // %globaltimer before and after the kernel's wait
  uint32_t grid, block, pad0, pad1;
};
static_assert(sizeof(ChainTraceRec) == 32, "the buffer's layout");

// This build records (FT_CHAIN_TRACE) and the FT_CHAIN_TRACE environment variable names a prefix.
bool chain_trace_wanted();
// pdl.cuh's per-translation-unit registrar: set(buffer) points that unit's kernels at the buffer
// (nullptr: stop recording).
void chain_trace_register(void (*set)(void* buffer));
// Starts recording into a buffer of `capacity` records (kept across calls; the count reset).
void chain_trace_start(uint32_t capacity = 1u << 20);
// Stops recording and writes "seq,grid,block,t_start_ns,t_wait_ns" rows to path (throws on I/O
// errors); returns the records written.
int64_t chain_trace_dump(const std::string& path);

}  // namespace ft::cuda
