#include "gpu/moe_offload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/moe_combine_split.h"
#include "cuda/moe_route.h"
#include "cuda/norm.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

// Slot strides: the expert bytes rounded to 16 (the gather's vector width); for usual shapes
// exactly the arena's expert stride, so the grouped kernels see the same layout as fused.
int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

const HostExpertTensor& kind_of(const HostLayerBank& B, int k) {
  switch (k) {
    case 0: return B.gate;
    case 1: return B.up;
    case 2: return B.gate_up;
    default: return B.down;
  }
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

int64_t SlotCache::slot_bytes(const HostBanks& hb) {
  int64_t stride[4] = {0, 0, 0, 0};
  for (const HostLayerBank& B : hb.layers)
    for (int k = 0; k < 4; ++k) stride[k] = std::max(stride[k], align16(kind_of(B, k).expert_bytes));
  return stride[0] + stride[1] + stride[2] + stride[3] + 4 * static_cast<int64_t>(sizeof(float));
}

int64_t SlotCache::choose_slots(const model::Model& m, const HostBanks& hb, const MoeBackendOptions& o,
                                size_t free_bytes, std::string* why) {
  int64_t n_moe = 0, E = 0;
  for (const HostLayerBank& B : hb.layers)
    if (B.moe()) ++n_moe, E = std::max(E, B.n_expert);
  const int64_t total = n_moe * E;
  const int64_t sb = slot_bytes(hb);
  int64_t S = 0;
  std::string w;
  if (o.cache_size > 0) {
    S = o.cache_size;
    w = fmt::format("--moe-cache-size {}", o.cache_size);
  } else if (o.cache_rate > 0.0) {
    if (o.cache_rate > 1.0) fail("--moe-cache-rate {} must be in (0, 1]", o.cache_rate);
    S = std::llround(o.cache_rate * static_cast<double>(total));
    w = fmt::format("--moe-cache-rate {} of {} experts", o.cache_rate, total);
  } else {
    // Keep 4% of the free memory (at least 512 MiB) for cuBLAS, the graphs and the driver.
    const int64_t reserve = std::max<int64_t>(int64_t{512} << 20, static_cast<int64_t>(free_bytes / 25));
    const int64_t avail = static_cast<int64_t>(free_bytes) - reserve;
    S = avail > 0 ? avail / sb : 0;
    w = fmt::format("auto: {:.0f} MiB free after weights, KV and workspace, {:.0f} MiB kept", free_bytes / kMiB,
                    reserve / kMiB);
  }
  if (S < E) {
    w += fmt::format("; raised to {} (one layer's experts: the prefill buffer, a step's experts)", E);
    S = E;
  }
  if (S > total) S = total;
  if (static_cast<double>(S) * static_cast<double>(sb) > static_cast<double>(free_bytes))
    fail("{}: {} expert slots of {:.2f} MiB need {:.0f} MiB of GPU memory, {:.0f} MiB are free ({})",
         m.file->path(), S, sb / kMiB, static_cast<double>(S) * sb / kMiB, free_bytes / kMiB, w);
  if (why) *why = w;
  return S;
}

SlotCache::SlotCache(const model::Model& m, const DeviceWeights& /*w*/, const HostBanks& hb, int64_t n_slot,
                     int64_t max_routes)
    : hb_(hb) {
  moe_idx_of_.assign(hb.layers.size(), -1);
  for (size_t il = 0; il < hb.layers.size(); ++il) {
    if (!hb.layers[il].moe()) continue;
    moe_idx_of_[il] = static_cast<int64_t>(moe_layers_.size());
    moe_layers_.push_back(static_cast<int64_t>(il));
    n_expert_max_ = std::max(n_expert_max_, hb.layers[il].n_expert);
    for (int k = 0; k < kKinds; ++k) stride_[k] = std::max(stride_[k], align16(kind_of(hb.layers[il], k).expert_bytes));
  }
  if (moe_layers_.empty()) fail("{}: the offload MoE backend needs a model with routed experts", m.file->path());
  if (n_slot < n_expert_max_)
    fail("{}: {} expert slots are fewer than the {} experts of a layer", m.file->path(), n_slot, n_expert_max_);
  auto alloc = [&](cuda::DeviceBuffer& b, size_t bytes) {
    b = cuda::DeviceBuffer(bytes);
    device_bytes_ += bytes;
  };
  // n_slot + 1 positions: the last is dummy_slot(), zeroed and never assigned.
  for (int k = 0; k < kKinds; ++k) {
    if (stride_[k] == 0) continue;
    alloc(pool_[k], static_cast<size_t>((n_slot + 1) * stride_[k]));
    FT_CUDA_CHECK(cudaMemset(pool_[k].get(), 0, pool_[k].bytes()));
  }
  alloc(bank_, static_cast<size_t>((n_slot + 1) * 4) * sizeof(float));
  FT_CUDA_CHECK(cudaMemset(bank_.get(), 0, bank_.bytes()));
  const int64_t L = static_cast<int64_t>(hb.layers.size());
  const size_t ne = static_cast<size_t>(L * n_expert_max_);
  using u64 = unsigned long long;
  alloc(slot_of_, ne * sizeof(int32_t));
  alloc(expert_of_slot_, static_cast<size_t>(n_slot) * sizeof(int32_t));
  alloc(last_use_, static_cast<size_t>(n_slot) * sizeof(u64));
  alloc(step_, sizeof(u64));
  alloc(recency_, ne * sizeof(u64));
  alloc(n_miss_, sizeof(int32_t));
  alloc(miss_slot_, static_cast<size_t>(max_routes) * sizeof(int32_t));
  alloc(miss_expert_, static_cast<size_t>(max_routes) * sizeof(int32_t));
  alloc(slot_ids_, static_cast<size_t>(max_routes) * sizeof(int32_t));
  alloc(counters_, static_cast<size_t>(L * 4) * sizeof(u64));
  st_.slot_of = slot_of_.as<int32_t>();
  st_.expert_of_slot = expert_of_slot_.as<int32_t>();
  st_.last_use = last_use_.as<u64>();
  st_.step = step_.as<u64>();
  st_.recency = recency_.as<u64>();
  st_.n_layer = L;
  st_.n_expert = n_expert_max_;
  st_.n_slot = n_slot;
  miss_.n_miss = n_miss_.as<int32_t>();
  miss_.miss_slot = miss_slot_.as<int32_t>();
  miss_.miss_expert = miss_expert_.as<int32_t>();
  cuda::moe_cache_reset(st_, nullptr);
  FT_CUDA_CHECK(cudaMemset(n_miss_.get(), 0, sizeof(int32_t)));
  FT_CUDA_CHECK(cudaMemset(counters_.get(), 0, counters_.bytes()));
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  host_stats_.assign(hb.layers.size(), MoeLayerStats{});

  const char* copy = std::getenv("FT_MOE_COPY");
  per_bank_ = copy && std::strcmp(copy, "per_bank") == 0;
  n_buf_ = n_slot >= 2 * n_expert_max_ ? 2 : 1;
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&gauge_, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    FT_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[i], cudaEventDisableTiming));
    FT_CUDA_CHECK(cudaEventCreateWithFlags(&release_[i], cudaEventDisableTiming));
  }
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&begin_, cudaEventDisableTiming));
  if (const char* c = std::getenv("FT_MOE_GATHER_CLOCK"); c && c[0] == '1') {
    alloc(clock_, static_cast<size_t>(L * 2 * 4) * sizeof(u64));
    FT_CUDA_CHECK(cudaMemset(clock_.get(), 0xff, clock_.bytes()));
  }
}

int64_t SlotCache::preload() {
  cudaStream_t s = copy_;  // idle until the first prompt
  if (const char* e = std::getenv("FT_MOE_PRELOAD"); e && e[0] == '0') return 0;
  const int64_t n_layer = static_cast<int64_t>(moe_layers_.size());
  // Slots [0, n_buf E) are the prefill buffers (invalidated by every prompt): held out of the
  // victim search meanwhile by a last_use no step reaches (~0).
  const int64_t n_held = std::min<int64_t>(st_.n_slot, n_buf_ * n_expert_max_);
  const int64_t per_layer = std::min<int64_t>({n_expert_max_, (st_.n_slot - n_held) / n_layer,
                                               int64_t{cuda::kCacheMaxRoutes}});
  if (per_layer <= 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  cuda::DeviceBuffer ids(sizeof(int32_t) * static_cast<size_t>(per_layer));
  cuda::DeviceBuffer n_miss(sizeof(int32_t)), miss_slot(ids.bytes()), miss_expert(ids.bytes());
  std::vector<int32_t> iota(static_cast<size_t>(per_layer));
  for (int64_t i = 0; i < per_layer; ++i) iota[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  FT_CUDA_CHECK(cudaMemcpyAsync(ids.get(), iota.data(), ids.bytes(), cudaMemcpyHostToDevice, s));
  const cuda::CacheMisses m{n_miss.as<int32_t>(), miss_slot.as<int32_t>(), miss_expert.as<int32_t>()};
  FT_CUDA_CHECK(cudaMemsetAsync(st_.last_use, 0xff, static_cast<size_t>(n_held) * sizeof(uint64_t), s));
  int64_t loaded = 0;
  for (const int64_t layer : moe_layers_) {
    const int64_t n = std::min(per_layer, hb_.layers[layer].n_expert);
    cuda::moe_cache_ensure(st_, layer, ids.as<int32_t>(), n, nullptr, m, nullptr, s);
    gather(layer, n, s, m);
    loaded += n;
  }
  FT_CUDA_CHECK(cudaMemsetAsync(st_.last_use, 0, static_cast<size_t>(n_held) * sizeof(uint64_t), s));
  FT_CUDA_CHECK(cudaStreamSynchronize(s));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double gb = static_cast<double>(loaded * slot_bytes(hb_)) / 1e9;
  log::info("moe cache: preloaded {} experts a layer ({} in all, {:.2f} GB) in {:.0f} ms ({:.1f} GB/s); "
            "FT_MOE_PRELOAD=0 starts empty",
            per_layer, loaded, gb, ms, ms > 0 ? gb / ms * 1e3 : 0.0);
  return loaded;
}

void SlotCache::clock_reset(cudaStream_t s) const {
  if (clock_on()) FT_CUDA_CHECK(cudaMemsetAsync(clock_.get(), 0xff, clock_.bytes(), s));
}

// The last decode step's gathers in start order: per layer its own misses (demand) and the
// guesses copied for it (spec). PCIe counts as busy while any gather runs; the rest of the
// span from the first start to the last end is idle. A gap is charged to the gather it
// precedes, so "before demand" is the time PCIe waited for a layer's ensure.
std::string SlotCache::timeline() const {
  if (!clock_on()) return "";
  using u64 = unsigned long long;
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<u64> c = cuda::to_host<u64>(clock_, static_cast<size_t>(st_.n_layer * 2 * 4));
  struct Span {
    u64 t0, t1, n;
    int kind;
  };
  std::vector<Span> v;
  for (int64_t l = 0; l < st_.n_layer; ++l)
    for (int k = 0; k < 2; ++k) {
      const u64* r = &c[static_cast<size_t>((l * 2 + k) * 4)];
      if (r[0] == ~0ull || r[1] == ~0ull) continue;  // no miss copied
      v.push_back({r[0], ~r[1], r[2], k});
    }
  if (v.empty()) return "gather timeline: no copy in the last decode step\n";
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.t0 < b.t0; });
  double busy = 0, gap[2] = {0, 0}, span[2] = {0, 0}, n[2] = {0, 0}, cnt[2] = {0, 0};
  u64 end = v[0].t0;
  for (const Span& x : v) {
    if (x.t0 > end) gap[x.kind] += static_cast<double>(x.t0 - end);
    const u64 from = x.t0 > end ? x.t0 : end;
    if (x.t1 > from) busy += static_cast<double>(x.t1 - from);
    end = x.t1 > end ? x.t1 : end;
    span[x.kind] += static_cast<double>(x.t1 - x.t0);
    n[x.kind] += static_cast<double>(x.n);
    cnt[x.kind] += 1;
  }
  const double total = static_cast<double>(end - v[0].t0);
  const double eb = static_cast<double>(slot_bytes(hb_));
  auto gbs = [&](int k) { return span[k] > 0 ? n[k] * eb / span[k] : 0.0; };  // bytes per ns = GB/s
  return fmt::format(
      "gather timeline (last decode step, FT_MOE_GATHER_CLOCK): {:.1f} us from the first copy to the last, PCIe busy "
      "{:.1f} us ({:.1f}%); demand gathers {:.0f} ({:.0f} experts, {:.1f} us, {:.1f} GB/s while running, idle "
      "before them {:.1f} us); speculative {:.0f} ({:.0f} experts, {:.1f} us, {:.1f} GB/s, idle before them {:.1f} "
      "us)\n",
      total / 1e3, busy / 1e3, total > 0 ? 100.0 * busy / total : 0.0, cnt[0], n[0], span[0] / 1e3, gbs(0),
      gap[0] / 1e3, cnt[1], n[1], span[1] / 1e3, gbs(1), gap[1] / 1e3);
}

SlotCache::~SlotCache() {
  for (int i = 0; i < 2; ++i) {
    if (ready_[i]) cudaEventDestroy(ready_[i]);
    if (release_[i]) cudaEventDestroy(release_[i]);
  }
  if (begin_) cudaEventDestroy(begin_);
  if (copy_) cudaStreamDestroy(copy_);
  if (gauge_) cudaStreamDestroy(gauge_);
}

ExpertView SlotCache::view(int64_t layer, int64_t first, int64_t n) const {
  const HostLayerBank& B = hb_.layers[layer];
  ExpertView v;
  DevExpertTensor* d[4] = {&v.gate, &v.up, &v.gate_up, &v.down};
  for (int k = 0; k < kKinds; ++k) {
    const HostExpertTensor& t = kind_of(B, k);
    if (!t) continue;
    d[k]->type = t.type;
    d[k]->w = pool_[k].as<uint8_t>() + first * stride_[k];
    d[k]->row_bytes = t.row_bytes;
    d[k]->expert_bytes = stride_[k];
    d[k]->rows = t.rows;
    d[k]->k = t.k;
  }
  v.bank = bank_.as<float>() + 4 * first;
  v.n_expert = n;
  v.n_embd = B.n_embd;
  v.n_ff = B.n_ff;
  v.gelu = B.gelu;
  return v;
}

void SlotCache::gather(int64_t layer, int64_t max_miss, cudaStream_t s) const {
  gather(layer, max_miss, s, miss_, kClockDemand);
}

void SlotCache::gather(int64_t layer, int64_t max_miss, cudaStream_t s, const cuda::CacheMisses& miss,
                       int clock) const {
  const HostLayerBank& B = hb_.layers[layer];
  cuda::GatherPlan all;
  if (clock_on() && clock >= 0) all.clock = clock_.as<unsigned long long>() + (layer * 2 + clock) * 4;
  for (int k = 0; k < kKinds; ++k) {
    const HostExpertTensor& t = kind_of(B, k);
    if (!t) continue;
    all.kind[all.n_kind++] = {t.dev, pool_[k].as<uint8_t>(), t.expert_bytes, stride_[k]};
  }
  all.kind[all.n_kind++] = {reinterpret_cast<const uint8_t*>(B.scales_dev), bank_.as<uint8_t>(),
                            4 * static_cast<int64_t>(sizeof(float)), 0};
  if (!per_bank_) {
    cuda::moe_cache_gather(all, miss, max_miss, s);
    return;
  }
  for (int k = 0; k < all.n_kind; ++k) {
    cuda::GatherPlan one;
    one.kind[0] = all.kind[k];
    one.n_kind = 1;
    one.clock = all.clock;
    cuda::moe_cache_gather(one, miss, max_miss, s);
  }
}

void SlotCache::issue_layer_copy(int64_t mi) {
  const int64_t layer = moe_layers_[mi];
  const HostLayerBank& B = hb_.layers[layer];
  const int buf = static_cast<int>(mi % n_buf_);
  const int64_t first = buf * n_expert_max_;
  FT_CUDA_CHECK(cudaStreamWaitEvent(copy_, release_[buf], 0));
  int64_t bytes = 0;
  for (int k = 0; k < kKinds; ++k) {
    const HostExpertTensor& t = kind_of(B, k);
    if (!t) continue;
    FT_CUDA_CHECK(cudaMemcpy2DAsync(pool_[k].as<uint8_t>() + first * stride_[k], static_cast<size_t>(stride_[k]),
                                    t.host, static_cast<size_t>(t.expert_bytes), static_cast<size_t>(t.expert_bytes),
                                    static_cast<size_t>(B.n_expert), cudaMemcpyHostToDevice, copy_));
    bytes += t.expert_bytes * B.n_expert;
  }
  FT_CUDA_CHECK(cudaMemcpyAsync(bank_.as<float>() + 4 * first, B.scales,
                                static_cast<size_t>(B.n_expert * 4) * sizeof(float), cudaMemcpyHostToDevice, copy_));
  bytes += B.n_expert * 16;
  FT_CUDA_CHECK(cudaEventRecord(ready_[buf], copy_));
  host_stats_[layer].bytes_h2d += static_cast<uint64_t>(bytes);
  host_stats_[layer].prefill_layers += 1;
  issued_ = mi;
}

void SlotCache::prefill(const MoeStep& st, cudaStream_t s) {
  const int64_t mi = moe_idx_of_[st.layer];
  if (mi < 0) fail("SlotCache::prefill: layer {} has no routed experts", st.layer);
  if (mi == 0) {
    // A new forward pass: the buffer slots stop caching decode experts (after the decode work
    // queued on s before), and the copy stream starts behind that.
    cuda::moe_cache_invalidate(st_, 0, n_buf_ * n_expert_max_, s);
    FT_CUDA_CHECK(cudaEventRecord(begin_, s));
    FT_CUDA_CHECK(cudaStreamWaitEvent(copy_, begin_, 0));
    issued_ = -1;
  }
  if (issued_ < mi) issue_layer_copy(mi);
  const int64_t n_moe = static_cast<int64_t>(moe_layers_.size());
  if (n_buf_ == 2 && mi + 1 < n_moe && issued_ < mi + 1) issue_layer_copy(mi + 1);
  const int buf = static_cast<int>(mi % n_buf_);
  FT_CUDA_CHECK(cudaStreamWaitEvent(s, ready_[buf], 0));
  moe_experts_prefill(view(st.layer, buf * n_expert_max_, hb_.layers[st.layer].n_expert), st.ids, st, s);
  FT_CUDA_CHECK(cudaEventRecord(release_[buf], s));
}

MoeStats SlotCache::stats() const {
  using u64 = unsigned long long;
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<u64> c = cuda::to_host<u64>(counters_, static_cast<size_t>(st_.n_layer * 4));
  const std::vector<u64> step = cuda::to_host<u64>(step_, 1);
  MoeStats s;
  s.layers = host_stats_;
  for (int64_t l = 0; l < st_.n_layer; ++l) {
    MoeLayerStats& x = s.layers[static_cast<size_t>(l)];
    x.routes += c[4 * l + 0];
    x.hits += c[4 * l + 1];
    x.misses_fetched += c[4 * l + 2];
    x.misses_cpu += c[4 * l + 3];
    const HostLayerBank& B = hb_.layers[static_cast<size_t>(l)];
    x.bytes_h2d += c[4 * l + 2] * static_cast<u64>(B.expert_bytes() + 16);
  }
  s.decode_steps = (step[0] - step_base_) / static_cast<u64>(moe_layers_.size());
  return s;
}

MoeCacheGauges SlotCache::gauges() const {
  using u64 = unsigned long long;
  // Counters may be mid-update by a running ensure; a scrape reads some step's values.
  std::vector<u64> c(static_cast<size_t>(st_.n_layer * 4));
  std::vector<int32_t> eos(static_cast<size_t>(st_.n_slot));
  FT_CUDA_CHECK(cudaMemcpyAsync(c.data(), counters_.get(), c.size() * sizeof(u64), cudaMemcpyDeviceToHost, gauge_));
  FT_CUDA_CHECK(cudaMemcpyAsync(eos.data(), st_.expert_of_slot, eos.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                gauge_));
  FT_CUDA_CHECK(cudaStreamSynchronize(gauge_));
  MoeCacheGauges g;
  g.slots = st_.n_slot;
  for (int32_t f : eos) g.slots_used += f >= 0;
  for (int64_t l = 0; l < st_.n_layer; ++l) {
    g.routes += c[static_cast<size_t>(4 * l + 0)];
    g.hits += c[static_cast<size_t>(4 * l + 1)];
    g.misses_fetched += c[static_cast<size_t>(4 * l + 2)];
    g.misses_cpu += c[static_cast<size_t>(4 * l + 3)];
  }
  return g;
}

void SlotCache::reset_stats() {
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  FT_CUDA_CHECK(cudaMemset(counters_.get(), 0, counters_.bytes()));
  step_base_ = cuda::to_host<unsigned long long>(step_, 1)[0];
  host_stats_.assign(host_stats_.size(), MoeLayerStats{});
}

MoeOffload::MoeOffload(const model::Model& m, const DeviceWeights& w, std::shared_ptr<const HostBanks> hb,
                       int64_t n_slot, int64_t max_routes)
    : m_(m),
      w_(w),
      hb_(std::move(hb)),
      cache_(m, w, *hb_, n_slot, max_routes),
      // Speculative fetches by default (2 a layer): on the H200's Qwen3-30B-A3B-shaped file
      // (benches/h200.md, session 7) the next layer's router on this layer's FFN input picks 83%
      // of its real routes, and 2 guessed experts a layer took offload at half the experts cached
      // from 67.1 to 78.8 tok/s (1 guess: 76.1; 3 and 4: 72.2 and 71.3 in the final call).
      spec_(m, w, max_routes, MoeSpec::k_from_env(2)),
      max_routes_(max_routes) {
  const char* ov = std::getenv("FT_MOE_OFFLOAD_OVERLAP");
  overlap_ = ov && ov[0] == '1';
  const char* pg = std::getenv("FT_MOE_PREGATE");
  pregate_ = pg && pg[0] == '1';
  if (pregate_) {
    std::string why;
    if (!MoeSpec::plain_routers(m_, w_, &why)) {
      log::warn("FT_MOE_PREGATE: off ({}: {})", m_.hp.arch, why);
      pregate_ = false;
    }
  }
  int64_t n_embd = 0;
  for (const HostLayerBank& B : hb_->layers) n_embd = std::max(n_embd, B.n_embd);
  auto alloc = [&](cuda::DeviceBuffer& b, size_t bytes) {
    b = cuda::DeviceBuffer(bytes);
    FT_CUDA_CHECK(cudaMemset(b.get(), 0, bytes));
    extra_bytes_ += bytes;
  };
  extra_bytes_ += spec_.device_bytes();
  // The speculative copies run on the overlap's gather stream (moe_offload.h).
  if (spec_.k() > 0) overlap_ = true;
  if (overlap_ || pregate_) alloc(split_, static_cast<size_t>(3 * max_routes) * sizeof(int32_t));
  if (overlap_) {
    alloc(y_miss_, static_cast<size_t>(max_routes * n_embd) * sizeof(float));
    int64_t n_ff = 0;
    for (const HostLayerBank& B : hb_->layers) n_ff = std::max(n_ff, B.n_ff);
    if (n_ff % 32 == 0) alloc(xq_mid_, cuda::act_q8_bytes(n_ff, max_routes));
    FT_CUDA_CHECK(cudaStreamCreateWithFlags(&gather_s_, cudaStreamNonBlocking));
    FT_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    FT_CUDA_CHECK(cudaEventCreateWithFlags(&gathered_, cudaEventDisableTiming));
  }
  if (pregate_) {
    const int64_t L = static_cast<int64_t>(w_.layers.size());
    alloc(pred_, static_cast<size_t>(L * 2 * max_routes) * sizeof(int32_t));
    alloc(logits_, static_cast<size_t>(cuda::kGemvMaxTokens * m_.hp.n_expert) * sizeof(float));
    alloc(pwts_, static_cast<size_t>(max_routes) * sizeof(float));
    alloc(ticket_, sizeof(unsigned));
    alloc(hnorm_, static_cast<size_t>(cuda::kGemvMaxTokens * n_embd) * sizeof(float));
    alloc(pcount_, 6 * sizeof(unsigned long long));
  }
  cache_.preload();
}

MoeOffload::~MoeOffload() {
  if (fork_) cudaEventDestroy(fork_);
  if (gathered_) cudaEventDestroy(gathered_);
  if (gather_s_) cudaStreamDestroy(gather_s_);
}

void MoeOffload::decode(const MoeStep& st, cudaStream_t s) {
  const int64_t n = st.n_slots();
  cuda::CacheSplit split;
  if (overlap_ || pregate_) {
    int32_t* p = split_.as<int32_t>();
    split = {p, p + max_routes_, p + 2 * max_routes_, cache_.dummy_slot()};
  }
  if (st.layer == spec_.first_moe()) cache_.clock_reset(s);
  spec_.wait_booked(s);  // the guesses made for this layer hold their slots (moe_spec.h)
  cuda::moe_cache_ensure(cache_.state(), st.layer, st.ids, n, cache_.slot_ids(), cache_.misses(), cache_.counters(),
                         s, split);
  const int64_t next = pregate_ ? spec_.next_moe(st.layer) : -1;
  if (pregate_) {
    // This layer's routes against what the layer before predicted (none for the first).
    if (st.layer != spec_.first_moe()) {
      const int32_t* p = pred_.as<int32_t>() + st.layer * 2 * max_routes_;
      cuda::moe_route_overlap(st.ids, p, p + max_routes_, split.miss_mark, n, st.n_used,
                              pcount_.as<unsigned long long>(), s);
    }
    if (next >= 0) pregate_predict(st, next, /*after=*/false, s);
  }
  if (overlap_) {
    decode_overlap(st, s);
  } else {
    cache_.gather(st.layer, n, s);
    moe_experts_decode(cache_.view(st.layer, 0, cache_.n_slot()), cache_.slot_ids(), st, s);
  }
  if (next >= 0) pregate_predict(st, next, /*after=*/true, s);
}

// The hit routes' GEMVs on s while the gather runs on gather_s_ (moe_offload.h); the
// guessed experts of the next layer follow this layer's misses on gather_s_ (moe_spec.h).
void MoeOffload::decode_overlap(const MoeStep& st, cudaStream_t s) {
  const int64_t n = st.n_slots();
  const int32_t* hit_ids = split_.as<int32_t>();
  const int32_t* miss_ids = hit_ids + max_routes_;
  const int32_t* miss_mark = hit_ids + 2 * max_routes_;
  FT_CUDA_CHECK(cudaEventRecord(fork_, s));
  FT_CUDA_CHECK(cudaStreamWaitEvent(gather_s_, fork_, 0));
  cache_.gather(st.layer, n, gather_s_);
  FT_CUDA_CHECK(cudaEventRecord(gathered_, gather_s_));
  // This layer's hits include the experts guessed for it: s waits for those copies BEFORE
  // fetch() records the event again for the next layer's (a wait binds the latest record).
  if (!spec_.from_output()) spec_.guess(st, s);
  spec_.wait_copies(s);
  if (!spec_.from_output()) spec_.fetch(cache_, st, gather_s_);
  // The dummy slot is a position of the view (n_slot + 1 of them).
  const ExpertView v = cache_.view(st.layer, 0, cache_.n_slot() + 1);
  float* y_hit = st.b->ysort.as<float>();  // the prefill's [slots][n_embd] scratch, idle in decode
  // The hit pass's SwiGLU writes its Q8 rows to xq_mid_, so b.xq keeps h's Q8 copy (made
  // by the hit pass's gate GEMV when it was not ready) for the miss pass: one quantise launch
  // a layer fewer than quantising h again.
  const HostLayerBank& B = hb_->layers[static_cast<size_t>(st.layer)];
  const bool keep_xq = xq_mid_.get() != nullptr && B.n_ff % 32 == 0;  // else the down GEMV quantises into b.xq
  MoeStep hits = st;
  if (keep_xq) hits.xq_mid = xq_mid_.get();
  moe_experts_decode_slots(v, hit_ids, hits, y_hit, s);
  FT_CUDA_CHECK(cudaStreamWaitEvent(s, gathered_, 0));
  MoeStep again = st;
  again.xq_ready = keep_xq;
  moe_experts_decode_slots(v, miss_ids, again, y_miss_.as<float>(), s);
  const int64_t n_embd = B.n_embd;
  cuda::moe_combine_split(y_hit, y_miss_.as<float>(), miss_mark, st.wts, st.n_tok, st.n_used, n_embd, st.x, n_embd,
                          st.num->round, s);
  if (spec_.from_output()) {
    spec_.guess(st, s);
    spec_.fetch(cache_, st, gather_s_);
  }
}

// The next MoE layer's routes predicted from this layer's FFN input (st.h) or, after the
// experts, from its output (st.x) under the next layer's FFN norm: into pred_[next][after].
void MoeOffload::pregate_predict(const MoeStep& st, int64_t next, bool after, cudaStream_t s) {
  const DevLayer& D = w_.layers[static_cast<size_t>(next)];
  const DevMatrix& r0 = D.router.parts[0];
  const int64_t n_embd = m_.hp.n_embd, n_expert = m_.hp.n_expert;
  const float* in = st.h;
  if (after) {
    cuda::rmsnorm(st.x, n_embd, D.ffn_norm, n_embd, m_.hp.rms_eps, st.n_tok, hnorm_.as<float>(), n_embd,
                  st.num->round, s);
    in = hnorm_.as<float>();
  }
  int32_t* out = pred_.as<int32_t>() + (next * 2 + (after ? 1 : 0)) * max_routes_;
  cuda::moe_router_route(in, n_embd, st.n_tok, r0.type, r0.w, r0.row_bytes, r0.k, n_expert, logits_.as<float>(),
                         n_expert, st.n_used, out, pwts_.as<float>(), ticket_.as<unsigned>(), s);
}

MoeStats MoeOffload::stats() const {
  MoeStats r = cache_.stats();
  if (pregate_) {
    const std::vector<unsigned long long> c = cuda::to_host<unsigned long long>(pcount_, 6);
    for (int i = 0; i < 6; ++i) r.pregate[i] = c[static_cast<size_t>(i)];
  }
  r.spec_fetched = spec_.fetched();
  if (cache_.clock_on()) log::info("{}", cache_.timeline());
  return r;
}

void MoeOffload::reset_stats() {
  cache_.reset_stats();
  if (pregate_) FT_CUDA_CHECK(cudaMemset(pcount_.get(), 0, pcount_.bytes()));
  spec_.reset_stats();
}

std::string MoeOffload::describe() const {
  const int64_t sb = SlotCache::slot_bytes(*hb_);
  return fmt::format("offload ({} GPU slots of {:.2f} MiB = {:.0f} MiB, {} prefill buffer(s), {} copy{}{}; host "
                     "banks {:.0f} MiB pinned)",
                     cache_.n_slot(), sb / kMiB, static_cast<double>(cache_.n_slot() * sb) / kMiB,
                     cache_.n_prefill_buffers(), cache_.per_bank() ? "per-bank" : "fused gather",
                     overlap_ ? ", hits computed during the gather" : "",
                     spec_.k() > 0 ? ", " + spec_.describe() : std::string(pregate_ ? ", pre-gating measured" : ""),
                     static_cast<double>(hb_->bytes()) / kMiB);
}

}  // namespace ft::gpu
