// The GPU side of the CPU expert executor's data path (the cpu and hybrid MoE backends): one
// small kernel writes a decode step's MoE input straight into mapped pinned host memory (no
// D2H copy node), another adds the CPU's result (read from mapped memory) into x.
//
// Task layout in host memory (MoeCpuTask, followed by the arrays, 16-byte aligned):
//   header {n_tok, n_used, layer}; h[max_tok][n_embd] fp32; ids[max_tok*n_used] int32;
//   wts[max_tok*n_used] fp32.
// The CPU writes its result as out[n_tok][n_embd] fp32 into a second mapped buffer.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ft::cuda {

struct MoeCpuTaskHeader {
  int32_t n_tok;
  int32_t n_used;
  int32_t layer;
  int32_t pad;
};

// Offsets of the arrays inside a task buffer for max_tok tokens.
struct MoeCpuTaskLayout {
  int64_t n_embd = 0, max_tok = 0, n_used = 0;
  size_t h_off = 0, ids_off = 0, wts_off = 0, bytes = 0;
};
MoeCpuTaskLayout moe_cpu_task_layout(int64_t n_embd, int64_t max_tok, int64_t n_used);

// Writes {n_tok, n_used, layer}, h[n_tok][n_embd] (ldh apart), ids and wts ([n_tok*n_used];
// ids < 0 are routes the CPU skips) into the task at `task` (device view of mapped memory).
void moe_cpu_pack(const MoeCpuTaskLayout& lay, const float* h, int64_t ldh, int64_t n_tok, const int32_t* ids,
                  const float* wts, int n_used, int32_t layer, uint8_t* task, cudaStream_t s);

// The next MoE layer's guessed routes for the CPU's warm-up (gpu/moe_cpu_backend.cpp), in
// mapped memory: {tag, n, ids[n]}. moe_cpu_hint copies the guesses ids[0..n) there, fences
// them to the system, then sets tag = layer: a CPU that reads the tag (acquire) reads these
// ids. With slot_of (that layer's row of the slot cache's table; hybrid) only the guesses
// without a GPU slot are kept, and of those the first `skip` dropped (the speculative fetch
// books the first k non-resident guesses into slots: they will not run on the CPU).
struct MoeCpuHintHeader {
  int32_t tag;
  int32_t n;
};
void moe_cpu_hint(const int32_t* ids, int n, int32_t layer, uint8_t* hint, cudaStream_t s,
                  const int32_t* slot_of = nullptr, int skip = 0);

// x[t][i] += out[t][i] for t < n_tok, i < n_embd (out: device view of mapped memory).
void moe_cpu_add(const float* out, int64_t n_tok, int64_t n_embd, float* x, int64_t ldx, cudaStream_t s);

}  // namespace ft::cuda
