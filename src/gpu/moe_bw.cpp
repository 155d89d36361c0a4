#include "gpu/moe_bw.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/time_calls.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/moe_cache.h"
#include "gpu/cpu_handshake.h"

namespace ft::gpu {

std::string gpu_name() {
  if (!cuda::has_device()) return "";
  cudaDeviceProp p{};
  int dev = 0;
  FT_CUDA_CHECK(cudaGetDevice(&dev));
  FT_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return p.name;
}

CopyBw pinned_h2d_bandwidth(size_t bytes, int reps) {
  MappedHostBuffer host(bytes);
  cuda::DeviceBuffer dev(bytes);
  cudaStream_t s;
  cudaEvent_t a, b;
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  FT_CUDA_CHECK(cudaEventCreate(&a));
  FT_CUDA_CHECK(cudaEventCreate(&b));
  CopyBw r;
  double sum = 0.0;
  for (int rep = -1; rep < reps; ++rep) {
    FT_CUDA_CHECK(cudaEventRecord(a, s));
    FT_CUDA_CHECK(cudaMemcpyAsync(dev.get(), host.host(), bytes, cudaMemcpyHostToDevice, s));
    FT_CUDA_CHECK(cudaEventRecord(b, s));
    FT_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    FT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (rep < 0) continue;
    const double gbs = static_cast<double>(bytes) / (ms * 1e-3) * 1e-9;
    r.gbs = std::max(r.gbs, gbs);
    sum += gbs;
  }
  r.mean_gbs = reps > 0 ? sum / reps : 0.0;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return r;
}

struct GatherBench::Impl {
  moe_cpu::ExpertGeometry g;
  int n_miss = 0;
  int64_t n_pos = 0;
  int64_t kind_bytes[3] = {0, 0, 0};  // gate, up, down per expert
  MappedHostBuffer bank[3];
  cuda::DeviceBuffer pool[3];
  cuda::DeviceBuffer n_miss_d, miss_slot, miss_expert;
  MappedHostBuffer experts_h;  // staged miss_expert lists
  cudaStream_t s = nullptr;
};

GatherBench::GatherBench(const moe_cpu::ExpertGeometry& g, int64_t max_bytes, int n_miss) : p_(new Impl) {
  Impl& p = *p_;
  p.g = g;
  p.n_miss = n_miss;
  p.kind_bytes[0] = p.kind_bytes[1] = ft::row_bytes(g.type, g.n_embd) * g.n_ff;
  p.kind_bytes[2] = ft::row_bytes(g.type, g.n_ff) * g.n_embd;
  p.n_pos = std::max<int64_t>(n_miss + 1, std::min(g.n_expert, max_bytes / g.expert_bytes()));
  for (int k = 0; k < 3; ++k) {
    p.bank[k] = MappedHostBuffer(static_cast<size_t>(p.kind_bytes[k] * p.n_pos));
    for (size_t i = 0; i < p.bank[k].bytes(); i += 4096) p.bank[k].host()[i] = static_cast<uint8_t>(i >> 12);
    p.pool[k] = cuda::DeviceBuffer(static_cast<size_t>(p.kind_bytes[k] * n_miss));
  }
  p.n_miss_d = cuda::DeviceBuffer(sizeof(int32_t));
  p.miss_slot = cuda::DeviceBuffer(sizeof(int32_t) * n_miss);
  p.miss_expert = cuda::DeviceBuffer(sizeof(int32_t) * n_miss);
  const int32_t nm = n_miss;
  p.n_miss_d.upload(&nm, sizeof(nm));
  std::vector<int32_t> slots(static_cast<size_t>(n_miss));
  for (int i = 0; i < n_miss; ++i) slots[i] = i;
  p.miss_slot.upload(slots.data(), slots.size() * sizeof(int32_t));
  p.experts_h = MappedHostBuffer(sizeof(int32_t) * n_miss);
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&p.s, cudaStreamNonBlocking));
}

GatherBench::~GatherBench() {
  if (p_->s) cudaStreamDestroy(p_->s);
  delete p_;
}

GatherBw GatherBench::run(int iters, int warmup, const std::atomic<bool>* stop) {
  Impl& p = *p_;
  cuda::GatherPlan plan;
  for (int k = 0; k < 3; ++k) {
    plan.kind[k].src = p.bank[k].dev();
    plan.kind[k].dst = p.pool[k].as<uint8_t>();
    plan.kind[k].bytes = p.kind_bytes[k];
    plan.kind[k].dst_stride = p.kind_bytes[k];
  }
  plan.n_kind = 3;
  cuda::CacheMisses m;
  m.n_miss = p.n_miss_d.as<int32_t>();
  m.miss_slot = p.miss_slot.as<int32_t>();
  m.miss_expert = p.miss_expert.as<int32_t>();
  int64_t next = 0;
  auto* staged = reinterpret_cast<int32_t*>(p.experts_h.host());
  auto call = [&]() {
    // The host list must not change under a pending copy: the sync below keeps one call in
    // flight, which is also how decode sees it (one layer's misses, then the GEMVs).
    for (int i = 0; i < p.n_miss; ++i) staged[i] = static_cast<int32_t>((next + i) % p.n_pos);
    next = (next + p.n_miss) % p.n_pos;
    FT_CUDA_CHECK(cudaMemcpyAsync(m.miss_expert, p.experts_h.dev(), sizeof(int32_t) * p.n_miss,
                                  cudaMemcpyDefault, p.s));
    cuda::moe_cache_gather(plan, m, p.n_miss, p.s);
    FT_CUDA_CHECK(cudaStreamSynchronize(p.s));
  };
  const CallTiming t = time_calls(call, iters, warmup, 0.0, stop);
  GatherBw r;
  r.bytes_per_call = static_cast<int64_t>(p.n_miss) * p.g.expert_bytes();
  r.calls = t.calls;
  r.us_per_call = t.us_per_call();
  r.gbs = t.gbs(r.bytes_per_call);
  return r;
}

}  // namespace ft::gpu
