// The routed experts of a MoE model in host memory, for the offload-family backends
// (offload, cpu, hybrid): per layer, each expert tensor (gate, up or the merged gate_up, down)
// in the file's 3-D layout [n_expert][rows][row bytes] and the [n_expert][4] fp32 scale bank
// (gate, up, down, 1), all in page-locked memory that is also mapped into the device's
// address space (mapped | portable), so
//   * GPU kernels read experts straight over PCIe (cuda/moe_cache.h's gather: no host-side
//     memcpy, hence capturable), and async copies run at full pinned bandwidth;
//   * the CPU expert executor reads the same bytes (the `host` pointers).
//
// Filled from the mmap'ed GGUF layer by layer (one allocation per layer, then the copy), with
// the progress callback; the mapping's pages are clean page cache the kernel may drop, so
// there is no second full copy of the file in RAM. Types without GPU kernels are stored as
// F32 rows (as DeviceWeights uploads them), so a slot holds exactly what the fused backend's
// arena holds.
//
// Pages: cudaHostAlloc (4 KiB pages, which THP never backs) by default. FT_MOE_HOST_PAGES=huge
// maps each layer's block 2 MiB-aligned, advised MADV_HUGEPAGE (moe_cpu/huge_pages.h),
// faulted in by several threads, then cudaHostRegister'ed (mapped, portable); a failed
// registration falls back to cudaHostAlloc with a log line, and the pages THP gave are
// logged at load. Session 8 measured it on the H200 host (all 15.6 GB on THP): no gain for
// the cpu backend, so the page walks over 15.5 GB of banks are not the footprint's cost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/ggml_type.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct HostExpertTensor {
  GgmlType type = GgmlType::F32;
  uint8_t* host = nullptr;        // expert 0 (host pointer; pinned)
  const uint8_t* dev = nullptr;   // the same bytes as the device sees them (mapped)
  int64_t row_bytes = 0;
  int64_t expert_bytes = 0;       // row_bytes * rows
  int64_t rows = 0;               // per expert
  int64_t k = 0;
  explicit operator bool() const { return rows > 0; }
};

struct HostLayerBank {
  HostExpertTensor gate, up, gate_up, down;
  float* scales = nullptr;             // host [n_expert][4] = (gate, up, down, 1)
  const float* scales_dev = nullptr;   // mapped
  int64_t n_expert = 0, n_embd = 0, n_ff = 0;
  bool gelu = false;  // GeGLU (tanh GELU) experts (gemma4) instead of SwiGLU
  bool moe() const { return n_expert > 0; }
  // Bytes of one expert over all its tensors (scale row excluded).
  int64_t expert_bytes() const {
    return gate.expert_bytes + up.expert_bytes + gate_up.expert_bytes + down.expert_bytes;
  }
};

class HostBanks {
 public:
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  // Throws ft::Error naming the tensor for a type neither the GPU kernels nor the reference
  // dequantiser handle, and when pinned memory cannot be allocated (names the bytes).
  HostBanks(const model::Model& m, const Progress& progress);
  ~HostBanks();
  HostBanks(const HostBanks&) = delete;
  HostBanks& operator=(const HostBanks&) = delete;

  std::vector<HostLayerBank> layers;  // [n_layer]; dense layers have n_expert 0
  size_t bytes() const { return bytes_; }  // pinned bytes held

  // Bytes the banks of model m would take (what the experts take on the GPU), without
  // allocating: the fused-vs-offload decision uses it.
  static size_t expert_bytes(const model::Model& m);

 private:
  struct Block {
    void* p = nullptr;
    size_t mapped = 0;  // > 0: map_huge'd and registered (unregister + unmap); 0: cudaHostAlloc'd
  };
  // FT_MOE_HOST_PAGES: pinned (default) or huge; throws ft::Error naming the variable otherwise.
  static bool huge_pages_requested();
  Block alloc_block(size_t size, const std::string& file, size_t layer);

  bool use_huge_ = false;
  std::string huge_fallback_;  // why registration failed, if it did
  std::vector<Block> blocks_;
  size_t bytes_ = 0;
};

}  // namespace ft::gpu
