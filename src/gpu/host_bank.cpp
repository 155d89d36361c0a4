#include "gpu/host_bank.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "engine/moe.h"
#include "model/model.h"
#include "moe_cpu/huge_pages.h"
#include "quant/dequant.h"

namespace ft::gpu {
namespace {

// Row bytes of a tensor as the GPU holds it: the file's, or F32 rows for a type without
// GPU kernels (weights.cpp's rule).
int64_t gpu_row_bytes(const model::Tensor& t) {
  if (cuda::gemv_supported(t.type)) return t.row_bytes();
  if (!quant::has_ref_dequant(t.type))
    fail("tensor '{}' has type {}, which the CUDA backend cannot run or dequantise", t.name, type_name(t.type));
  return t.ne[0] * 4;
}

int64_t tensor_bytes(const model::ExpertTensor& t) {
  if (!t) return 0;
  return gpu_row_bytes(t.w) * t.w.ne[1] * t.w.ne[2];
}

// Round-up so every tensor of a layer block starts 256-byte aligned (16-byte vector loads
// of the gather need 16).
int64_t align_up(int64_t n) { return (n + 255) / 256 * 256; }

}  // namespace

size_t HostBanks::expert_bytes(const model::Model& m) {
  size_t total = 0;
  for (const model::Layer& L : m.layers) {
    if (!L.is_moe()) continue;
    const engine::ExpertWeights& ew = L.experts;
    total += static_cast<size_t>(tensor_bytes(ew.gate) + tensor_bytes(ew.up) + tensor_bytes(ew.gate_up) +
                                 tensor_bytes(ew.down));
  }
  return total;
}

HostBanks::HostBanks(const model::Model& m, const Progress& progress) : use_huge_(huge_pages_requested()) {
  layers.resize(m.layers.size());
  const uint64_t total = expert_bytes(m);
  uint64_t done = 0;
  for (size_t il = 0; il < m.layers.size(); ++il) {
    const model::Layer& L = m.layers[il];
    if (!L.is_moe()) continue;
    const engine::ExpertWeights& ew = L.experts;
    HostLayerBank& B = layers[il];
    B.n_expert = ew.n_expert;
    B.n_embd = ew.n_embd;
    B.n_ff = ew.n_ff;
    B.gelu = ew.glu == engine::Glu::kGelu;
    const model::ExpertTensor* src[4] = {&ew.gate, &ew.up, &ew.gate_up, &ew.down};
    HostExpertTensor* dst[4] = {&B.gate, &B.up, &B.gate_up, &B.down};
    int64_t off[4] = {0, 0, 0, 0}, size = 0;
    for (int k = 0; k < 4; ++k) {
      if (!*src[k]) continue;
      off[k] = size;
      size = align_up(size + tensor_bytes(*src[k]));
    }
    const int64_t scale_off = size;
    size += align_up(B.n_expert * 4 * static_cast<int64_t>(sizeof(float)));
    Block blk = alloc_block(static_cast<size_t>(size), m.file->path(), il);
    auto* base = static_cast<uint8_t*>(blk.p);
    void* dev_base = nullptr;
    FT_CUDA_CHECK(cudaHostGetDevicePointer(&dev_base, blk.p, 0));
    blocks_.push_back(blk);
    bytes_ += static_cast<size_t>(size);
    auto* dbase = static_cast<const uint8_t*>(dev_base);
    for (int k = 0; k < 4; ++k) {
      if (!*src[k]) continue;
      const model::Tensor& t = src[k]->w;
      HostExpertTensor& d = *dst[k];
      const bool native = cuda::gemv_supported(t.type);
      d.type = native ? t.type : GgmlType::F32;
      d.row_bytes = gpu_row_bytes(t);
      d.rows = t.ne[1];
      d.k = t.ne[0];
      d.expert_bytes = d.row_bytes * d.rows;
      d.host = base + off[k];
      d.dev = dbase + off[k];
      const int64_t n_rows = t.ne[1] * t.ne[2];
      if (native) {
        // 64 MiB pieces so the progress line moves, each copied by several threads: one
        // thread faulting in the file mapping reaches a few GB/s, a 17 GB model wants more.
        constexpr int64_t kChunk = int64_t{64} << 20;
        const int64_t bytes = d.row_bytes * n_rows;
        const int n_thr = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 8u));
        for (int64_t b = 0; b < bytes; b += kChunk) {
          const int64_t n = std::min(kChunk, bytes - b);
          const int64_t part = (n + n_thr - 1) / n_thr;
          std::vector<std::thread> pool;
          for (int i = 1; i < n_thr && i * part < n; ++i)
            pool.emplace_back([&, i] {
              std::memcpy(d.host + b + i * part, t.data + b + i * part, static_cast<size_t>(std::min(part, n - i * part)));
            });
          std::memcpy(d.host + b, t.data + b, static_cast<size_t>(std::min(part, n)));
          for (std::thread& th : pool) th.join();
          m.file->drop_pages(t.data + b, static_cast<uint64_t>(n));  // the bank holds these bytes now
          done += static_cast<uint64_t>(n);
          if (progress) progress(done, total);
        }
      } else {
        auto* f = reinterpret_cast<float*>(d.host);
        for (int64_t r = 0; r < n_rows; ++r)
          quant::dequantize_row_ref(t.type, t.data + r * t.row_bytes(), f + r * d.k, d.k);
        done += static_cast<uint64_t>(d.row_bytes * n_rows);
        if (progress) progress(done, total);
      }
    }
    B.scales = reinterpret_cast<float*>(base + scale_off);
    B.scales_dev = reinterpret_cast<const float*>(dbase + scale_off);
    for (int64_t x = 0; x < B.n_expert; ++x) {
      B.scales[4 * x + 0] = ew.gate.scale_of(x);
      B.scales[4 * x + 1] = ew.up.scale_of(x);
      B.scales[4 * x + 2] = ew.down.scale_of(x);
      B.scales[4 * x + 3] = 1.0f;
    }
  }
  if (progress) progress(total, total);
  size_t huge = 0, mapped = 0;
  for (const Block& b : blocks_)
    if (b.mapped > 0) huge += moe_cpu::anon_huge_bytes(b.p, b.mapped), mapped += b.mapped;
  if (mapped > 0)
    log::info("host banks: {:.0f} of {:.0f} MiB on 2 MiB pages (mapped, then cudaHostRegister'ed; {}){}",
              static_cast<double>(huge) / (1 << 20), static_cast<double>(mapped) / (1 << 20), moe_cpu::thp_settings(),
              huge < mapped / 2 ? ": THP did not back them, FT_MOE_HOST_PAGES=pinned is the same" : "");
  else
    log::info("host banks: cudaHostAlloc'd ({}; 4 KiB pages)",
              huge_fallback_.empty() ? "FT_MOE_HOST_PAGES=huge maps them on 2 MiB pages" : huge_fallback_);
}

HostBanks::Block HostBanks::alloc_block(size_t size, const std::string& file, size_t layer) {
  Block b;
  if (use_huge_) {
    b.p = moe_cpu::map_huge(size, &b.mapped);
    // Fault the pages in now, in parallel (huge ones where THP takes the advice), so the
    // registration below pins them as they are instead of faulting them one by one.
    moe_cpu::touch_pages(b.p, size, static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 8u)));
    const cudaError_t e = cudaHostRegister(b.p, b.mapped, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaSuccess) return b;
    cudaGetLastError();
    moe_cpu::unmap_huge(b.p, b.mapped);
    huge_fallback_ = fmt::format("cudaHostRegister of {:.1f} MiB failed: {}", static_cast<double>(size) / (1 << 20),
                                 cudaGetErrorString(e));
    log::info("host banks: {}; layer {} on: cudaHostAlloc (4 KiB pages)", huge_fallback_, layer);
    use_huge_ = false;
    // Layers already registered stay so; the rest are cudaHostAlloc'd.
  }
  b = Block{};
  const cudaError_t e = cudaHostAlloc(&b.p, size, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("{}: cannot pin {:.1f} MiB of host memory for the experts of layer {} ({}); {:.1f} GiB pinned so far", file,
         static_cast<double>(size) / (1 << 20), layer, cudaGetErrorString(e), static_cast<double>(bytes_) / (1 << 30));
  }
  return b;
}

bool HostBanks::huge_pages_requested() {
  // cudaHostAlloc by default: on the H200 host the cpu backend's decode did not move with the
  // banks on 2 MiB pages (session 8: every bank byte on THP, tg32 58.2 / 61.8 huge vs 62.9
  // cudaHostAlloc in one call; the executor's GEMV at the 6144-expert footprint 65-69 GB/s
  // either way), so the page walks are not what the footprint costs.
  const char* e = std::getenv("FT_MOE_HOST_PAGES");
  if (e == nullptr || std::strcmp(e, "pinned") == 0) return false;
  if (std::strcmp(e, "huge") == 0) return true;
  fail("FT_MOE_HOST_PAGES={}: expected huge or pinned", e);
}

HostBanks::~HostBanks() {
  for (const Block& b : blocks_) {
    if (b.mapped > 0) {
      cudaHostUnregister(b.p);
      moe_cpu::unmap_huge(b.p, b.mapped);
    } else {
      cudaFreeHost(b.p);
    }
  }
}

}  // namespace ft::gpu
