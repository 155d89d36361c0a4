// The CPU expert executor: the routed experts of one MoE layer, computed on the CPU from
// expert tensors in host memory (the mapped GGUF, or the pinned host banks of the GPU's
// offload / cpu / hybrid backends).
//
//   out[t] = sum over ranks r with ids[t*n_used + r] >= 0, in rank order, of
//            w_r * y_r,   y_r = (Wd[e] . h) * s_down[e],
//            h = glu(g) * u,  g = (Wg[e] . x_t) * s_gate[e],  u = (Wu[e] . x_t) * s_up[e]
//   with e = ids[t*n_used + r], w_r = weights[t*n_used + r], s_* = the [E][4] scale bank.
//
// The CPU engine's MoeExperts (engine/moe.h, make_cpu_experts) is this executor over the
// mapped tensors; it equals the scalar twin expert_exec_ref (= moe_experts_ref) up to fp32
// summation order. An id of -1
// skips that route (the GPU owns it in the hybrid backend); a token with no route gets 0.
//
// Work: the (token, rank) slots are grouped by expert so each expert's rows are read once
// per call; gate|up, then down, each run as one parallel loop over (expert, row chunk)
// items on the pool (one thread per physical core, cpu_pool.h).
#pragma once

#include <atomic>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/threadpool.h"
#include "engine/exec.h"
#include "engine/geglu.h"
#include "engine/moe.h"
#include "format/ggml_type.h"
#include "moe_cpu/gpu_dot.h"

namespace ft::moe_cpu {

// One 3-D expert tensor in host memory: expert e's row r (k elements of `type`) at
// w + e*expert_bytes + r*row_bytes.
struct HostExpertTensor {
  GgmlType type = GgmlType::F32;
  const uint8_t* w = nullptr;
  int64_t row_bytes = 0;
  int64_t expert_bytes = 0;
  int64_t rows = 0;  // per expert
  int64_t k = 0;
  explicit operator bool() const { return w != nullptr; }
  const uint8_t* expert(int64_t e) const { return w + e * expert_bytes; }
};

// One MoE layer's experts: separate gate and up, or a merged gate_up (rows [0, n_ff) gate,
// [n_ff, 2 n_ff) up), and down; bank [n_expert][4] fp32 = (gate, up, down, 1) or nullptr
// (all ones).
struct HostExperts {
  HostExpertTensor gate, up, gate_up, down;
  const float* bank = nullptr;
  int64_t n_expert = 0, n_embd = 0, n_ff = 0;
  engine::Glu glu = engine::Glu::kSilu;
  // Weight bytes of one expert (all its tensors).
  int64_t expert_bytes() const;
};

// Views of the engine's mapped expert tensors; the scale bank is built into bank_store.
HostExperts host_experts_of(const engine::ExpertWeights& w, std::vector<float>& bank_store);
// Throws ft::Error naming the tensor when the executor cannot run it (unsupported type,
// k not a multiple of the block, shapes that disagree).
void check_host_experts(const HostExperts& L, const char* layer_name);

struct ExpertNumerics {
  engine::ActType act = engine::ActType::kF32;
  quant::ActQuant act_quant = quant::ActQuant::kNone;
  // The GPU's --dtype auto rounds activations to Q8 only for quantised weights and keeps
  // F32/F16/BF16 experts on exact fp32 math; true mirrors that (the cpu/hybrid backends),
  // false is llama.cpp's CPU route (BF16 weights meet bf16-rounded activations).
  bool q8_quantised_only = false;
  // Round the inputs of every product (x, and h before down) to this dtype and multiply in
  // fp32 (kF32: no rounding): the GPU's prefill GEMMs on bf16 / f16 tensor cores (--dtype
  // auto: bf16), exact where the weights dequantise exactly to it (NVFP4, MXFP4, BF16).
  // Meant with act_quant kNone.
  engine::ActType round_inputs = engine::ActType::kF32;
  // Exact mode (the cpu / hybrid backends' decode): non-null = every product, rounding and
  // sum in the GPU decode GEMV's order (gpu_dot.h), so the result is the fused backend's,
  // bit for bit; the plan function names the GPU kernel (and its lanes) per shape. Needs
  // act_quant kQ8 or kNone, q8_quantised_only and round_inputs kF32 (what the GPU's decode
  // does); weights: F32, F16, BF16, Q8_0, MXFP4, NVFP4 (exact_supported()).
  GpuDotPlanFn gpu_plan = nullptr;
  // Output per route instead of the combined sum (hybrid: the GPU combines the CPU's and its
  // own routes in rank order): out row s (ldo apart) = y_s = round((Wd h) * s_down) for
  // route s = t * n_used + r, zeros for skipped routes; n_tok * n_used rows.
  bool slot_out = false;
};

// Whether exact mode covers L's tensors under num (else run() uses the engine's kernels).
bool exact_supported(const HostExperts& L, const ExpertNumerics& num);
// Whether exact mode's gate / up read the fp32 x (the float path) and not only its Q8 rows.
bool exact_reads_float_x(const HostExperts& L, const ExpertNumerics& num);

// How the GEMV phases hand (expert, rows) work to the pool's threads. kGuided: each
// take is 1/(2 threads) of the 16-row groups left (at least one, across experts), so a thread
// streams long runs at first (fewer cold starts: the first group of a take is not
// prefetched) and the last takes are one group (a short tail: a Qwen3-30B-A3B NVFP4 gate|up
// item of 80 rows is ~16 us at 15 threads, a group 3 us); kItems (session 6): fixed items of
// about 1/12 of a thread's share each (FT_MOE_CPU_ITEMS), taken in turn: the default before kFlow, since
// the lead's final call of session 7 timed the cpu backend's decode back to back in one
// process: items tg32 54.44 tok/s, guided 48.51 (bench/session7/h200_final_a.sh).
// FT_MOE_CPU_SCHED=guided|items. H200 host (benches/h200.md, session 7), in one call:
// ft-bench-moe-cpu's exact AVX-512 rows, best of 6 runs each, guided vs items: NVFP4 71.2
// vs 65.9 GB/s, Q8_0 81.7 vs 76.6, MXFP4 72.8 vs 73.3; the cpu backend on the
// Qwen3-30B-A3B-shaped NVFP4 file: guided tg32 57.4 tok/s vs items 53.6, but the items run's
// GLU phase, which no schedule touches, was also 2.7x slower (74.5 vs 27.4 us): that pair is
// not a clean A/B. A short tail matters there: one slow worker (a shared core) holds a phase.
// kFlow (the default since session 8; FT_MOE_CPU_SCHED=flow): the items of gate|up and down
// in one loop, each expert's GLU run by whoever finishes its gate|up, down items waiting for
// their expert, 8 items per thread (expert_exec_exact.cpp; exact mode only, the engine order
// runs kItems). H200 host, one call, cpu backend tg32 on the Qwen3-30B-A3B-shaped NVFP4 file:
// flow with 8 items 68.24 tok/s (263 us of CPU work per layer), flow with 12 59.27 (287 us),
// items 58.2-61.8 (279-297 us); ft-bench-moe-cpu at the backend's footprint (6144 experts):
// flow 81.4 GB/s, items 65.3-78.5, guided 74.8-78.1.
enum class RowSchedule { kItems, kGuided, kFlow };
RowSchedule row_schedule_from_env();

// FT_MOE_CPU_PROFILE's figures: mean microseconds per call of each phase.
struct ExecProfile {
  int64_t calls = 0, bytes = 0;
  double us[5] = {};  // prep (grouping; exact: + x's Q8), gate|up, glu, down, combine
  double gemv_gbs() const;  // expert bytes / (gate|up + down time)
};

class ExpertExecutor {
 public:
  explicit ExpertExecutor(ThreadPool& pool);
  // With FT_MOE_CPU_PROFILE=1, logs the mean time per call of each phase (grouping and x's
  // Q8, gate|up, GLU, down, combine) and the expert GB/s of the GEMV phases.
  ~ExpertExecutor();

  // A/B knobs (tests, ft-bench-moe-cpu): the row schedule (default from the environment) and
  // the phase clocks (default FT_MOE_CPU_PROFILE); profile() reads them, reset_profile() zeroes.
  void set_schedule(RowSchedule s) { sched_ = s; }
  RowSchedule schedule() const { return sched_; }
  void set_profile(bool on) { prof_on_ = on; }
  ExecProfile profile() const;
  void reset_profile();

  // out[t] (n_embd floats, ldo apart) for t < n_tok as above; overwrites out. Throws
  // ft::Error for an id outside [-1, n_expert).
  void run(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
           const int32_t* ids, const float* weights, int n_used, float* out, int64_t ldo);

  // The last run's routes computed and expert weight bytes read (each active expert once).
  int64_t last_routes() const { return last_routes_; }
  int64_t last_bytes() const { return last_bytes_; }

  // Warm-up for the next run() on L (the cpu and hybrid backends call it between decode
  // layers, while the GPU works and the pool would idle): the gate|up rows of the guessed
  // experts `ids` (most likely first; -1 and repeats skipped), item by item, are prefetched
  // into the L2 of the pool thread that the next run() lets take that item first (exact flow
  // schedule; that run cuts its gate|up items as the hint did, sized for as many experts as
  // guessed), up to kib KiB a thread; it returns early once *stop is non-zero (the next task
  // has arrived). It changes no result: every item is still computed once, as without it;
  // its owner only takes it before the shared counter does. Right guesses read from L2
  // instead of DRAM (expert_exec_exact.cpp: why).
  void prefetch_next(const HostExperts& L, const ExpertNumerics& num, const int32_t* ids, int n, int64_t kib,
                     const volatile uint32_t* stop);
  // Guessed experts prefetched and those the next run() used, since the last reset.
  struct WarmStats {
    int64_t guessed = 0, used = 0, items = 0, items_owner = 0;
  };
  WarmStats warm_stats() const { return warm_; }
  void reset_warm_stats() { warm_ = {}; }

 private:
  void grow(const HostExperts& L, int64_t n_slots);
  // Exact mode's gate|up, GLU (with down's Q8 rows) and down over the grouped routes
  // (expert_exec_exact.cpp).
  void exact_gate_up(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
                     int n_used, int64_t n_routes);
  // x's Q8 rows and aux, and the gate / up / gate_up plans (gu_plan_) for n_out outputs.
  void exact_x_q8(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
                  int64_t n_out);
  void exact_gate_up_rows(const HostExperts& L, const ExpertNumerics& num, int32_t e, int64_t r0, int64_t r1);
  GpuDotPlan gu_plan_[3] = {};  // gate, up, gate_up
  // RowSchedule::kFlow: the three phases in one loop with per-expert readiness.
  void exact_flow(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
                  int n_used, int64_t n_routes);
  // Rows per item for a tensor of `rows` rows per expert: about default_per_thread items per
  // thread over the active experts (FT_MOE_CPU_ITEMS overrides), multiples of 16, >= 32.
  int64_t item_rows(int64_t rows, int64_t default_per_thread) const {
    return item_rows(rows, default_per_thread, static_cast<int64_t>(active_.size()));
  }
  int64_t item_rows(int64_t rows, int64_t default_per_thread, int64_t n_active) const;
  void exact_glu(const HostExperts& L, const ExpertNumerics& num, int64_t n_routes);
  void exact_down(const HostExperts& L, const ExpertNumerics& num, int64_t n_tok, int n_used, int64_t n_routes);
  // Parallel loop over (active expert, row range) pieces of `rows` rows per expert, as sched_.
  void for_expert_rows(int64_t rows, const std::function<void(int32_t e, int64_t r0, int64_t r1)>& f);

  ThreadPool& pool_;
  std::vector<int64_t> count_, start_, slot_of_;
  std::vector<int64_t> tok_of_, iota_;  // grouped route -> token; 0, 1, 2, ...
  std::vector<int32_t> active_;
  std::vector<float> xg_, gu_, h_, yd_;
  std::vector<int8_t> xq_;   // exact mode: Q8 codes of xg_ / h_ rows (GPU layout)
  std::vector<float> xqd_;   // ... and their scales
  std::vector<GpuActAux> aux_;  // ... and what the SIMD rows derive from them
  std::vector<int8_t> hq_;      // kFlow: h_'s Q8 rows apart from x's (both live at once)
  std::vector<float> hqd_;
  std::vector<GpuActAux> haux_;
  std::vector<std::atomic<int64_t>> flow_left_;   // kFlow: gate|up items left per active expert
  std::vector<std::atomic<int32_t>> flow_ready_;  // kFlow: the expert's GLU is done
  // prefetch_next's guess for the next run (hint_of_ == &L there): the experts warmed, in
  // order, and the item size it assumed; item it of guess j belongs to thread (j per + it) % P.
  const HostExperts* hint_of_ = nullptr;
  std::vector<int32_t> hint_ids_;
  int64_t hint_rows_ = 0;
  std::vector<std::atomic<uint8_t>> claim_;    // kFlow with a hint: gate|up item taken
  std::vector<std::vector<int64_t>> owned_;    // kFlow with a hint: each thread's items
  std::vector<int32_t> hint_distinct_;         // prefetch_next: the distinct guesses
  std::vector<std::atomic<uint8_t>> hint_seen_;  // prefetch_next: a thread's share taken
  WarmStats warm_;
  int64_t last_routes_ = 0, last_bytes_ = 0;
  RowSchedule sched_;
  // FT_MOE_CPU_PROFILE: calls, weight bytes and ns per phase (prep, gate|up, glu, down, combine).
  bool prof_on_ = false;
  int64_t prof_calls_ = 0, prof_bytes_ = 0;
  int64_t prof_ns_[5] = {};
};

// Token-by-token scalar twin of exact mode (num.gpu_plan set): gpu_dot.h per row, one route
// after the other; out as run() writes it (num.slot_out included). For tests.
void expert_exec_gpu_ref(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                         int64_t n_tok, const int32_t* ids, const float* weights, int n_used, float* out,
                         int64_t ldo);

// Token-by-token scalar twin (quant::matmul_ref, rank order), for tests.
void expert_exec_ref(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                     int64_t n_tok, const int32_t* ids, const float* weights, int n_used, float* out,
                     int64_t ldo);

}  // namespace ft::moe_cpu
