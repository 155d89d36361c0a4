// ft-bench-small-cuda: the small kernels of a decode step, microseconds per launch, on the
// Qwen3-30B-A3B / Llama-8B shapes (one token): the fused router GEMV + route (warp route and
// block route), moe_route alone, rmsnorm_q8, qk-norm + rope + KV store, swiglu_q8, the wo
// input's quantize_act_q8, decode attention with the Q8 epilogue against attention + a
// quantise launch, and decode attention at 512 / 4k / 16k keys with the next step's K/V
// loads off and on (GB/s: the K and V bytes a launch must read).
//
//   ft-bench-small-cuda [--reps N]
//
// Each case captures N launches in a row into a CUDA graph (launched with PDL as the engine
// launches them) and reports the median of 7 replays divided by N: what one launch adds to a
// decode step's graph. The router reads its own weight copy per launch (N copies, more than
// L2 holds), as successive layers do.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/attention.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/glu.h"
#include "cuda/moe_route.h"
#include "cuda/norm.h"
#include "cuda/rope.h"
#include "graph_timer.cuh"

using namespace ft;
using namespace ft::cuda;

namespace {

__global__ void fill(float* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    p[i] = (static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * scale;
  }
}

DeviceBuffer random_floats(size_t n, uint32_t seed, float scale = 2.0f) {
  DeviceBuffer b(n * sizeof(float));
  fill<<<1024, 256>>>(b.as<float>(), n, seed, scale);
  FT_CUDA_CHECK_LAUNCH();
  return b;
}

// Microseconds per launch: n launches of f(i) captured in one graph, median of 7 replays.
template <class F>
double us_per_launch(int n, cudaStream_t s, F&& f) {
  const float ms = tools::capture_median_ms(s, [&] {
    for (int i = 0; i < n; ++i) f(i);
  });
  return 1e3 * ms / n;
}

void report(const char* what, double us) { std::printf("%-58s %8.2f us\n", what, us); }

// One query token's decode attention over a bf16 cache of n_ctx rows (the caches are the
// caller's), as a decode step calls it: position from the device, bf16-rounded output.
AttnArgs decode_args(int64_t nh, int64_t nkv, int64_t hd, int64_t n_ctx, const DeviceBuffer& q,
                     const DeviceBuffer& pos, DeviceBuffer& out) {
  AttnArgs a;
  a.n_head = nh;
  a.n_head_kv = nkv;
  a.head_dim_k = a.head_dim_v = hd;
  a.scale = 0.088f;
  a.q = q.as<float>();
  a.ldq = nh * hd;
  a.n_tok = 1;
  a.d_pos = pos.as<int32_t>();
  a.n_ctx = n_ctx;
  a.kv_type = KvType::kBF16;
  a.out = out.as<float>();
  a.ldo = nh * hd;
  a.round = Round::kBF16;
  a.ws_zeroed = true;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 96;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: ft-bench-small-cuda [--reps N]\n");
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
    const int32_t pos0 = 0;
    DeviceBuffer pos(4);
    pos.upload(&pos0, 4);

    // Router: Qwen3-30B-A3B, 128 experts x 2048 fp32 (1 MB), 8 chosen, one token.
    {
      const int64_t n_expert = 128, k = 2048;
      DeviceBuffer w = random_floats(static_cast<size_t>(reps * n_expert * k), 1, 0.1f);
      DeviceBuffer x = random_floats(static_cast<size_t>(k), 2);
      DeviceBuffer logits(n_expert * 4), ids(8 * 4), wts(8 * 4), ticket(4);
      FT_CUDA_CHECK(cudaMemset(ticket.get(), 0, 4));
      for (int warp : {1, 0}) {
        moe_route_set_warp(warp);
        const double us = us_per_launch(reps, s, [&](int i) {
          moe_router_route(x.as<float>(), k, 1, GgmlType::F32, w.as<float>() + static_cast<size_t>(i) * n_expert * k,
                           k * 4, k, n_expert, logits.as<float>(), n_expert, 8, ids.as<int32_t>(), wts.as<float>(),
                           ticket.as<unsigned>(), s);
        });
        report(warp ? "router GEMV + route 128x2048 f32, warp route" : "router GEMV + route 128x2048 f32, block route",
               us);
      }
      for (int warp : {1, 0}) {
        moe_route_set_warp(warp);
        const double us = us_per_launch(reps, s, [&](int) {
          moe_route(logits.as<float>(), n_expert, n_expert, 1, 8, ids.as<int32_t>(), wts.as<float>(), s);
        });
        report(warp ? "moe_route 128 experts, warp route" : "moe_route 128 experts, block route", us);
      }
      moe_route_set_warp(-1);
    }
    // rmsnorm_q8 (one token), the attention and FFN norms.
    for (int64_t n : {2048, 4096}) {
      DeviceBuffer x = random_floats(static_cast<size_t>(n), 3), w = random_floats(static_cast<size_t>(n), 4);
      DeviceBuffer y(n * 4), xq(act_q8_bytes(n, 1));
      const double us = us_per_launch(reps, s, [&](int) {
        rmsnorm_q8(x.as<float>(), n, w.as<float>(), n, 1e-6f, 1, y.as<float>(), n, Round::kBF16, xq.get(), s);
      });
      report(("rmsnorm_q8 n " + std::to_string(n)).c_str(), us);
    }
    // qk-norm + rope + KV store (bf16 cache): Qwen3 32+4 heads with norms, Llama 32+8 without.
    for (int llama = 0; llama < 2; ++llama) {
      const int64_t nh = 32, nkv = llama ? 8 : 4, hd = 128, ld = (nh + 2 * nkv) * hd, n_ctx = 4096;
      DeviceBuffer qkv = random_floats(static_cast<size_t>(ld), 5), qn = random_floats(hd, 6), kn = random_floats(hd, 7);
      DeviceBuffer cs = random_floats(static_cast<size_t>(n_ctx * hd), 8);
      DeviceBuffer kc(n_ctx * nkv * hd * 2), vc(n_ctx * nkv * hd * 2);
      KvStore kv;
      kv.type = KvType::kBF16;
      kv.k_cache = kc.get();
      kv.v_cache = vc.get();
      kv.v = qkv.as<float>() + (nh + nkv) * hd;
      kv.ldv = ld;
      kv.v_head_dim = hd;
      const double us = us_per_launch(reps, s, [&](int) {
        qk_norm_rope_store(qkv.as<float>(), ld, 1, nh, nkv, hd, llama ? nullptr : qn.as<float>(),
                           llama ? nullptr : kn.as<float>(), 1e-6f, cs.as<float>(), static_cast<int>(hd), !llama,
                           pos.as<int32_t>(), Round::kBF16, kv, s);
      });
      report(llama ? "qk rope + KV store, Llama 32+8 heads" : "qk-norm + rope + KV store, Qwen3 32+4 heads", us);
    }
    // swiglu_q8: 8 expert slots of 768 (Qwen3 MoE) and one row of 14336 (Llama).
    for (int64_t shape = 0; shape < 2; ++shape) {
      const int64_t n_ff = shape ? 14336 : 768, rows = shape ? 1 : 8;
      DeviceBuffer gu = random_floats(static_cast<size_t>(2 * n_ff * rows), 9), h(n_ff * rows * 4),
                   xq(act_q8_bytes(n_ff, rows));
      const double us = us_per_launch(reps, s, [&](int) {
        swiglu_q8(gu.as<float>(), 2 * n_ff, n_ff, rows, h.as<float>(), n_ff, Round::kBF16, xq.get(), s);
      });
      report(shape ? "swiglu_q8 14336" : "swiglu_q8 8 x 768", us);
    }
    // The wo input: quantise alone, and attention (Llama-8B shape, 8 / 4096 live keys) with
    // the Q8 epilogue against attention + quantize_act_q8.
    {
      const int64_t nh = 32, nkv = 8, hd = 128, k = nh * hd, n_ctx = 4096;
      DeviceBuffer q = random_floats(static_cast<size_t>(k), 10), out(k * 4), xq(act_q8_bytes(k, 1));
      const double us_q = us_per_launch(reps, s, [&](int) {
        quantize_act_q8(q.as<float>(), k, k, 1, xq.get(), s);
      });
      report("quantize_act_q8 4096 (the wo input)", us_q);
      DeviceBuffer kc(n_ctx * nkv * hd * 2), vc(n_ctx * nkv * hd * 2);
      FT_CUDA_CHECK(cudaMemset(kc.get(), 0x3c, kc.bytes()));
      FT_CUDA_CHECK(cudaMemset(vc.get(), 0x3c, vc.bytes()));
      DeviceBuffer ws(attention_workspace_bytes(nh, 1, n_ctx, hd));
      attention_workspace_init(ws.get(), ws.bytes(), s);
      for (int32_t live : {8, 4096}) {
        const int32_t p = live - 1;
        pos.upload(&p, 4);
        AttnArgs a = decode_args(nh, nkv, hd, n_ctx, q, pos, out);
        a.k_cache = kc.get();
        a.v_cache = vc.get();
        const double plain = us_per_launch(reps, s, [&](int) { attention(a, ws.get(), s); });
        const double sep = us_per_launch(reps, s, [&](int) {
          attention(a, ws.get(), s);
          quantize_act_q8(out.as<float>(), k, k, 1, xq.get(), s);
        });
        a.out_q8 = xq.get();
        const double epi = us_per_launch(reps, s, [&](int) { attention(a, ws.get(), s); });
        a.out_q8 = nullptr;
        const std::string at = " (Llama-8B, " + std::to_string(live) + " keys)";
        report(("attention decode" + at).c_str(), plain);
        report(("attention decode + quantize_act_q8" + at).c_str(), sep);
        report(("attention decode with the Q8 epilogue" + at).c_str(), epi);
      }
      pos.upload(&pos0, 4);
    }
    FT_CUDA_CHECK(cudaStreamDestroy(s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
