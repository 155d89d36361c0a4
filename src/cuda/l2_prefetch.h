// Weights into L2 ahead of the kernel that reads them (sm_90+: cp.async.bulk.prefetch.L2).
// Decode reads every weight once a step behind a chain of dependent launches, and the chain, not
// HBM, sets the pace: a Llama-8B step reads at ~42% of HBM bandwidth, a Qwen3-30B-A3B step at
// ~19% (benches/h200.md). Weights depend on nothing the chain computes, so a side branch can pull
// the next projection's bytes into L2 while the chain is busy with the launches before it; the
// GEMV then finds them there. The prefetch reads only: results are the same bits with or without.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ft::cuda {

// Whether l2_prefetch does anything here (device 0 is sm_90 or newer: bulk_copy_supported()).
bool l2_prefetch_supported();

// Enqueues on s a kernel that asks L2 for bytes of p (16-byte aligned; the tail past the last
// multiple of 16 is left out) in pieces of chunk bytes, one piece a thread; returns at once.
void l2_prefetch(const void* p, size_t bytes, size_t chunk, cudaStream_t s);

}  // namespace ft::cuda
