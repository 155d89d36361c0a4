// ft-bench-gemm-cuda: prefill GEMM (src/cuda/gemm.h) throughput at the shapes of the
// prefill targets: Llama-3.1-8B dense projections and Qwen3-30B-A3B experts.
//
//   ft-bench-gemm-cuda [--tokens N] [--iters N] [--types nvfp4,bf16,...] [--prec bf16|f16|f32]
//
// Dense: every shape x type x route (dequant + cuBLAS, fused kernel); grouped: 128 experts,
// 8 used per token, gate|up through `order` and down in sorted order, plus moe_sort itself.
// Weights are random bytes from a device hash (one copy; the large ones exceed L2, so they
// stream from HBM as in a real prefill). Each case runs twice untimed, then --iters times
// between CUDA events; the mean per call is printed with TFLOP/s = 2 * k * rows * tokens / t.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemm.h"

using namespace ft;
using namespace ft::cuda;

namespace {

__global__ void fill_random(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85EBCA77u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    p[i] = h;
  }
}

// Activations in [-1, 1).
__global__ void fill_unit(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    p[i] = static_cast<float>(h & 0xFFFFFF) / 8388608.0f - 1.0f;
  }
}

DeviceBuffer random_bytes(size_t bytes, uint32_t seed) {
  DeviceBuffer b((bytes + 3) / 4 * 4);
  fill_random<<<1024, 256>>>(b.as<uint32_t>(), b.bytes() / 4, seed);
  FT_CUDA_CHECK_LAUNCH();
  return b;
}

DeviceBuffer random_floats(size_t n, uint32_t seed) {
  DeviceBuffer b(n * 4);
  fill_unit<<<1024, 256>>>(b.as<float>(), n, seed);
  FT_CUDA_CHECK_LAUNCH();
  return b;
}

template <class Fn>
double time_us(int iters, Fn&& fn) {
  fn();
  fn();
  cudaEvent_t a, b;
  FT_CUDA_CHECK(cudaEventCreate(&a));
  FT_CUDA_CHECK(cudaEventCreate(&b));
  FT_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) fn();
  FT_CUDA_CHECK(cudaEventRecord(b));
  FT_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  FT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1000.0 * ms / iters;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

struct Dense {
  const char* name;
  int64_t k, rows;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t n_tok = 512;
  int iters = 10;
  std::string types = "nvfp4,bf16";
  GemmPrec prec = GemmPrec::kBF16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--tokens") n_tok = std::atoll(v), ++i;
    else if (a == "--iters") iters = std::atoi(v), ++i;
    else if (a == "--types") types = v, ++i;
    else if (a == "--prec") {
      const std::string p = v;
      prec = p == "f32" ? GemmPrec::kF32 : p == "f16" ? GemmPrec::kF16 : GemmPrec::kBF16;
      ++i;
    } else {
      std::fprintf(stderr, "usage: ft-bench-gemm-cuda [--tokens N] [--iters N] [--types a,b] [--prec bf16|f16|f32]\n");
      return 2;
    }
  }
  if (!has_device()) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::printf("%s\n", device_summary().c_str());
  try {
    Gemm gemm(14336, n_tok);
    std::printf("Gemm workspace %.1f MiB, %lld tokens, %d iterations\n", gemm.workspace_bytes() / 1048576.0,
                static_cast<long long>(n_tok), iters);
    const Dense dense[] = {{"llama8b gate|up", 4096, 2 * 14336},
                           {"llama8b down", 14336, 4096},
                           {"llama8b qkv", 4096, 6144},
                           {"llama8b o", 4096, 4096},
                           {"llama8b head", 4096, 128256}};
    std::printf("\n%-18s %-6s %-7s %10s %9s\n", "dense", "type", "route", "us", "TFLOP/s");
    for (const std::string& tn : split(types)) {
      const auto t = ggml_type_from_name(tn);
      if (!t || !gemm_supported(*t)) {
        std::fprintf(stderr, "unsupported type %s\n", tn.c_str());
        return 2;
      }
      for (const Dense& d : dense) {
        const int64_t rb = row_bytes(*t, d.k);
        DeviceBuffer w = random_bytes(static_cast<size_t>(rb * d.rows), 17);
        DeviceBuffer x = random_floats(static_cast<size_t>(n_tok * d.k), 3);
        DeviceBuffer y(static_cast<size_t>(n_tok * d.rows) * 4);
        GemmArgs g;
        g.type = *t;
        g.w = w.as<uint8_t>();
        g.row_bytes = rb;
        g.k = d.k;
        g.rows = d.rows;
        g.x = x.as<float>();
        g.ldx = d.k;
        g.n_tok = n_tok;
        g.y = y.as<float>();
        g.ldy = d.rows;
        g.prec = prec;
        for (GemmRoute r : {GemmRoute::kCublas, GemmRoute::kFused}) {
          gemm.set_route(r);
          const double us = time_us(iters, [&] { gemm.run(g, nullptr); });
          std::printf("%-18s %-6s %-7s %10.1f %9.1f\n", d.name, tn.c_str(), r == GemmRoute::kCublas ? "cublas" : "fused",
                      us, 2.0 * d.k * d.rows * n_tok / us * 1e-6);
        }
      }
    }

    // Route crossover for the tuning table (gemm_tuning.h): both routes over token counts, one
    // shape, the first type.
    {
      const GgmlType t = *ggml_type_from_name(split(types).front());
      const Dense d = dense[1];
      const int64_t rb = row_bytes(t, d.k);
      DeviceBuffer w = random_bytes(static_cast<size_t>(rb * d.rows), 17);
      DeviceBuffer x = random_floats(static_cast<size_t>(n_tok * d.k), 3);
      DeviceBuffer y(static_cast<size_t>(n_tok * d.rows) * 4);
      std::printf("\ncrossover %s %s: tokens, cublas us, fused us\n", d.name, std::string(type_name(t)).c_str());
      for (int64_t nt : {9, 16, 32, 64, 128, 256, 512}) {
        if (nt > n_tok) break;
        GemmArgs g;
        g.type = t;
        g.w = w.as<uint8_t>();
        g.row_bytes = rb;
        g.k = d.k;
        g.rows = d.rows;
        g.x = x.as<float>();
        g.ldx = d.k;
        g.n_tok = nt;
        g.y = y.as<float>();
        g.ldy = d.rows;
        g.prec = prec;
        gemm.set_route(GemmRoute::kCublas);
        const double us_c = time_us(iters, [&] { gemm.run(g, nullptr); });
        gemm.set_route(GemmRoute::kFused);
        const double us_f = time_us(iters, [&] { gemm.run(g, nullptr); });
        std::printf("%6lld %10.1f %10.1f\n", static_cast<long long>(nt), us_c, us_f);
      }
      gemm.set_route(GemmRoute::kAuto);
    }

    // Qwen3-30B-A3B experts: 128 experts, 8 used, gate|up 2048 -> 2 x 768, down 768 -> 2048.
    const int64_t n_expert = 128, n_used = 8, n_embd = 2048, n_ff = 768, n_slots = n_tok * n_used;
    std::mt19937 rng(1);
    std::vector<int32_t> ids(static_cast<size_t>(n_slots));
    std::vector<int32_t> pool(static_cast<size_t>(n_expert));
    std::iota(pool.begin(), pool.end(), 0);
    for (int64_t t = 0; t < n_tok; ++t) {
      std::shuffle(pool.begin(), pool.end(), rng);
      for (int64_t u = 0; u < n_used; ++u) ids[static_cast<size_t>(t * n_used + u)] = pool[static_cast<size_t>(u)];
    }
    DeviceBuffer d_ids = to_device(ids), order(static_cast<size_t>(n_slots) * 4),
                 offsets(static_cast<size_t>(n_expert + 1) * 4),
                 sort_ws(std::max<size_t>(1, moe_sort_workspace_bytes(n_slots, n_expert)));
    const double sort_us = time_us(iters, [&] {
      moe_sort(d_ids.as<int32_t>(), n_slots, n_expert, order.as<int32_t>(), offsets.as<int32_t>(), sort_ws.get(),
               nullptr);
    });
    std::printf("\nmoe_sort %lld slots, %lld experts: %.1f us\n", static_cast<long long>(n_slots),
                static_cast<long long>(n_expert), sort_us);
    std::printf("%-18s %-6s %-11s %10s %9s\n", "grouped", "type", "tile", "us", "TFLOP/s");
    for (const std::string& tn : split(types)) {
      const GgmlType t = *ggml_type_from_name(tn);
      for (int down = 0; down < 2; ++down) {
        const int64_t k = down ? n_ff : n_embd, rows = down ? n_embd : 2 * n_ff;
        const int64_t rb = row_bytes(t, k), eb = rb * rows;
        DeviceBuffer w = random_bytes(static_cast<size_t>(eb * n_expert), 29);
        const int64_t x_rows = down ? n_slots : n_tok;
        DeviceBuffer x = random_floats(static_cast<size_t>(x_rows * k), 5);
        DeviceBuffer y(static_cast<size_t>(n_slots * rows) * 4);
        GroupedGemmArgs a;
        a.g.type = t;
        a.g.w = w.as<uint8_t>();
        a.g.row_bytes = rb;
        a.g.k = k;
        a.g.rows = rows;
        a.g.x = x.as<float>();
        a.g.ldx = k;
        a.g.n_tok = n_slots;
        a.g.y = y.as<float>();
        a.g.ldy = rows;
        a.g.prec = prec;
        a.expert_bytes = eb;
        a.n_expert = n_expert;
        a.order = down ? nullptr : order.as<int32_t>();
        a.offsets = offsets.as<int32_t>();
        a.x_div = down ? 1 : n_used;
        for (int fast = 1; fast >= 0; --fast) {
          if (!fast && t != GgmlType::NVFP4) continue;
          gemm_set_fused_fp4_fast(fast != 0);
          for (int bt : {0, 32, 64}) {
            if (prec == GemmPrec::kF32 && bt != 0) continue;
            gemm_set_fused_tile_override(bt);
            const double us = time_us(iters, [&] { gemm_grouped(gemm, a, nullptr); });
            const std::string tile = std::string(bt == 0 ? "auto" : bt == 32 ? "tile32" : "tile64") +
                                     (t == GgmlType::NVFP4 ? (fast ? "+fp4" : "+gen") : "");
            std::printf("%-18s %-6s %-11s %10.1f %9.1f\n", down ? "qwen3moe down" : "qwen3moe gate|up", tn.c_str(),
                        tile.c_str(), us, 2.0 * k * rows * n_slots / us * 1e-6);
          }
        }
        gemm_set_fused_tile_override(0);
        gemm_set_fused_fp4_fast(false);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
