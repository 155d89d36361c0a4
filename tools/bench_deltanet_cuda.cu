// ft-bench-deltanet-cuda: the Gated DeltaNet token mixing (src/cuda/deltanet.h) on Qwen3.6's
// shape (16 key heads, 32 value heads, d 128), the recurrence against the chunked form.
//
//   ft-bench-deltanet-cuda [--hk 16] [--hv 32] [--d 128] [--ubatch 512] [--reps 5] [L ...]
//
// For each prompt length L (default 512 2048 8192): microseconds per layer (prepare + kernel,
// median of --reps runs timed with events) for one call of L tokens and for L tokens in calls
// of --ubatch tokens (as a session runs a prompt; the state carries over), for the recurrence,
// the plain chunked kernel, the cluster one (sm_90) and the small one (<= 99 KiB of shared
// memory: the kind GPUs below sm_90 run), their speed-ups over the recurrence, and the largest
// relative difference between each chunked kind's and the recurrent outputs over the whole
// prompt (the tests' check, here on the bench's random inputs). A kind the device cannot run
// prints 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/deltanet.h"
#include "cuda/device.h"

using namespace ft;
using namespace ft::cuda;

namespace {

struct Layer {
  int64_t hk, hv, d, L;
  int64_t conv_dim() const { return (2 * hk + hv) * d; }
  DeviceBuffer y, y0, gates, dt_bias, a, state, out, gb, pos;
};

std::vector<float> randv(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// L tokens from position 0 in calls of ub tokens.
// form 0: the recurrence, 1: plain chunked, 2: cluster chunked, 3: small chunked.
void run(Layer& l, int form, int64_t ub, cudaStream_t s) {
  const int64_t cd = l.conv_dim();
  for (int64_t t0 = 0; t0 < l.L; t0 += ub) {
    const int64_t n = std::min(ub, l.L - t0);
    DeltaNetArgs a;
    a.n_k_heads = l.hk;
    a.n_v_heads = l.hv;
    a.d = l.d;
    a.y = l.y.as<float>() + t0 * cd;
    a.ldy = cd;
    a.beta = l.gates.as<float>() + t0 * 2 * l.hv;
    a.alpha = a.beta + l.hv;
    a.ldg = 2 * l.hv;
    a.dt_bias = l.dt_bias.as<float>();
    a.a = l.a.as<float>();
    a.state = l.state.as<float>();
    a.out = l.out.as<float>() + t0 * l.hv * l.d;
    a.ldo = l.hv * l.d;
    a.n_tok = n;
    a.d_pos = l.pos.as<int32_t>() + (t0 == 0 ? 0 : 1);  // pos[0] = 0: new sequence; pos[1] = 1
    if (form != 0 && n >= kDeltaNetChunk)
      deltanet_chunked(a, l.gb.as<float>(), s,
                       form == 2   ? DeltaNetChunkedKind::kCluster
                       : form == 3 ? DeltaNetChunkedKind::kSmall
                                   : DeltaNetChunkedKind::kPlain);
    else
      deltanet_recurrent(a, l.gb.as<float>(), s);
  }
}

double time_us(Layer& l, int form, int64_t ub, int reps, cudaStream_t s) {
  cudaEvent_t e0, e1;
  FT_CUDA_CHECK(cudaEventCreate(&e0));
  FT_CUDA_CHECK(cudaEventCreate(&e1));
  run(l, form, ub, s);  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    FT_CUDA_CHECK(cudaEventRecord(e0, s));
    run(l, form, ub, s);
    FT_CUDA_CHECK(cudaEventRecord(e1, s));
    FT_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    FT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3);
  }
  FT_CUDA_CHECK(cudaEventDestroy(e0));
  FT_CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> outputs(Layer& l, int form, int64_t ub, cudaStream_t s) {
  // From the same inputs each time (prepare normalises y in place; idempotent up to rounding,
  // so restore it exactly).
  FT_CUDA_CHECK(cudaMemcpyAsync(l.y.get(), l.y0.get(), l.y.bytes(), cudaMemcpyDeviceToDevice, s));
  run(l, form, ub, s);
  FT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> o(static_cast<size_t>(l.L * l.hv * l.d));
  l.out.download(o.data(), o.size() * sizeof(float));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t hk = 16, hv = 32, d = 128, ub = 512;
  int reps = 5;
  std::vector<int64_t> lens;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoll(argv[++i]) : 0; };
    if (a == "--hk") hk = next();
    else if (a == "--hv") hv = next();
    else if (a == "--d") d = next();
    else if (a == "--ubatch") ub = next();
    else if (a == "--reps") reps = static_cast<int>(next());
    else lens.push_back(std::atoll(a.c_str()));
  }
  if (lens.empty()) lens = {512, 2048, 8192};
  if (!has_device() || hk <= 0 || hv % hk != 0 || !deltanet_supported(d) || ub <= 0 || reps <= 0) {
    std::fprintf(stderr, "ft-bench-deltanet-cuda: needs a GPU, hv a multiple of hk, d in {16,32,64,128}\n");
    return 1;
  }
  std::printf("%s\n", device_summary().c_str());
  cudaStream_t s;
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("Gated DeltaNet, %lld key / %lld value heads of %lld, one layer (prepare + kernel), median of %d\n",
              static_cast<long long>(hk), static_cast<long long>(hv), static_cast<long long>(d), reps);
  std::printf("%6s | %-10s | %12s %8s | %10s %8s %7s | %10s %8s %7s | %10s %8s %7s | %s\n", "L", "calls",
              "recurrent us", "ns/tok", "chunked us", "ns/tok", "speedup", "cluster us", "ns/tok", "speedup",
              "small us", "ns/tok", "speedup", "max rel diff (plain, cluster, small)");
  for (const int64_t L : lens) {
    Layer l;
    l.hk = hk;
    l.hv = hv;
    l.d = d;
    l.L = L;
    const auto y = randv(static_cast<size_t>(L * l.conv_dim()), 1, -1.0f, 1.0f);
    l.y = to_device(y);
    l.y0 = to_device(y);
    l.gates = to_device(randv(static_cast<size_t>(L * 2 * hv), 2, -3.0f, 3.0f));
    l.dt_bias = to_device(randv(static_cast<size_t>(hv), 3, -1.0f, 1.0f));
    auto av = randv(static_cast<size_t>(hv), 4, -1.0f, 1.0f);
    for (float& x : av) x = -std::exp(x);
    l.a = to_device(av);
    l.state = DeviceBuffer(static_cast<size_t>(hv * d * d) * sizeof(float));
    l.out = DeviceBuffer(static_cast<size_t>(L * hv * d) * sizeof(float));
    l.gb = DeviceBuffer(static_cast<size_t>(L * hv * 3) * sizeof(float));
    l.pos = to_device(std::vector<int32_t>{0, 1});
    DeltaNetArgs probe;
    probe.d = d;
    probe.y = l.y.as<float>();
    probe.ldy = l.conv_dim();
    const bool can_chunk = deltanet_chunked_supported(probe);
    const bool can_cluster = deltanet_chunked_supported(probe, DeltaNetChunkedKind::kCluster);
    const bool can_small = deltanet_chunked_supported(probe, DeltaNetChunkedKind::kSmall);
    const bool can[4] = {true, can_chunk, can_cluster, can_small};
    std::vector<int64_t> patterns = {L};  // one call of L tokens, then calls of ub when shorter
    if (ub < L) patterns.push_back(ub);
    for (const int64_t calls_of : patterns) {
      const double tr = time_us(l, 0, calls_of, reps, s);
      const double tc = can_chunk ? time_us(l, 1, calls_of, reps, s) : 0.0;
      const double tk = can_cluster ? time_us(l, 2, calls_of, reps, s) : 0.0;
      const double ts = can_small ? time_us(l, 3, calls_of, reps, s) : 0.0;
      double rel[4] = {0, 0, 0, 0};
      const auto o_r = outputs(l, 0, calls_of, s);
      for (int form = 1; form <= 3; ++form) {
        if (!can[form]) continue;
        const auto o_c = outputs(l, form, calls_of, s);
        double m = 0, ref = 0;
        for (size_t k = 0; k < o_r.size(); ++k) {
          const double dd = std::fabs(static_cast<double>(o_c[k]) - o_r[k]);
          m = std::isnan(dd) ? INFINITY : std::max(m, dd);
          ref = std::max(ref, std::fabs(static_cast<double>(o_r[k])));
        }
        rel[form] = ref > 0 ? m / ref : m;
      }
      const std::string calls = calls_of >= L ? "1 x " + std::to_string(L) : std::to_string((L + ub - 1) / ub) + " x " +
                                                                                   std::to_string(ub);
      const double per = 1e3 / static_cast<double>(L);
      std::printf(
          "%6lld | %-10s | %12.1f %8.1f | %10.1f %8.1f %6.2fx | %10.1f %8.1f %6.2fx | %10.1f %8.1f %6.2fx | %.3g, "
          "%.3g, %.3g\n",
          static_cast<long long>(L), calls.c_str(), tr, tr * per, tc, tc * per, tc > 0 ? tr / tc : 0.0, tk, tk * per,
          tk > 0 ? tr / tk : 0.0, ts, ts * per, ts > 0 ? tr / ts : 0.0, rel[1], rel[2], rel[3]);
      std::fflush(stdout);
    }
  }
  FT_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}
