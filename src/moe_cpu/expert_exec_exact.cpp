// Exact mode of the expert executor (ExpertNumerics::gpu_plan): the GPU decode GEMV's
// products and sums per row (gpu_dot.h), its Q8 activations and epilogue, so that the cpu
// and hybrid backends reproduce the fused backend's bits. The GLU and the combine are the
// executor's own (engine::swiglu and the rank-order combine are already the GPU's
// operations: ops::silu is engine::silu step for step, the combine has no FMA).
#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "engine/ffn.h"
#include "engine/vec_math.h"
#include "moe_cpu/expert_exec.h"

namespace ft::moe_cpu {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

float bank_at(const HostExperts& L, int64_t e, int col) { return L.bank ? L.bank[e * 4 + col] : 1.0f; }

bool q8_of(const ExpertNumerics& num, GgmlType t) {
  return num.act_quant == quant::ActQuant::kQ8 && gpu_dot_q8_supported(t);
}

// One tensor's rows [r0, r1) for the grouped routes [g0, g1) (inputs: x row g, Q8 row
// in_of[g] of xq / xqd / aux; outputs y + g * ldy + r): round((row . x) * scale) as the
// GPU's grouped epilogue.
struct ExactRows {
  const HostExpertTensor* t;
  GpuDotPlan plan;
  bool q8;
  float scale;
};

struct ExactIn {
  const float* x;
  const int8_t* xq;
  const float* xqd;
  const GpuActAux* aux;  // per Q8 row, or nullptr
  const int64_t* in_of;  // grouped route -> Q8 row
};

void exact_rows(const ExactRows& a, const ExpertNumerics& num, int64_t e, const ExactIn& in, int64_t g0, int64_t g1,
                int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const HostExpertTensor& t = *a.t;
  const int64_t k = t.k;
  for (int64_t g = g0; g < g1; ++g) {
    float* yg = y + g * ldy;
    if (a.q8) {
      const int64_t i = in.in_of[g];
      gpu_dot_q8_rows(a.plan, t.type, t.expert(e) + r0 * t.row_bytes, t.row_bytes, r1 - r0,
                      GpuActQ8{in.xq + i * k, in.xqd + i * (k / 32), in.aux ? &in.aux[i] : nullptr}, k, yg + r0);
    } else {
      gpu_dot_float_rows(t.type, t.expert(e) + r0 * t.row_bytes, t.row_bytes, r1 - r0, in.x + g * k, k, yg + r0);
    }
    for (int64_t r = r0; r < r1; ++r) yg[r] = engine::round_act(num.act, yg[r] * a.scale);
  }
}

}  // namespace

bool exact_supported(const HostExperts& L, const ExpertNumerics& num) {
  if (num.gpu_plan == nullptr || num.round_inputs != engine::ActType::kF32 || !num.q8_quantised_only) return false;
  for (const HostExpertTensor* t : {&L.gate, &L.up, &L.gate_up, &L.down}) {
    if (!*t) continue;
    if (!gpu_dot_float_supported(t->type) || t->k % 32 != 0) return false;
  }
  return true;
}

bool exact_reads_float_x(const HostExperts& L, const ExpertNumerics& num) {
  for (const HostExpertTensor* t : {&L.gate, &L.up, &L.gate_up})
    if (*t && !q8_of(num, t->type)) return true;
  return false;
}

// x's Q8 rows and aux (once per token) for gate / up: what exact_gate_up_rows reads.
void ExpertExecutor::exact_x_q8(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                                int64_t n_tok, int64_t n_out) {
  const int64_t n_embd = L.n_embd;
  // The GEMV plans once per call (gpu_plan runs the CUDA dispatch's host-side choice).
  const HostExpertTensor* gu[3] = {&L.gate, &L.up, &L.gate_up};
  for (int i = 0; i < 3; ++i)
    if (*gu[i]) gu_plan_[i] = num.gpu_plan(gu[i]->type, gu[i]->rows, gu[i]->k, n_out, 1, q8_of(num, gu[i]->type));
  const HostExpertTensor& first = L.gate_up ? L.gate_up : L.gate;
  const bool q8_up = !L.gate_up && q8_of(num, L.up.type);
  // Every route of a token multiplies the same x: it is quantised once per token (the GPU
  // quantises each token once too), with its aux for the first tensor's type; a separate up
  // of another type makes its own aux.
  if (q8_of(num, first.type) || q8_up) {
    xq_.resize(static_cast<size_t>(n_tok * n_embd));
    xqd_.resize(static_cast<size_t>(n_tok * n_embd / 32));
    if (aux_.size() < static_cast<size_t>(n_tok)) aux_.resize(static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t) {
      gpu_quantize_act_q8(x + t * ldx, n_embd, xq_.data() + t * n_embd, xqd_.data() + t * (n_embd / 32));
      gpu_act_aux(first.type, GpuActQ8{xq_.data() + t * n_embd, xqd_.data() + t * (n_embd / 32)}, n_embd, aux_[t]);
    }
  }
}

// Rows [r0, r1) of expert e's gate|up (2 n_ff rows: gate then up, or the merged tensor) for
// its grouped routes, into gu_.
void ExpertExecutor::exact_gate_up_rows(const HostExperts& L, const ExpertNumerics& num, int32_t e, int64_t r0,
                                        int64_t r1) {
  const int64_t n_ff = L.n_ff;
  auto rows_of = [&](const HostExpertTensor& t) {
    return ExactRows{&t, gu_plan_[&t == &L.gate ? 0 : &t == &L.up ? 1 : 2], q8_of(num, t.type), 1.0f};
  };
  const HostExpertTensor& first = L.gate_up ? L.gate_up : L.gate;
  const bool up_aux = L.gate_up || L.up.type == first.type;
  const ExactIn in{xg_.data(), xq_.data(), xqd_.data(), aux_.data(), tok_of_.data()};
  ExactIn in_up = in;
  if (!up_aux) in_up.aux = nullptr;
  float* gu = gu_.data();
  const int64_t g0 = start_[e], g1 = g0 + count_[e];
  if (L.gate_up) {
    exact_rows(rows_of(L.gate_up), num, e, in, g0, g1, r0, r1, gu, 2 * n_ff);
    return;
  }
  ExactRows a = rows_of(L.gate);
  a.scale = bank_at(L, e, 0);
  if (r0 < n_ff) exact_rows(a, num, e, in, g0, g1, r0, std::min(r1, n_ff), gu, 2 * n_ff);
  a = rows_of(L.up);
  a.scale = bank_at(L, e, 1);
  if (r1 > n_ff) exact_rows(a, num, e, in_up, g0, g1, std::max(r0, n_ff) - n_ff, r1 - n_ff, gu + n_ff, 2 * n_ff);
}

void ExpertExecutor::exact_gate_up(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                                   int64_t n_tok, int n_used, int64_t n_routes) {
  (void)n_routes;
  exact_x_q8(L, num, x, ldx, n_tok, n_tok * n_used);
  for_expert_rows(2 * L.n_ff, [&](int32_t e, int64_t r0, int64_t r1) { exact_gate_up_rows(L, num, e, r0, r1); });
}

void ExpertExecutor::exact_glu(const HostExperts& L, const ExpertNumerics& num, int64_t n_routes) {
  const int64_t n_ff = L.n_ff;
  const bool q8 = q8_of(num, L.down.type);
  if (q8) {
    xq_.resize(static_cast<size_t>(n_routes * n_ff));
    xqd_.resize(static_cast<size_t>(n_routes * n_ff / 32));
    if (aux_.size() < static_cast<size_t>(n_routes)) aux_.resize(static_cast<size_t>(n_routes));
  }
  // One loop over pieces of 64 values of every route: the GLU (the reference's per-value
  // formula, as engine::swiglu / geglu), then the piece's Q8 blocks and aux entries for down
  // -- one parallel loop instead of the GLU's plus a serial quantisation (that serial part
  // was 88 us of each Qwen3-30B-A3B decode layer, 16 K values through libm's nearbyintf).
  // Pieces rather than routes: with one route per thread 8 of the pool's 15 threads worked
  // and each ran 768 expf (session 7: this phase 14 us in the bench, 27 in the backend).
  // GeGLU (gemma4) keeps whole routes: engine::geglu's table and its x <= -10 rule stay its own.
  // FT_MOE_CPU_GLU=routes: one route per item (session 7's split), for A/B runs.
  static const bool by_route = [] {
    const char* e = std::getenv("FT_MOE_CPU_GLU");
    return e != nullptr && std::strcmp(e, "routes") == 0;
  }();
  const bool gelu = L.glu == engine::Glu::kGelu;
  const int64_t piece = !gelu && !by_route && n_ff % 64 == 0 ? 64 : n_ff;
  const int64_t per_route = n_ff / piece, n_items = n_routes * per_route;
  if (q8)
    for (int64_t g = 0; g < n_routes; ++g) gpu_act_aux_size(L.down.type, n_ff, aux_[g]);
  const engine::ActType act = num.act;
  const int64_t grain = std::max<int64_t>(1, (n_items + pool_.size() - 1) / pool_.size());
  pool_.parallel_for(n_items, grain, [&](int64_t i0, int64_t i1, int) {
    thread_local ThreadPool solo(1);
    const engine::Exec ex{&solo, num.act, num.act_quant};
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t g = i / per_route, j0 = (i % per_route) * piece, j1 = j0 + piece;
      const float* gu = gu_.data() + g * 2 * n_ff;
      float* h = h_.data() + g * n_ff;
      if (gelu)
        engine::geglu(ex, gu, 2 * n_ff, n_ff, 1, h, n_ff);
      else  // engine::swiglu's value, one piece of the row
        for (int64_t j = j0; j < j1; ++j) h[j] = engine::round_act(act, engine::silu(gu[j]) * gu[n_ff + j]);
      if (!q8) continue;
      int8_t* qs = xq_.data() + g * n_ff;
      float* d = xqd_.data() + g * (n_ff / 32);
      gpu_quantize_act_q8(h + j0, piece, qs + j0, d + j0 / 32);
      gpu_act_aux_part(L.down.type, GpuActQ8{qs, d}, j0, j1, aux_[g]);
    }
  });
}

void ExpertExecutor::exact_down(const HostExperts& L, const ExpertNumerics& num, int64_t n_tok, int n_used,
                                int64_t n_routes) {
  const int64_t n_embd = L.n_embd;
  const HostExpertTensor& t = L.down;
  const bool q8 = q8_of(num, t.type);
  // The fused backend's down GEMV is the combine: n_tok out rows of n_used slots each.
  const ExactRows a0{&t, num.gpu_plan(t.type, t.rows, t.k, n_tok, n_used, q8), q8, 1.0f};
  if (iota_.size() < static_cast<size_t>(n_routes)) {
    iota_.resize(static_cast<size_t>(n_routes));
    for (size_t i = 0; i < iota_.size(); ++i) iota_[i] = static_cast<int64_t>(i);
  }
  const ExactIn in{h_.data(), xq_.data(), xqd_.data(), aux_.data(), iota_.data()};
  float* yd = yd_.data();
  for_expert_rows(n_embd, [&](int32_t e, int64_t r0, int64_t r1) {
    ExactRows a = a0;
    a.scale = bank_at(L, e, 2);
    exact_rows(a, num, e, in, start_[e], start_[e] + count_[e], r0, r1, yd, n_embd);
  });
}

// RowSchedule::kFlow: gate|up items, each expert's GLU and its down items in one loop over
// one counter. Items are claimed in order (every gate|up item before any down item); the
// thread that finishes an expert's last gate|up item runs that expert's GLU (its routes'
// h, Q8 rows and aux, into hq_ / hqd_ / haux_: xq_ still holds x's for the gate|up items
// running meanwhile) and marks it ready; a down item waits (pause) for its expert. No thread
// waits on a claimed-but-unstarted item, so it cannot deadlock. Against the three phases it
// drops two barriers and the GLU phase, in which the memory system idled (session 7: 27 us
// of the backend's 355 us per layer). Every row and value is computed as by the phases.
void ExpertExecutor::exact_flow(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                                int64_t n_tok, int n_used, int64_t n_routes) {
  const int64_t n_embd = L.n_embd, n_ff = L.n_ff, n_active = static_cast<int64_t>(active_.size());
  exact_x_q8(L, num, x, ldx, n_tok, n_tok * n_used);
  const HostExpertTensor& t = L.down;
  const bool q8 = q8_of(num, t.type);
  if (q8) {
    hq_.resize(static_cast<size_t>(n_routes * n_ff));
    hqd_.resize(static_cast<size_t>(n_routes * n_ff / 32));
    if (haux_.size() < static_cast<size_t>(n_routes)) haux_.resize(static_cast<size_t>(n_routes));
    for (int64_t g = 0; g < n_routes; ++g) gpu_act_aux_size(t.type, n_ff, haux_[g]);
  }
  if (iota_.size() < static_cast<size_t>(n_routes)) {
    iota_.resize(static_cast<size_t>(n_routes));
    for (size_t i = 0; i < iota_.size(); ++i) iota_[i] = static_cast<int64_t>(i);
  }
  const ExactRows a0{&t, num.gpu_plan(t.type, t.rows, t.k, n_tok, n_used, q8), q8, 1.0f};
  const ExactIn in_dn{h_.data(), hq_.data(), hqd_.data(), haux_.data(), iota_.data()};
  if (flow_left_.size() < static_cast<size_t>(n_active)) {
    flow_left_ = std::vector<std::atomic<int64_t>>(static_cast<size_t>(n_active));
    flow_ready_ = std::vector<std::atomic<int32_t>>(static_cast<size_t>(n_active));
  }
  // 8 items per thread (the items schedule's 12 cut finer than flow needs: without the phase
  // ends there is no tail to even out; H200 host tg32 68.24 vs 59.27 tok/s with 12, one call).
  // With a warm-up hint (prefetch_next) the gate|up items are cut as it cut them, so that
  // each prefetched item is one item here (the cut never changes a value).
  const bool hint = hint_of_ == &L && !hint_ids_.empty();
  hint_of_ = nullptr;
  const int64_t c_gu = hint ? hint_rows_ : item_rows(2 * n_ff, 8), per_gu = (2 * n_ff + c_gu - 1) / c_gu;
  const int64_t c_dn = item_rows(n_embd, 8), per_dn = (n_embd + c_dn - 1) / c_dn;
  for (int64_t a = 0; a < n_active; ++a) {
    flow_left_[a].store(per_gu, std::memory_order_relaxed);
    flow_ready_[a].store(0, std::memory_order_relaxed);
  }
  const int64_t n_gu = n_active * per_gu, n_all = n_gu + n_active * per_dn;
  const bool gelu = L.glu == engine::Glu::kGelu;
  auto glu_expert = [&](int32_t e) {
    thread_local ThreadPool solo(1);
    const engine::Exec ex{&solo, num.act, num.act_quant};
    for (int64_t g = start_[e]; g < start_[e] + count_[e]; ++g) {
      const float* gu = gu_.data() + g * 2 * n_ff;
      float* h = h_.data() + g * n_ff;
      if (gelu)
        engine::geglu(ex, gu, 2 * n_ff, n_ff, 1, h, n_ff);
      else
        engine::swiglu(ex, gu, 2 * n_ff, n_ff, 1, h, n_ff);
      if (!q8) continue;
      int8_t* qs = hq_.data() + g * n_ff;
      float* d = hqd_.data() + g * (n_ff / 32);
      gpu_quantize_act_q8(h, n_ff, qs, d);
      gpu_act_aux(t.type, GpuActQ8{qs, d}, n_ff, haux_[g]);
    }
  };
  // A warm-up hint for this call (prefetch_next): each thread first takes the gate|up items
  // it prefetched, then joins the shared counter; a claim flag per gate|up item makes every
  // item run once whoever gets there first (a thread the pool never wakes leaves its items
  // to the counter). Only gate|up items are owned: they never wait, so a thread waiting on a
  // down item always waits for items in progress.
  const int n_thr = pool_.size();
  if (hint) {
    if (claim_.size() < static_cast<size_t>(n_gu)) claim_ = std::vector<std::atomic<uint8_t>>(static_cast<size_t>(n_gu));
    for (int64_t i = 0; i < n_gu; ++i) claim_[i].store(0, std::memory_order_relaxed);
    owned_.resize(static_cast<size_t>(n_thr));
    for (auto& o : owned_) o.clear();
    for (int64_t a = 0; a < n_active; ++a) {
      const auto it = std::find(hint_ids_.begin(), hint_ids_.end(), active_[a]);
      if (it == hint_ids_.end()) continue;
      ++warm_.used;
      const int64_t j = it - hint_ids_.begin();
      for (int64_t k = 0; k < per_gu; ++k) owned_[static_cast<size_t>((j * per_gu + k) % n_thr)].push_back(a * per_gu + k);
    }
  }
  std::atomic<int64_t> owner_items{0};
  auto gate_up_item = [&](int64_t i) {
    const int64_t a = i / per_gu, r0 = (i % per_gu) * c_gu;
    exact_gate_up_rows(L, num, active_[a], r0, std::min(2 * n_ff, r0 + c_gu));
    if (flow_left_[a].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      glu_expert(active_[a]);
      flow_ready_[a].store(1, std::memory_order_release);
    }
  };
  std::atomic<int64_t> next{0};
  pool_.parallel_for(n_thr, 1, [&](int64_t, int64_t, int tid) {
    if (hint) {
      for (const int64_t i : owned_[static_cast<size_t>(tid)])
        if (claim_[i].exchange(1, std::memory_order_acq_rel) == 0) {
          gate_up_item(i);
          owner_items.fetch_add(1, std::memory_order_relaxed);
        }
    }
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_all) return;
      if (i < n_gu) {
        if (hint && claim_[i].exchange(1, std::memory_order_acq_rel) != 0) continue;
        gate_up_item(i);
        continue;
      }
      const int64_t j = i - n_gu, a = j / per_dn, r0 = (j % per_dn) * c_dn;
      for (int spin = 0; flow_ready_[a].load(std::memory_order_acquire) == 0; ++spin) {
        if (spin < 4096)
          cpu_relax();
        else
          std::this_thread::yield();  // an oversubscribed machine: let the GLU's thread run
      }
      const int32_t e = active_[a];
      ExactRows ad = a0;
      ad.scale = bank_at(L, e, 2);
      exact_rows(ad, num, e, in_dn, start_[e], start_[e] + count_[e], r0, std::min(n_embd, r0 + c_dn), yd_.data(),
                 n_embd);
    }
  });
  if (hint) {
    for (const auto& o : owned_) warm_.items += static_cast<int64_t>(o.size());
    warm_.items_owner += owner_items.load(std::memory_order_relaxed);
  }
}

// Why warm up: on the H200's host a pool thread streams expert rows from DRAM at ~9 GB/s
// (143 GB/s over 15 threads, the rate one core's outstanding misses allow) and the exact
// NVFP4 rows run faster than that from cache, while between two layers' tasks the pool idles
// for the GPU's part of the layer (~50 us of a ~310 us cpu-backend layer, session 8). Rows
// that its owner pulled into its own L2 in that gap are computed at cache speed in the next
// layer. Only a thread's own L2 helps: another core's L2 is as far (in latency) as DRAM.
void ExpertExecutor::prefetch_next(const HostExperts& L, const ExpertNumerics& num, const int32_t* ids, int n,
                                   int64_t kib, const volatile uint32_t* stop) {
  hint_of_ = nullptr;
  hint_ids_.clear();
  if (n <= 0 || kib <= 0 || !exact_supported(L, num) || sched_ != RowSchedule::kFlow || !num.gpu_plan) return;
  const int64_t n_ff = L.n_ff, n_thr = pool_.size();
  std::vector<int32_t>& distinct = hint_distinct_;  // a member: this runs every decode layer
  distinct.clear();
  for (int j = 0; j < n; ++j)
    if (ids[j] >= 0 && ids[j] < L.n_expert && std::find(distinct.begin(), distinct.end(), ids[j]) == distinct.end())
      distinct.push_back(ids[j]);
  if (distinct.empty()) return;
  // Items sized as the next run's would be for that many experts (the run takes this cut).
  const int64_t c_gu = item_rows(2 * n_ff, 8, static_cast<int64_t>(distinct.size()));
  const int64_t per_gu = (2 * n_ff + c_gu - 1) / c_gu;
  auto row_bytes = [&](int64_t r) {
    return L.gate_up ? L.gate_up.row_bytes : r < n_ff ? L.gate.row_bytes : L.up.row_bytes;
  };
  // Guesses while every thread's share stays within kib: thread t holds the items
  // (j per_gu + k) % P, so G guesses give a thread at most ceil(G per_gu / P) items.
  const int64_t item_bytes = c_gu * std::max(row_bytes(0), row_bytes(2 * n_ff - 1));
  for (const int32_t e : distinct) {
    const int64_t g = static_cast<int64_t>(hint_ids_.size()) + 1;
    if ((g * per_gu + n_thr - 1) / n_thr * item_bytes > kib * 1024) break;
    hint_ids_.push_back(e);
  }
  if (hint_ids_.empty()) return;
  hint_of_ = &L;
  hint_rows_ = c_gu;
  warm_.guessed += static_cast<int64_t>(hint_ids_.size());
  const int64_t n_items = static_cast<int64_t>(hint_ids_.size()) * per_gu;
  if (hint_seen_.size() < static_cast<size_t>(n_thr)) hint_seen_ = std::vector<std::atomic<uint8_t>>(static_cast<size_t>(n_thr));
  for (int64_t t = 0; t < n_thr; ++t) hint_seen_[static_cast<size_t>(t)].store(0, std::memory_order_relaxed);
  pool_.parallel_for(n_thr, 1, [&](int64_t, int64_t, int tid) {
    if (hint_seen_[static_cast<size_t>(tid)].exchange(1)) return;  // once per thread
    int64_t lines = 0;
    for (int64_t q = tid; q < n_items; q += n_thr) {
      const int32_t e = hint_ids_[static_cast<size_t>(q / per_gu)];
      const int64_t r0 = (q % per_gu) * c_gu, r1 = std::min(2 * n_ff, r0 + c_gu);
      // The item's rows are contiguous within each tensor: gate|up merged, or gate then up.
      auto span = [&](const HostExpertTensor& t, int64_t a0, int64_t a1) {
        const char* p = reinterpret_cast<const char*>(t.expert(e) + a0 * t.row_bytes);
        const char* end = reinterpret_cast<const char*>(t.expert(e) + a1 * t.row_bytes);
        for (; p < end; p += 64) {
          __builtin_prefetch(p, 0, 2);  // L2 (prefetcht1)
          if ((++lines & 63) == 0 && stop != nullptr && *stop != 0) return false;
        }
        return true;
      };
      bool go = true;
      if (L.gate_up)
        go = span(L.gate_up, r0, r1);
      else {
        if (r0 < n_ff) go = span(L.gate, r0, std::min(r1, n_ff));
        if (go && r1 > n_ff) go = span(L.up, std::max(r0, n_ff) - n_ff, r1 - n_ff);
      }
      if (!go) return;
    }
  });
}

void expert_exec_gpu_ref(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx,
                         int64_t n_tok, const int32_t* ids, const float* weights, int n_used, float* out,
                         int64_t ldo) {
  if (!exact_supported(L, num)) fail("expert_exec_gpu_ref: exact mode does not cover these experts / numerics");
  const int64_t n_embd = L.n_embd, n_ff = L.n_ff, n_out = n_tok * n_used;
  std::vector<float> gu(static_cast<size_t>(2 * n_ff)), h(static_cast<size_t>(n_ff)), y(static_cast<size_t>(n_embd));
  std::vector<int8_t> xq(static_cast<size_t>(std::max(n_embd, n_ff)));
  std::vector<float> xd(xq.size() / 32 + 1);
  auto dot = [&](const HostExpertTensor& t, int64_t e, int64_t r, const float* in, int64_t n_o, int n_sub) {
    const bool q8 = q8_of(num, t.type);
    const uint8_t* row = t.expert(e) + r * t.row_bytes;
    if (!q8) return gpu_dot_float(t.type, row, in, t.k);
    return gpu_dot_q8(num.gpu_plan(t.type, t.rows, t.k, n_o, n_sub, true), t.type, row, GpuActQ8{xq.data(), xd.data()},
                      t.k);
  };
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * ldx;
    float* o = out + (num.slot_out ? t * n_used : t) * ldo;
    bool first = true;
    for (int r = 0; r < n_used; ++r) {
      const int32_t e = ids[t * n_used + r];
      if (e < -1 || e >= L.n_expert) fail("MoE expert id {} out of range", e);
      if (e < 0) {
        if (num.slot_out) std::fill(o + r * ldo, o + r * ldo + n_embd, 0.0f);
        continue;
      }
      gpu_quantize_act_q8(xt, n_embd, xq.data(), xd.data());
      for (int64_t i = 0; i < 2 * n_ff; ++i) {
        if (L.gate_up) {
          gu[i] = engine::round_act(num.act, dot(L.gate_up, e, i, xt, n_out, 1) * 1.0f);
        } else {
          const bool g = i < n_ff;
          const float v = dot(g ? L.gate : L.up, e, g ? i : i - n_ff, xt, n_out, 1);
          gu[i] = engine::round_act(num.act, v * bank_at(L, e, g ? 0 : 1));
        }
      }
      for (int64_t i = 0; i < n_ff; ++i)
        h[i] = engine::round_act(num.act, (L.glu == engine::Glu::kGelu ? engine::gelu(gu[i]) : engine::silu(gu[i])) *
                                              gu[n_ff + i]);
      gpu_quantize_act_q8(h.data(), n_ff, xq.data(), xd.data());
      for (int64_t i = 0; i < n_embd; ++i)
        y[i] = engine::round_act(num.act, dot(L.down, e, i, h.data(), n_tok, n_used) * bank_at(L, e, 2));
      if (num.slot_out) {
        std::copy(y.begin(), y.end(), o + r * ldo);
        continue;
      }
      const float wr = weights[t * n_used + r];
      for (int64_t i = 0; i < n_embd; ++i) o[i] = first ? y[i] * wr : o[i] + y[i] * wr;
      first = false;
    }
    if (num.slot_out) continue;
    if (first) std::fill(o, o + n_embd, 0.0f);
    engine::round_act(num.act, o, n_embd);
  }
}

}  // namespace ft::moe_cpu
