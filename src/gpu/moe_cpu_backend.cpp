#include "gpu/moe_cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "gpu/moe_hybrid.h"
#include "gpu/moe_offload.h"
#include "gpu/moe_spec.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

moe_cpu::HostExpertTensor view_of(const HostExpertTensor& t) {
  moe_cpu::HostExpertTensor v;
  if (!t) return v;
  v.type = t.type;
  v.w = t.host;
  v.row_bytes = t.row_bytes;
  v.expert_bytes = t.expert_bytes;
  v.rows = t.rows;
  v.k = t.k;
  return v;
}

}  // namespace

moe_cpu::HostExperts host_experts_of(const HostLayerBank& b) {
  moe_cpu::HostExperts h;
  h.gate = view_of(b.gate);
  h.up = view_of(b.up);
  h.gate_up = view_of(b.gate_up);
  h.down = view_of(b.down);
  h.bank = b.scales;
  h.n_expert = b.n_expert;
  h.n_embd = b.n_embd;
  h.n_ff = b.n_ff;
  h.glu = b.gelu ? engine::Glu::kGelu : engine::Glu::kSilu;  // GeGLU: gemma4
  return h;
}

moe_cpu::GpuDotPlan gpu_dot_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_out, int n_sub, bool q8) {
  using moe_cpu::GpuDot;
  // The dispatch of cuda::gemv for a grouped call (gemv.cu, gemv_nvfp4.cu, gemv_q8.cu): the
  // float path has a fixed order; NVFP4 on the integer path takes the packed or slab kernel
  // per gemv_nvfp4_plan (each with one order whatever its rows per item); the generic
  // integer kernel sums in the plan's lanes.
  if (!q8 || !cuda::gemv_q8_supported(type)) return {GpuDot::kFloat, 32};
  if (type == GgmlType::NVFP4) {
    const cuda::GemvNvfp4Plan pl = cuda::gemv_nvfp4_plan(rows, k, 1, n_out, n_sub, true);
    if (pl.kernel == 2) return {GpuDot::kNvfp4Packed, 32};
    if (pl.kernel == 1) return {GpuDot::kNvfp4Slab, 32};
  }
  return {GpuDot::kQ8Generic, cuda::gemv_q8_plan(type, rows, k, 1, n_out, n_sub).lanes};
}

bool moe_cpu_exact_enabled() {
  const char* e = std::getenv("FT_MOE_CPU_EXACT");
  return e == nullptr || std::strcmp(e, "0") != 0;
}

moe_cpu::ExpertNumerics expert_numerics_of(const GpuNumerics& num) {
  moe_cpu::ExpertNumerics n;
  if (moe_cpu_exact_enabled()) n.gpu_plan = gpu_dot_plan;
  switch (num.round) {
    case cuda::Round::kBF16: n.act = engine::ActType::kBF16; break;
    case cuda::Round::kF16: n.act = engine::ActType::kF16; break;
    default: n.act = engine::ActType::kF32; break;
  }
  n.act_quant = num.q8 ? quant::ActQuant::kQ8 : quant::ActQuant::kNone;
  n.q8_quantised_only = true;
  return n;
}

// Prefill on the GPU is a GEMM on tensor cores in --dtype auto / bfloat16 / float16: the
// inputs meet the weights rounded to the GEMM's dtype, no Q8 activations.
moe_cpu::ExpertNumerics prefill_numerics_of(const GpuNumerics& num) {
  moe_cpu::ExpertNumerics n = expert_numerics_of(num);
  n.gpu_plan = nullptr;  // tensor-core GEMMs: no GEMV order to mirror
  n.act_quant = quant::ActQuant::kNone;
  switch (num.prec) {
    case cuda::GemmPrec::kBF16: n.round_inputs = engine::ActType::kBF16; break;
    case cuda::GemmPrec::kF16: n.round_inputs = engine::ActType::kF16; break;
    default: n.round_inputs = engine::ActType::kF32; break;
  }
  return n;
}

// ---- CpuExpertService -------------------------------------------------------------------

CpuExpertService::CpuExpertService(const model::Model& m, std::shared_ptr<const HostBanks> hb, int threads,
                                   int64_t max_tok, int64_t n_used, bool slot_out)
    : hb_(std::move(hb)),
      slot_out_(slot_out),
      pool_(moe_cpu::CpuPoolOptions{threads, true, 1}),
      exec_(pool_.pool()) {
  n_layer_ = static_cast<int64_t>(hb_->layers.size());
  layers_.resize(static_cast<size_t>(n_layer_));
  for (int64_t il = 0; il < n_layer_; ++il) {
    const HostLayerBank& b = hb_->layers[il];
    if (!b.moe()) continue;
    layers_[il] = host_experts_of(b);
    moe_cpu::check_host_experts(layers_[il], fmt::format("{}: blk.{}", m.file->path(), il).c_str());
    n_embd_ = b.n_embd;
    if (first_moe_ < 0) first_moe_ = il;
  }
  if (n_embd_ == 0) fail("{}: the cpu / hybrid MoE backends need a model with routed experts", m.file->path());
  // 768 KiB a thread: the top 6 of 8 guesses of a Qwen3-30B-A3B NVFP4 layer at 15 threads
  // (7 items of 112 gate|up rows a thread); the gap between two layers' tasks moves about
  // 50 us x 9 GB/s = 450 KB a thread, and the prefetch stops when the next task arrives.
  warm_kib_ = 768;
  if (const char* e = std::getenv("FT_MOE_CPU_WARM_KIB")) warm_kib_ = std::max(0, std::atoi(e));
  lay_ = cuda::moe_cpu_task_layout(n_embd_, max_tok, n_used);
  hint_ = MappedHostBuffer(sizeof(cuda::MoeCpuHintHeader) + sizeof(int32_t) * static_cast<size_t>(max_tok * n_used));
  reinterpret_cast<cuda::MoeCpuHintHeader*>(hint_.host())->tag = -1;
  task_ = MappedHostBuffer(lay_.bytes);
  out_ = MappedHostBuffer(sizeof(float) * static_cast<size_t>(max_tok * (slot_out_ ? n_used : 1) * n_embd_));
  routes_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(n_layer_));
  for (int64_t i = 0; i < n_layer_; ++i) routes_[i] = 0;
  const char* pd = std::getenv("FT_MOE_CPU_PIN_DRIVER");
  if (pool_.pinned() && (pd == nullptr || std::strcmp(pd, "0") != 0)) driver_cpus_ = moe_cpu::cpus_off_cores(pool_.cpus());
  CpuHandshakeOptions ho;
  ho.n_slots = static_cast<int>(n_layer_);
  ho.coordinator_cpu = pool_.caller_cpu();
  hs_ = std::make_unique<CpuHandshake>(ho, [this](int layer) { handle(layer); }, [this](int layer) { warm(layer); });
}

CpuExpertService::~CpuExpertService() {
  const uint64_t n = hs_ ? hs_->tasks() : 0;
  if (n > 0)
    log::info("moe cpu: {} tasks, {:.1f} us of CPU expert work per task (coordinator + {} workers)", n,
              hs_->busy_seconds() / static_cast<double>(n) * 1e6, pool_.size() - 1);
  const moe_cpu::ExpertExecutor::WarmStats w = exec_.warm_stats();
  if (w.guessed > 0)
    log::info("moe cpu: warm-up: {} guessed experts prefetched, {} of them used ({:.1f}%); {} of their {} gate|up "
              "items taken by the thread that prefetched them",
              w.guessed, w.used, 100.0 * static_cast<double>(w.used) / static_cast<double>(w.guessed), w.items_owner,
              w.items);
  hs_.reset();  // joins the coordinator before the pool and the buffers go
}

void CpuExpertService::handle(int layer) {
  const uint8_t* t = task_.host();
  cuda::MoeCpuTaskHeader hd;
  std::memcpy(&hd, t, sizeof(hd));
  const auto* h = reinterpret_cast<const float*>(t + lay_.h_off);
  const auto* ids = reinterpret_cast<const int32_t*>(t + lay_.ids_off);
  const auto* wts = reinterpret_cast<const float*>(t + lay_.wts_off);
  auto* out = reinterpret_cast<float*>(out_.host());
  std::lock_guard<std::mutex> lock(exec_mu_);
  // A malformed task must not take the process down from this thread: the header comes from
  // our own kernel, so a mismatch is a bug; answer zeros and log it.
  if (hd.layer != layer || hd.n_tok < 1 || hd.n_tok > lay_.max_tok || !layers_[layer].n_expert) {
    log::error("moe cpu: bad task for layer {} (header layer {}, {} tokens)", layer, hd.layer, hd.n_tok);
    std::memset(out, 0, out_.bytes());
    return;
  }
  try {
    exec_.run(layers_[layer], num_, h, n_embd_, hd.n_tok, ids, wts, hd.n_used, out, n_embd_);
    routes_[layer].fetch_add(static_cast<uint64_t>(exec_.last_routes()), std::memory_order_relaxed);
    if (layer == first_moe_) steps_.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    log::error("moe cpu: layer {}: {}", layer, e.what());
    std::memset(out, 0, out_.bytes());
  }
  // The next layer's guess, taken before this task's done flag: the GPU writes the next
  // hint only after that flag, so reading and clearing it here cannot race with the write.
  // Its tag is the layer it is for: the next MoE layer when it was written during this task
  // (enqueue_hint), an earlier one when it came too late for that layer's task (dropped).
  hint_for_ = -1;
  if (warm_kib_ > 0) {
    auto* hh = reinterpret_cast<cuda::MoeCpuHintHeader*>(hint_.host());
    std::atomic_ref<int32_t> tag(hh->tag);
    const int32_t t = tag.load(std::memory_order_acquire);
    if (t > layer && t < n_layer_ && hh->n > 0 && hh->n <= lay_.max_tok * lay_.n_used) {  // n 0: nothing for the CPU
      const auto* g = reinterpret_cast<const int32_t*>(hint_.host() + sizeof(cuda::MoeCpuHintHeader));
      hint_ids_.assign(g, g + hh->n);
      hint_for_ = t;
    }
    if (t >= 0) tag.store(-1, std::memory_order_relaxed);
  }
}

void CpuExpertService::warm(int) {
  const int64_t next = hint_for_;
  if (next < 0) return;
  hint_for_ = -1;
  std::lock_guard<std::mutex> lock(exec_mu_);
  try {
    exec_.prefetch_next(layers_[next], num_, hint_ids_.data(), static_cast<int>(hint_ids_.size()), warm_kib_,
                        hs_->ready_flag(static_cast<int>(next)));
  } catch (const std::exception& e) {  // a guess never matters for the result: log and go on
    log::warn("moe cpu: warm-up for layer {}: {}", next, e.what());
  }
}

void CpuExpertService::enqueue_hint(const int32_t* ids, int n, int64_t next, cudaStream_t s, const int32_t* slot_of,
                                    int skip) {
  if (warm_kib_ <= 0 || next < 0 || n <= 0 || n > lay_.max_tok * lay_.n_used) return;
  cuda::moe_cpu_hint(ids, n, static_cast<int32_t>(next), hint_.dev(), s, slot_of, skip);
}

void CpuExpertService::enqueue_submit(const MoeStep& st, const int32_t* ids, const float* wts, cudaStream_t s) {
  // Written once, before the stream can raise the first flag (a session's numerics never
  // change), so the coordinator never reads it while it is written.
  if (!num_set_) {
    num_ = expert_numerics_of(*st.num);
    num_.slot_out = slot_out_;
    num_set_ = true;
  }
  if (!driver_pin_tried_) {
    // The GPU-driving thread spins in the driver (launches, syncs) while the workers run: left
    // unpinned, the scheduler may put it on a worker's core (session 7's disturbed run: the
    // GLU phase 74.5 us against 27.4 in the next run of the same code).
    driver_pin_tried_ = true;
    if (!driver_cpus_.empty() && driver_pin_.pin(driver_cpus_))
      log::info("moe cpu: the GPU-driving thread is pinned to cpus {} (off the pool's cores)", fmt::join(driver_cpus_, ","));
  }
  cuda::moe_cpu_pack(lay_, st.h, n_embd_, st.n_tok, ids, wts, st.n_used, static_cast<int32_t>(st.layer), task_.dev(),
                     s);
  hs_->submit(static_cast<int>(st.layer), s);
}

void CpuExpertService::enqueue_finish(const MoeStep& st, cudaStream_t s) {
  hs_->wait(static_cast<int>(st.layer), s);
  if (slot_out_) return;
  cuda::moe_cpu_add(reinterpret_cast<const float*>(out_.dev()), st.n_tok, n_embd_, st.x, n_embd_, s);
}

void CpuExpertService::run_now(const MoeStep& st, cudaStream_t s) {
  const int64_t n_tok = st.n_tok, n_slots = st.n_slots();
  std::vector<float> h(static_cast<size_t>(n_tok * n_embd_)), wts(static_cast<size_t>(n_slots)),
      out(static_cast<size_t>(n_tok * n_embd_));
  std::vector<int32_t> ids(static_cast<size_t>(n_slots));
  const moe_cpu::ExpertNumerics pn = prefill_numerics_of(*st.num);
  FT_CUDA_CHECK(cudaMemcpyAsync(h.data(), st.h, h.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
  FT_CUDA_CHECK(cudaMemcpyAsync(ids.data(), st.ids, ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
  FT_CUDA_CHECK(cudaMemcpyAsync(wts.data(), st.wts, wts.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
  FT_CUDA_CHECK(cudaStreamSynchronize(s));
  {
    std::lock_guard<std::mutex> lock(exec_mu_);
    exec_.run(layers_[st.layer], pn, h.data(), n_embd_, n_tok, ids.data(), wts.data(), st.n_used, out.data(), n_embd_);
    routes_[st.layer].fetch_add(static_cast<uint64_t>(exec_.last_routes()), std::memory_order_relaxed);
  }
  // ysort ([n_slots][n_embd], the prefill scratch) holds the result for the add.
  float* dev = st.b->ysort.as<float>();
  FT_CUDA_CHECK(cudaMemcpyAsync(dev, out.data(), out.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  cuda::moe_cpu_add(dev, n_tok, n_embd_, st.x, n_embd_, s);
  FT_CUDA_CHECK(cudaStreamSynchronize(s));  // `out` dies here
}

std::vector<uint64_t> CpuExpertService::cpu_routes() const {
  std::vector<uint64_t> r(static_cast<size_t>(n_layer_));
  for (int64_t i = 0; i < n_layer_; ++i) r[i] = routes_[i].load(std::memory_order_relaxed);
  return r;
}

void CpuExpertService::reset_stats() {
  for (int64_t i = 0; i < n_layer_; ++i) routes_[i] = 0;
  steps_ = 0;
}

std::string CpuExpertService::describe() const {
  return fmt::format("CPU experts: {} ({}; {}), host banks {:.0f} MiB pinned; handshake: {}", pool_.describe(),
                     quant::matmul_isa(),
                     moe_cpu_exact_enabled() ? "exact: the GPU decode order" : "engine order (FT_MOE_CPU_EXACT=0)",
                     static_cast<double>(hb_->bytes()) / kMiB, hs_->describe());
}

// ---- MoeCpu -----------------------------------------------------------------------------

MoeCpu::MoeCpu(const MoeFactoryArgs& a)
    : svc_(*a.m, a.hb, a.o.threads, cuda::kGemvMaxTokens, a.max_routes / cuda::kGemvMaxTokens),
      clock_(static_cast<int64_t>(a.hb->layers.size()), {"between layers", "CPU submit", "guess", "wait for the CPU"}) {
  const model::Model& m = *a.m;
  const HostBanks* hb = a.hb.get();
  const int64_t n_used = a.max_routes / cuda::kGemvMaxTokens;
  clock_.set_cpu([this](int64_t l) { return svc_.cpu_times(l); }, 1, 3);
  // The warm-up's guesses: the next MoE layer's router on this layer's FFN input (moe_spec.h;
  // plain routers only, else MoeSpec turns itself off), run while the GPU waits for the CPU.
  if (svc_.warm_kib() > 0 && moe_cpu_exact_enabled()) {
    spec_ = std::make_unique<MoeSpec>(m, *a.w, a.max_routes, 1);
    if (spec_->k() == 0) spec_.reset();
  }
  const char* env = std::getenv("FT_MOE_CPU_PREFILL");
  if (env != nullptr && std::strcmp(env, "cpu") == 0) {
    prefill_how_ = "prefill on the CPU (FT_MOE_CPU_PREFILL=cpu)";
    return;
  }
  // Prefill slots only: two layer buffers when they fit in half the free memory, else one.
  int64_t e_max = 0;
  for (const HostLayerBank& b : hb->layers) e_max = std::max(e_max, b.n_expert);
  size_t free_b = 0, total_b = 0;
  FT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const int64_t sb = SlotCache::slot_bytes(*hb);
  int64_t n_slot = 0;
  if (2 * e_max * sb < static_cast<int64_t>(free_b / 2))
    n_slot = 2 * e_max;
  else if (e_max * sb < static_cast<int64_t>(free_b / 2))
    n_slot = e_max;
  if (n_slot == 0) {
    prefill_how_ = fmt::format("prefill on the CPU ({} prefill slots of {:.1f} MiB do not fit in {:.0f} MiB free)",
                               e_max, sb / kMiB, free_b / kMiB);
    return;
  }
  prefill_cache_ = std::make_unique<SlotCache>(m, *a.w, *hb, n_slot, cuda::kGemvMaxTokens * n_used);
  prefill_how_ = fmt::format("prefill streams whole layers through {} GPU slots ({:.0f} MiB)", n_slot,
                             static_cast<double>(n_slot * sb) / kMiB);
}

MoeCpu::~MoeCpu() = default;

void MoeCpu::decode(const MoeStep& st, cudaStream_t s) {
  clock_.stamp(st.layer, st.n_tok, 0, s);
  svc_.enqueue_submit(st, st.ids, st.wts, s);
  clock_.stamp(st.layer, st.n_tok, 1, s);
  if (spec_ && st.n_tok == 1 && spec_->next_moe(st.layer) >= 0) {
    spec_->guess(st, s);
    svc_.enqueue_hint(spec_->pred(), static_cast<int>(st.n_slots()), spec_->next_moe(st.layer), s);
  }
  clock_.stamp(st.layer, st.n_tok, 2, s);
  svc_.enqueue_finish(st, s);
  clock_.stamp(st.layer, st.n_tok, 3, s);
}

void MoeCpu::prefill(const MoeStep& st, cudaStream_t s) {
  if (prefill_cache_)
    prefill_cache_->prefill(st, s);
  else
    svc_.run_now(st, s);
}

std::string MoeCpu::describe() const {
  const std::string warm = spec_ ? fmt::format("; warm-up: the next layer's guessed gate|up rows, up to {} KiB a "
                                               "thread (FT_MOE_CPU_WARM_KIB)", svc_.warm_kib())
                                 : std::string("; no warm-up");
  return fmt::format("cpu ({}; {}{})", svc_.describe(), prefill_how_, warm);
}

MoeStats MoeCpu::stats() const {
  MoeStats s;
  if (prefill_cache_) s = prefill_cache_->stats();
  const std::vector<uint64_t> r = svc_.cpu_routes();
  if (s.layers.size() < r.size()) s.layers.resize(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    s.layers[i].routes = r[i];
    s.layers[i].misses_cpu = r[i];
    s.layers[i].hits = 0;
  }
  s.decode_steps = svc_.steps();
  return s;
}

void MoeCpu::reset_stats() {
  svc_.reset_stats();
  if (prefill_cache_) prefill_cache_->reset_stats();
}

size_t MoeCpu::device_bytes() const {
  return (prefill_cache_ ? prefill_cache_->device_bytes() : 0) + (spec_ ? spec_->device_bytes() : 0);
}

void register_moe_cpu_backends() {
  register_moe_backend("cpu", [](const MoeFactoryArgs& a) -> std::unique_ptr<MoeBackend> {
    return std::make_unique<MoeCpu>(a);
  });
  register_moe_backend("hybrid", [](const MoeFactoryArgs& a) -> std::unique_ptr<MoeBackend> {
    return std::make_unique<MoeHybrid>(a);
  });
}

}  // namespace ft::gpu
