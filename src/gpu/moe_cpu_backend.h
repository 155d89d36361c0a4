// The `cpu` MoE backend, and the CPU expert service the `hybrid` backend shares.
//
// CpuExpertService: the CPU side of a decode step's experts. Per MoE layer and step
//   enqueue_submit: a kernel writes h, the CPU routes' ids and weights into a mapped pinned
//                   task buffer; the ready flag is raised (cpu_handshake.h, capturable);
//   (the coordinator thread, pinned, runs moe_cpu::ExpertExecutor on the host banks with
//    a pool of one pinned thread per physical core; the result goes to a mapped buffer)
//   enqueue_finish: the stream waits for the done flag, then a kernel adds the result to x.
// Routes with id -1 are skipped (the GPU computes them in hybrid). Numerics follow the
// GPU's --dtype (moe_cpu::ExpertNumerics::q8_quantised_only): the same Q8 activation
// rounding and scales, and by default (exact mode, moe_cpu/gpu_dot.h) the GPU decode GEMV's
// summation order, so the result is the fused backend's bit for bit; FT_MOE_CPU_EXACT=0
// takes the engine's kernels instead (fp32 sums in another order, faster).
// The hybrid backend asks for per-route outputs (slot_out) and sums the ranks itself.
//
// MoeCpu (`--moe-backend cpu`): decode computes every routed expert on the CPU (no decode
// slots). Prefill streams whole expert layers through the offload backend's SlotCache (E or
// 2E slots, only for prefill), or runs on the CPU when those slots do not fit in device
// memory or FT_MOE_CPU_PREFILL=cpu.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/moe_cpu_io.h"
#include "gpu/cpu_handshake.h"
#include "gpu/host_bank.h"
#include "gpu/layer_clock.h"
#include "gpu/moe_backend.h"
#include "moe_cpu/cpu_pool.h"
#include "moe_cpu/cpu_topology.h"
#include "moe_cpu/expert_exec.h"

namespace ft::gpu {

class SlotCache;
class MoeSpec;

// The executor's view of one layer of the host banks.
moe_cpu::HostExperts host_experts_of(const HostLayerBank& b);
// The GPU decode GEMV's kernel and lanes for a grouped call (cuda/gemv_tuning.h): what the
// executor's exact mode mirrors.
moe_cpu::GpuDotPlan gpu_dot_plan(GgmlType type, int64_t rows, int64_t k, int64_t n_out, int n_sub, bool q8);
// Whether the CPU experts run in exact mode (FT_MOE_CPU_EXACT, default on).
bool moe_cpu_exact_enabled();
// Decode (GEMV) numerics of --dtype: Q8 activations for quantised weights in auto; exact
// mode (gpu_plan = gpu_dot_plan) unless FT_MOE_CPU_EXACT=0.
moe_cpu::ExpertNumerics expert_numerics_of(const GpuNumerics& num);
// Prefill (GEMM) numerics: inputs rounded to the tensor-core dtype, no Q8.
moe_cpu::ExpertNumerics prefill_numerics_of(const GpuNumerics& num);

class CpuExpertService {
 public:
  // max_tok: tokens per decode call (cuda::kGemvMaxTokens); n_used: ranks per token.
  // The numerics are the session's, read from MoeStep::num when work is enqueued.
  // slot_out: the result is per route (out[t * n_used + r], zeros for skipped routes) and
  // enqueue_finish does not add it (the hybrid backend combines); else per token, added to x.
  CpuExpertService(const model::Model& m, std::shared_ptr<const HostBanks> hb, int threads, int64_t max_tok,
                   int64_t n_used, bool slot_out = false);
  ~CpuExpertService();  // logs the tasks served and the CPU time per task

  // Capturable stream work (see above). ids/wts: device [n_tok * n_used], -1 = skip.
  void enqueue_submit(const MoeStep& st, const int32_t* ids, const float* wts, cudaStream_t s);
  void enqueue_finish(const MoeStep& st, cudaStream_t s);
  // Capturable, between enqueue_submit and enqueue_finish of a one-token step: the guessed
  // routes of the next MoE layer `next` (device ids, rank order) for the CPU's warm-up:
  // after this layer's task the pool prefetches their gate|up rows (ExpertExecutor::
  // prefetch_next) while the GPU runs its part of `next`. Off when warm_kib() is 0.
  // slot_of / skip (hybrid): keep only the guesses the CPU will compute (cuda::moe_cpu_hint).
  void enqueue_hint(const int32_t* ids, int n, int64_t next, cudaStream_t s, const int32_t* slot_of = nullptr,
                    int skip = 0);
  // FT_MOE_CPU_WARM_KIB: the warm-up's bytes per pool thread (0: off).
  int64_t warm_kib() const { return warm_kib_; }
  // The result buffer (device view of mapped memory), valid after enqueue_finish.
  const float* out_dev() const { return reinterpret_cast<const float*>(out_.dev()); }

  // Synchronous: any number of tokens, computed on the CPU now (prefill fallback), with
  // prefill_numerics_of (the GPU's prefill GEMM rounding).
  void run_now(const MoeStep& st, cudaStream_t s);

  // Routes computed on the CPU per layer since the last reset.
  std::vector<uint64_t> cpu_routes() const;
  // Decode steps served (tasks of the first MoE layer).
  uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  // FT_MOE_CLOCK's CPU side of layer's last task (cpu_handshake.h): realtime seen, done.
  std::pair<int64_t, int64_t> cpu_times(int64_t layer) const {
    return {hs_->seen_ns(static_cast<int>(layer)), hs_->done_ns(static_cast<int>(layer))};
  }
  void reset_stats();
  std::string describe() const;
  const std::shared_ptr<const HostBanks>& banks() const { return hb_; }

 private:
  void handle(int layer);  // coordinator thread
  void warm(int layer);    // coordinator thread, after layer's done flag: the hint handle() took

  std::shared_ptr<const HostBanks> hb_;
  std::vector<moe_cpu::HostExperts> layers_;
  moe_cpu::ExpertNumerics num_;
  bool num_set_ = false;  // set once, before the first task (the coordinator reads num_)
  bool slot_out_ = false;
  moe_cpu::CpuPool pool_;
  moe_cpu::ExpertExecutor exec_;
  std::mutex exec_mu_;  // the pool runs one loop at a time (coordinator vs run_now)
  cuda::MoeCpuTaskLayout lay_;
  MappedHostBuffer task_, out_, hint_;
  int64_t warm_kib_ = 0;
  std::vector<int32_t> hint_ids_;           // handle() takes the hint, warm() uses it
  int64_t hint_for_ = -1;                   // the layer of hint_ids_ (-1: none)
  std::unique_ptr<std::atomic<uint64_t>[]> routes_;
  std::atomic<uint64_t> steps_{0};
  int64_t n_layer_ = 0, n_embd_ = 0, first_moe_ = -1;
  // The thread that enqueues (drives the GPU) is pinned off the pool's cores at its first
  // submit (FT_MOE_CPU_PIN_DRIVER=0: not), so it never shares a core with a pinned worker.
  std::vector<int> driver_cpus_;
  moe_cpu::ThreadPin driver_pin_;
  bool driver_pin_tried_ = false;
  std::unique_ptr<CpuHandshake> hs_;  // last: its thread uses everything above
};

class MoeCpu : public MoeBackend {
 public:
  explicit MoeCpu(const MoeFactoryArgs& a);
  ~MoeCpu() override;
  void decode(const MoeStep& st, cudaStream_t s) override;
  void prefill(const MoeStep& st, cudaStream_t s) override;
  std::string describe() const override;
  MoeStats stats() const override;
  void reset_stats() override;
  size_t device_bytes() const override;
  size_t host_bytes() const override { return svc_.banks()->bytes(); }

 private:
  CpuExpertService svc_;
  std::unique_ptr<MoeSpec> spec_;  // the next layer's guess for the CPU's warm-up (nullptr: off)
  LayerClock clock_;                // FT_MOE_CLOCK=1
  std::unique_ptr<SlotCache> prefill_cache_;  // nullptr: prefill on the CPU
  std::string prefill_how_;
  uint64_t decode_calls_ = 0;
};

// Registers "cpu" and "hybrid" with make_moe_backend (gpu/moe_backend.h). Call once before
// building a GpuSession (cli/runner_factory.cpp does); idempotent.
void register_moe_cpu_backends();

}  // namespace ft::gpu
