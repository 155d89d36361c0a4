// ft-bench-attention-cuda: decode and prefill attention (src/cuda/attention.h) on the shapes
// of Llama-3.1-8B (32 heads, 8 KV heads, hd 128) and Qwen3-30B-A3B (32 heads, 4 KV heads,
// hd 128).
//
//   ft-bench-attention-cuda [--kv bf16|f16|f32] [--pool-gib N] [--decode-only] [--sweep]
//                           [--only MODEL:LIVE]
//
// Decode (1 query token at 8, 512, 4096 and 16384 live keys; 8 tokens at 4096; a 32k cache
// holding 4k live keys to show the cost of idle chunks; short contexts in a 4096-row cache as
// a session allocates it): each launch reads another layer's cache, layers spread over a pool
// much larger than L2 (default 2 GiB), so the K/V reads come from HBM. Launches are captured
// into a CUDA graph and timed with events (median of 7 replays, per launch). GB/s counts the
// K and V bytes one launch must read (live keys x kv_dim x 2 x element size); "% read BW"
// divides it by the streaming-read kernel's rate measured at start-up. Each case runs
// attention_decode as the engine calls it ("decode"), the dedicated decode kernel alone
// ("dedicated") and the SIMT split-K kernel + combine ("simt"); --sweep adds the dedicated
// kernel with other plans (rows per block, blocks per SM, keys per lane group)
// and without AttnArgs::ws_zeroed (a ticket memset per call). --only llama-8b:4096 runs that one
// decode case (one token, cache of max(4096, LIVE) rows) with the engine's plan, then the mma
// kernel (mode 3): a target for ncu.
//
// Prefill (512 tokens from position 0, and 512 tokens after 4096 cached ones): time per
// layer and TFLOP/s counting 4*d flops per (query head, visible key) pair; for bf16/f16 the
// tensor-core kernel, then the SIMT kernel on the same shapes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "graph_timer.cuh"

using namespace ft;
using namespace ft::cuda;

namespace {

// Random finite values of the cache type (small, so that softmax stays well-behaved).
__global__ void fill_cache(uint16_t* p16, float* p32, size_t n, uint32_t seed, int kind) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    const float x = (static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * 2.0f;
    if (kind == 0) p32[i] = x;
    if (kind == 1) p16[i] = __half_as_ushort(__float2half_rn(x));
    if (kind == 2) p16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
}

__global__ void read_stream(const uint4* p, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9E3779B9u) out[0] = acc;
}

double read_bandwidth(cudaStream_t s) {
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer buf(bytes), out(4);
  fill_cache<<<4096, 256, 0, s>>>(nullptr, buf.as<float>(), bytes / 4, 1, 0);
  FT_CUDA_CHECK_LAUNCH();
  const float ms = tools::capture_median_ms(
      s, [&] { read_stream<<<132 * 8, 512, 0, s>>>(buf.as<uint4>(), bytes / 16, out.as<uint32_t>()); });
  return static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

struct Model {
  const char* name;
  int64_t n_head, n_head_kv, d;
};

struct Bench {
  KvType kv;
  int64_t esize;
  size_t pool_bytes;
  double read_gbs;
  cudaStream_t s;

  // Captures `n_layers` launches, each on its own layer cache, and returns ms per launch.
  template <class F>
  float per_launch(int64_t n_layers, F&& launch_layer) {
    const float ms = tools::capture_median_ms(s, [&] {
      for (int64_t l = 0; l < n_layers; ++l) launch_layer(l);
    });
    return ms / static_cast<float>(n_layers);
  }

  // Decode plan of one run: the kernel (0 dedicated, 1 SIMT), rows per block and blocks per SM
  // (0: defaults), and whether the workspace was zeroed once (no per-call ticket memset).
  struct Plan {
    const char* label;
    int mode, rows, per_sm;
    bool zeroed;
    int keys_per_slot;  // 0: default
  };

  void run(const Model& m, int64_t n_ctx, int64_t live, int64_t n_tok, bool decode,
           const Plan& plan = Plan{"decode", 0, 0, 0, true, 0}) {
    const int64_t kv_dim = m.n_head_kv * m.d;
    const size_t layer_bytes = static_cast<size_t>(n_ctx * kv_dim * esize);  // K or V
    int64_t n_layers = static_cast<int64_t>(pool_bytes / (2 * layer_bytes));
    n_layers = std::max<int64_t>(1, std::min<int64_t>(n_layers, 512));
    DeviceBuffer cache(2 * layer_bytes * static_cast<size_t>(n_layers));
    const size_t n_elem = cache.bytes() / static_cast<size_t>(esize);
    fill_cache<<<4096, 256, 0, s>>>(cache.as<uint16_t>(), cache.as<float>(), n_elem, 7,
                                    kv == KvType::kF32 ? 0 : kv == KvType::kF16 ? 1 : 2);
    FT_CUDA_CHECK_LAUNCH();
    const int64_t width = m.n_head * m.d;
    DeviceBuffer q(static_cast<size_t>(n_tok * width) * 4), out(static_cast<size_t>(n_tok * width) * 4);
    fill_cache<<<256, 256, 0, s>>>(nullptr, q.as<float>(), static_cast<size_t>(n_tok * width), 3, 0);
    FT_CUDA_CHECK_LAUNCH();
    DeviceBuffer ws(std::max<size_t>(16, attention_workspace_bytes(m.n_head, n_tok, n_ctx, m.d)));
    attention_workspace_init(ws.get(), ws.bytes(), s);
    const int32_t pos = static_cast<int32_t>(live - n_tok);
    DeviceBuffer dpos(4);
    dpos.upload(&pos, 4);
    FT_CUDA_CHECK(cudaDeviceSynchronize());

    AttnArgs a;
    a.n_head = m.n_head;
    a.n_head_kv = m.n_head_kv;
    a.head_dim_k = a.head_dim_v = m.d;
    a.scale = 1.0f / 11.3137f;
    a.q = q.as<float>();
    a.ldq = width;
    a.n_tok = n_tok;
    a.d_pos = dpos.as<int32_t>();
    a.n_ctx = n_ctx;
    a.kv_type = kv;
    a.out = out.as<float>();
    a.ldo = width;
    a.round = kv == KvType::kF32 ? Round::kNone : kv == KvType::kF16 ? Round::kF16 : Round::kBF16;
    a.ws_zeroed = plan.zeroed;
    attention_set_decode_override(plan.mode, plan.rows, plan.per_sm, plan.keys_per_slot);
    const float ms = per_launch(n_layers, [&](int64_t l) {
      const uint8_t* base = cache.as<uint8_t>() + 2 * layer_bytes * static_cast<size_t>(l);
      a.k_cache = base;
      a.v_cache = base + layer_bytes;
      if (decode)
        attention_decode(a, ws.get(), s);
      else
        attention_prefill(a, s);
    });
    attention_set_decode_override(0);
    const double us = ms * 1e3;
    if (decode) {
      const double bytes = 2.0 * static_cast<double>(live * kv_dim * esize);
      const double gbs = bytes / (us * 1e-6) / 1e9;
      std::printf("%-24s %-14s n_tok %2lld ctx %6lld (cache %6lld)  %8.2f us  %7.1f GB/s  %5.1f%% read BW\n",
                  plan.label, m.name, static_cast<long long>(n_tok), static_cast<long long>(live),
                  static_cast<long long>(n_ctx), us, gbs, 100.0 * gbs / read_gbs);
    } else {
      double pairs = 0;  // (query token, visible key) pairs
      for (int64_t t = 0; t < n_tok; ++t) pairs += static_cast<double>(pos + t + 1);
      const double flops = 4.0 * static_cast<double>(m.n_head * m.d) * pairs;
      std::printf("prefill  %-14s n_tok %4lld from %5lld            %8.2f us  %7.1f TFLOP/s\n", m.name,
                  static_cast<long long>(n_tok), static_cast<long long>(pos), us, flops / (us * 1e-6) / 1e12);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  KvType kv = KvType::kBF16;
  double pool_gib = 2.0;
  bool decode_only = false, sweep = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--kv" && i + 1 < argc) {
      const std::string t = argv[++i];
      kv = t == "f32" ? KvType::kF32 : t == "f16" ? KvType::kF16 : KvType::kBF16;
    } else if (arg == "--pool-gib" && i + 1 < argc) {
      pool_gib = std::atof(argv[++i]);
    } else if (arg == "--decode-only") {
      decode_only = true;
    } else if (arg == "--sweep") {
      sweep = true;
    } else if (arg == "--only" && i + 1 < argc && std::strchr(argv[i + 1], ':') != nullptr) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: ft-bench-attention-cuda [--kv bf16|f16|f32] [--pool-gib N] [--decode-only] [--sweep] "
                   "[--only MODEL:LIVE]\n");
      return 2;
    }
  }
  if (!has_device()) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  try {
    std::printf("%s\n", device_summary().c_str());
    cudaStream_t s;
    FT_CUDA_CHECK(cudaStreamCreate(&s));
    Bench b{kv, kv == KvType::kF32 ? 4 : 2, static_cast<size_t>(pool_gib * (1 << 30)), 0.0, s};
    b.read_gbs = read_bandwidth(s);
    std::printf("kv %s, streaming read %.0f GB/s\n", kv == KvType::kF32 ? "f32" : kv == KvType::kF16 ? "f16" : "bf16",
                b.read_gbs);
    const Model models[] = {{"llama-8b", 32, 8, 128}, {"qwen3-30b-a3b", 32, 4, 128}};
    // "decode": attention_decode as the engine calls it (the dedicated kernel up to 4 tokens);
    // "dedicated": always the dedicated kernel; "simt": the SIMT split-K kernel + combine.
    std::vector<Bench::Plan> plans = {{"decode", 0, 0, 0, true, 0},
                                      {"dedicated", 2, 0, 0, true, 0},
                                      {"simt", 1, 0, 0, true, 0},
                                      {"mma", 3, 0, 0, true, 0}};
    if (sweep) {
      plans.push_back({"dedicated rows1", 2, 1, 0, true, 0});
      plans.push_back({"dedicated rows4", 2, 4, 0, true, 0});
      plans.push_back({"dedicated rows8", 2, 8, 0, true, 0});
      plans.push_back({"dedicated 2/SM", 2, 0, 2, true, 0});
      plans.push_back({"dedicated 8/SM", 2, 0, 8, true, 0});
      plans.push_back({"dedicated no-zeroed-ws", 2, 0, 0, false, 0});
      plans.push_back({"dedicated nk2", 2, 0, 0, true, 2});
      plans.push_back({"dedicated nk4", 2, 0, 0, true, 4});
      plans.push_back({"dedicated rows4 nk2", 2, 4, 0, true, 2});
    }
    if (!only.empty()) {
      const std::string name = only.substr(0, only.find(':'));
      const int64_t live = std::atoll(only.c_str() + only.find(':') + 1);
      for (const Model& m : models)
        if (name == m.name && live > 0) {
          b.run(m, std::max<int64_t>(4096, live), live, 1, true);
          b.run(m, std::max<int64_t>(4096, live), live, 1, true, Bench::Plan{"mma", 3, 0, 0, true, 0});
        }
      FT_CUDA_CHECK(cudaStreamDestroy(s));
      return 0;
    }
    struct DecodeCase {
      int64_t n_ctx, live, n_tok;
    };
    const DecodeCase cases[] = {{4096, 8, 1},     {4096, 512, 1}, {4096, 4096, 1}, {16384, 16384, 1},
                                {4096, 4096, 8},  {32768, 4096, 1}};
    for (const Model& m : models) {
      for (const DecodeCase& c : cases)
        for (const Bench::Plan& p : plans) b.run(m, c.n_ctx, c.live, c.n_tok, true, p);
      if (decode_only) continue;
      b.run(m, 512, 512, 512, false);
      b.run(m, 4608, 4608, 512, false);
      if (kv != KvType::kF32) {  // the SIMT kernel on the same shapes, for comparison
        attention_set_prefill_override(1);
        std::printf("(SIMT prefill)\n");
        b.run(m, 512, 512, 512, false);
        b.run(m, 4608, 4608, 512, false);
        attention_set_prefill_override(0);
      }
    }
    FT_CUDA_CHECK(cudaStreamDestroy(s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
