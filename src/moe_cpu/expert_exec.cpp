#include "moe_cpu/expert_exec.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "engine/ffn.h"
#include "engine/vec_math.h"
#include "quant/matmul.h"

namespace ft::moe_cpu {
namespace {

HostExpertTensor view_of(const model::ExpertTensor& t) {
  HostExpertTensor h;
  if (!t) return h;
  h.type = t.w.type;
  h.w = t.w.data;
  h.row_bytes = t.w.row_bytes();
  h.expert_bytes = t.w.matrix_bytes();
  h.rows = t.w.ne[1];
  h.k = t.w.ne[0];
  return h;
}

float bank_at(const HostExperts& L, int64_t e, int col) { return L.bank ? L.bank[e * 4 + col] : 1.0f; }

quant::MatmulArgs expert_args(const HostExpertTensor& t, int64_t e, const float* x, int64_t ldx, int64_t n_tok,
                              float* y, int64_t ldy, float scale, const ExpertNumerics& num) {
  quant::MatmulArgs a;
  a.type = t.type;
  a.row_bytes = t.row_bytes;
  a.w = t.expert(e);
  a.k = t.k;
  a.x = x;
  a.ldx = ldx;
  a.n_tok = n_tok;
  a.y = y;
  a.ldy = ldy;
  a.scale = scale;
  a.round = engine::round_of(num.act);
  a.act_quant = num.act_quant;
  if (num.q8_quantised_only && (t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16))
    a.act_quant = quant::ActQuant::kNone;
  a.n_rows = t.rows;
  return a;
}

// Rows [r0, r1) of the 2*n_ff gate|up output of expert e for n_tok tokens (the engine's
// gate_up_rows with the scales read from the bank).
template <bool kRef>
void gate_up_rows(const HostExperts& L, int64_t e, const float* x, int64_t ldx, int64_t n_tok, float* y, int64_t r0,
                  int64_t r1, const ExpertNumerics& num) {
  const int64_t n_ff = L.n_ff, ldy = 2 * n_ff;
  auto run = [&](const quant::MatmulArgs& a, int64_t a0, int64_t a1) {
    if constexpr (kRef)
      quant::matmul_ref(a, a0, a1);
    else
      quant::matmul(a, a0, a1);
  };
  if (L.gate_up) {
    run(expert_args(L.gate_up, e, x, ldx, n_tok, y, ldy, 1.0f, num), r0, r1);
    return;
  }
  if (r0 < n_ff)
    run(expert_args(L.gate, e, x, ldx, n_tok, y, ldy, bank_at(L, e, 0), num), r0, std::min(r1, n_ff));
  if (r1 > n_ff)
    run(expert_args(L.up, e, x, ldx, n_tok, y + n_ff, ldy, bank_at(L, e, 1), num), std::max(r0, n_ff) - n_ff,
        r1 - n_ff);
}

bool profile_on() {
  static const bool on = [] {
    const char* e = std::getenv("FT_MOE_CPU_PROFILE");
    return e != nullptr && *e != 0 && *e != '0';
  }();
  return on;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void check_id(int32_t id, int64_t n_expert) {
  if (id < -1 || id >= n_expert) fail("MoE expert id {} out of range: expected -1 (skip) or [0, {})", id, n_expert);
}

}  // namespace

int64_t HostExperts::expert_bytes() const {
  int64_t b = down.expert_bytes;
  if (gate_up) return b + gate_up.expert_bytes;
  return b + gate.expert_bytes + up.expert_bytes;
}

HostExperts host_experts_of(const engine::ExpertWeights& w, std::vector<float>& bank_store) {
  HostExperts L;
  L.gate = view_of(w.gate);
  L.up = view_of(w.up);
  L.gate_up = view_of(w.gate_up);
  L.down = view_of(w.down);
  L.n_expert = w.n_expert;
  L.n_embd = w.n_embd;
  L.n_ff = w.n_ff;
  L.glu = w.glu;
  bank_store.assign(static_cast<size_t>(4 * w.n_expert), 1.0f);
  for (int64_t e = 0; e < w.n_expert; ++e) {
    bank_store[e * 4 + 0] = w.gate ? w.gate.scale_of(e) : 1.0f;
    bank_store[e * 4 + 1] = w.up ? w.up.scale_of(e) : 1.0f;
    bank_store[e * 4 + 2] = w.down.scale_of(e);
  }
  L.bank = bank_store.data();
  return L;
}

void check_host_experts(const HostExperts& L, const char* layer_name) {
  auto check = [&](const HostExpertTensor& t, const char* what, int64_t k, int64_t rows) {
    if (!t) return;
    if (!quant::matmul_supported(t.type))
      fail("{} {}: the CPU expert executor cannot multiply {} weights", layer_name, what, type_name(t.type));
    if (t.k != k || t.rows != rows)
      fail("{} {}: expected {} x {} per expert, got {} x {}", layer_name, what, k, rows, t.k, t.rows);
    if (t.k % traits(t.type).block_size != 0)
      fail("{} {}: row length {} is not a multiple of the {} block ({})", layer_name, what, t.k, type_name(t.type),
           traits(t.type).block_size);
  };
  if (!L.down || !(L.gate_up || (L.gate && L.up))) fail("{}: expert tensors missing (gate/up or gate_up, down)", layer_name);
  check(L.gate, "ffn_gate_exps", L.n_embd, L.n_ff);
  check(L.up, "ffn_up_exps", L.n_embd, L.n_ff);
  check(L.gate_up, "ffn_gate_up_exps", L.n_embd, 2 * L.n_ff);
  check(L.down, "ffn_down_exps", L.n_ff, L.n_embd);
}

RowSchedule row_schedule_from_env() {
  const char* e = std::getenv("FT_MOE_CPU_SCHED");
  const std::string v = e ? e : "";
  if (v.empty() || v == "flow") return RowSchedule::kFlow;
  if (v == "items") return RowSchedule::kItems;
  if (v == "guided") return RowSchedule::kGuided;
  fail("FT_MOE_CPU_SCHED={}: expected items, guided or flow", v);
}

double ExecProfile::gemv_gbs() const {
  const double us_gemv = us[1] + us[3];
  return calls > 0 && us_gemv > 0 ? static_cast<double>(bytes) / static_cast<double>(calls) / us_gemv * 1e-3 : 0.0;
}

ExpertExecutor::ExpertExecutor(ThreadPool& pool) : pool_(pool), sched_(row_schedule_from_env()), prof_on_(profile_on()) {}

ExecProfile ExpertExecutor::profile() const {
  ExecProfile p;
  p.calls = prof_calls_;
  p.bytes = prof_bytes_;
  for (int i = 0; i < 5; ++i)
    p.us[i] = prof_calls_ > 0 ? static_cast<double>(prof_ns_[i]) / static_cast<double>(prof_calls_) / 1e3 : 0.0;
  return p;
}

void ExpertExecutor::reset_profile() {
  prof_calls_ = prof_bytes_ = 0;
  std::fill(std::begin(prof_ns_), std::end(prof_ns_), int64_t{0});
}

ExpertExecutor::~ExpertExecutor() {
  if (prof_calls_ == 0) return;
  const ExecProfile p = profile();
  log::info("moe cpu executor: {} calls, us per call: prep {:.1f}, gate|up {:.1f}, glu {:.1f}, down {:.1f}, combine {:.1f}; "
            "gate|up + down {:.1f} GB/s of expert weights",
            p.calls, p.us[0], p.us[1], p.us[2], p.us[3], p.us[4], p.gemv_gbs());
}

void ExpertExecutor::grow(const HostExperts& L, int64_t n_slots) {
  const auto n = static_cast<size_t>(n_slots);
  if (count_.size() < static_cast<size_t>(L.n_expert)) {
    count_.resize(static_cast<size_t>(L.n_expert));
    start_.resize(static_cast<size_t>(L.n_expert));
  }
  if (slot_of_.size() < n) slot_of_.resize(n);
  if (tok_of_.size() < n) tok_of_.resize(n);
  if (xg_.size() < n * L.n_embd) xg_.resize(n * L.n_embd);
  if (yd_.size() < n * L.n_embd) yd_.resize(n * L.n_embd);
  if (gu_.size() < n * 2 * L.n_ff) gu_.resize(n * 2 * L.n_ff);
  if (h_.size() < n * L.n_ff) h_.resize(n * L.n_ff);
}

int64_t ExpertExecutor::item_rows(int64_t rows, int64_t default_per_thread, int64_t n_active) const {
  static const int64_t env_per_thread = [] {
    const char* e = std::getenv("FT_MOE_CPU_ITEMS");
    return e && std::atoi(e) > 0 ? int64_t{std::atoi(e)} : int64_t{0};
  }();
  const int64_t per_thread = env_per_thread > 0 ? env_per_thread : default_per_thread;
  const int64_t n_threads = pool_.size();
  const int64_t c = (rows * n_active + per_thread * n_threads - 1) / (per_thread * n_threads);
  return std::min(rows, std::max<int64_t>(32, (c + 15) / 16 * 16));
}

void ExpertExecutor::for_expert_rows(int64_t rows, const std::function<void(int32_t, int64_t, int64_t)>& f) {
  const int64_t n_active = static_cast<int64_t>(active_.size());
  const int n_threads = pool_.size();
  if (sched_ == RowSchedule::kGuided && n_threads > 1) {
    // Groups of 16 rows (the AVX-512 row group) over all active experts in order; a take
    // [g0, g0 + n) is cut at expert ends (and ends at the expert's last row).
    constexpr int64_t kGroup = 16, kMinTake = 1;
    const int64_t per = (rows + kGroup - 1) / kGroup, total = n_active * per;
    std::atomic<int64_t> next{0};
    pool_.parallel_for(n_threads, 1, [&](int64_t, int64_t, int) {
      for (;;) {
        int64_t g0 = next.load(std::memory_order_relaxed), n = 0;
        do {
          const int64_t left = total - g0;
          if (left <= 0) return;
          n = std::min(left, std::max(kMinTake, left / (2 * int64_t{n_threads})));
        } while (!next.compare_exchange_weak(g0, g0 + n, std::memory_order_relaxed));
        for (int64_t g = g0; g < g0 + n;) {
          const int64_t a = g / per, in = g % per, m = std::min(g0 + n - g, per - in);
          f(active_[a], in * kGroup, std::min(rows, (in + m) * kGroup));
          g += m;
        }
      }
    });
    return;
  }
  // (expert, row chunk) items, about 12 per thread over all active experts, so the top-k
  // GEMVs of one decode step spread over every core and the dynamic hand-out ends evenly:
  // with 4 per thread (Qwen3-30B-A3B gate|up: 64 items of 208 rows for 15 threads), the
  // threads that draw a fifth item finish 1/4 later than the rest. Chunks stay multiples
  // of 16 rows (the AVX-512 row group) and at least 32.
  // FT_MOE_CPU_ITEMS overrides the 12 (read once; for A/B runs).
  const int64_t c = item_rows(rows, 12);
  const int64_t per = (rows + c - 1) / c;
  pool_.parallel_for(n_active * per, 1, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r0 = (i % per) * c;
      f(active_[i / per], r0, std::min(rows, r0 + c));
    }
  });
}

void ExpertExecutor::run(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
                         const int32_t* ids, const float* weights, int n_used, float* out, int64_t ldo) {
  const int64_t t_run0 = prof_on_ ? now_ns() : 0;
  const int64_t n_embd = L.n_embd, n_ff = L.n_ff, n_slots = n_tok * n_used;
  grow(L, n_slots);
  // Group the (token, rank) slots by expert; slot_of_[s] = position in the grouped order.
  std::fill(count_.begin(), count_.begin() + L.n_expert, 0);
  for (int64_t s = 0; s < n_slots; ++s) {
    check_id(ids[s], L.n_expert);
    if (ids[s] >= 0) ++count_[ids[s]];
  }
  active_.clear();
  int64_t off = 0;
  for (int64_t e = 0; e < L.n_expert; ++e) {
    start_[e] = off;
    if (count_[e]) active_.push_back(static_cast<int32_t>(e));
    off += count_[e];
    count_[e] = 0;
  }
  const int64_t n_routes = off;
  const bool exact = num.gpu_plan != nullptr && exact_supported(L, num);
  // Exact mode on Q8 gate / up reads only each token's Q8 row: no per-route copies of x.
  const bool copy_x = !exact || exact_reads_float_x(L, num);
  for (int64_t s = 0; s < n_slots; ++s) {
    const int32_t e = ids[s];
    if (e < 0) continue;
    const int64_t g = start_[e] + count_[e]++;
    slot_of_[s] = g;
    tok_of_[g] = s / n_used;
    if (copy_x) std::memcpy(xg_.data() + g * n_embd, x + (s / n_used) * ldx, sizeof(float) * n_embd);
  }
  if (copy_x) engine::round_act(num.round_inputs, xg_.data(), n_routes * n_embd);
  last_routes_ = n_routes;
  last_bytes_ = static_cast<int64_t>(active_.size()) * L.expert_bytes();

  const engine::Exec ex{&pool_, num.act, num.act_quant};
  // Phase clocks (FT_MOE_CPU_PROFILE); exact mode's gate|up includes x's Q8 row and aux.
  const bool prof = prof_on_;
  int64_t t_mark = prof ? now_ns() : 0;
  auto phase = [&](int i) {
    if (!prof) return;
    const int64_t t = now_ns();
    prof_ns_[i] += t - t_mark;
    t_mark = t;
  };
  if (prof) {
    prof_ns_[0] += t_mark - t_run0;
    ++prof_calls_;
    prof_bytes_ += last_bytes_;
  }
  if (active_.empty() || !exact || sched_ != RowSchedule::kFlow) hint_of_ = nullptr;  // it serves the flow loop only
  if (!active_.empty() && exact && sched_ == RowSchedule::kFlow) {
    exact_flow(L, num, x, ldx, n_tok, n_used, n_routes);  // one phase: its time counts as gate|up's
    phase(1);
  } else if (!active_.empty() && exact) {
    exact_gate_up(L, num, x, ldx, n_tok, n_used, n_routes);
    phase(1);
    exact_glu(L, num, n_routes);
    phase(2);
    exact_down(L, num, n_tok, n_used, n_routes);
    phase(3);
  } else if (!active_.empty()) {
    for_expert_rows(2 * n_ff, [&](int32_t e, int64_t r0, int64_t r1) {
      gate_up_rows<false>(L, e, xg_.data() + start_[e] * n_embd, n_embd, count_[e], gu_.data() + start_[e] * 2 * n_ff,
                          r0, r1, num);
    });
    phase(1);
    if (L.glu == engine::Glu::kGelu)
      engine::geglu(ex, gu_.data(), 2 * n_ff, n_ff, n_routes, h_.data(), n_ff);
    else
      engine::swiglu(ex, gu_.data(), 2 * n_ff, n_ff, n_routes, h_.data(), n_ff);
    engine::round_act(num.round_inputs, h_.data(), n_routes * n_ff);
    phase(2);
    for_expert_rows(n_embd, [&](int32_t e, int64_t r0, int64_t r1) {
      quant::matmul(expert_args(L.down, e, h_.data() + start_[e] * n_ff, n_ff, count_[e],
                                yd_.data() + start_[e] * n_embd, n_embd, bank_at(L, e, 2), num),
                    r0, r1);
    });
    phase(3);
  }
  if (num.slot_out) {  // per route, no combine (hybrid: the GPU sums the ranks in order)
    for (int64_t s = 0; s < n_slots; ++s) {
      float* o = out + s * ldo;
      if (ids[s] < 0)
        std::fill(o, o + n_embd, 0.0f);
      else
        std::memcpy(o, yd_.data() + slot_of_[s] * n_embd, sizeof(float) * n_embd);
    }
    phase(4);
    return;
  }
  // out = y_0 * w_0 + y_1 * w_1 + ... in rank order over the routes present (ggml adds the
  // weighted experts one by one); a token without routes gets zeros.
  auto combine = [&](int64_t t) {
    float* o = out + t * ldo;
    bool first = true;
    for (int r = 0; r < n_used; ++r) {
      const int64_t s = t * n_used + r;
      if (ids[s] < 0) continue;
      const float* y = yd_.data() + slot_of_[s] * n_embd;
      const float wr = weights[s];
      if (first) {
        for (int64_t i = 0; i < n_embd; ++i) o[i] = y[i] * wr;
        first = false;
      } else {
        for (int64_t i = 0; i < n_embd; ++i) o[i] += y[i] * wr;
      }
    }
    if (first) std::fill(o, o + n_embd, 0.0f);
    engine::round_act(num.act, o, n_embd);
  };
  if (n_tok == 1)
    combine(0);
  else
    pool_.parallel_for(n_tok, 1, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) combine(t);
    });
  phase(4);
}

void expert_exec_ref(const HostExperts& L, const ExpertNumerics& num, const float* x, int64_t ldx, int64_t n_tok,
                     const int32_t* ids, const float* weights, int n_used, float* out, int64_t ldo) {
  const int64_t n_embd = L.n_embd, n_ff = L.n_ff;
  std::vector<float> gu(static_cast<size_t>(2 * n_ff)), h(static_cast<size_t>(n_ff)), y(static_cast<size_t>(n_embd)),
      xr(static_cast<size_t>(n_embd));
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * ldx;
    if (num.round_inputs != engine::ActType::kF32) {
      for (int64_t i = 0; i < n_embd; ++i) xr[i] = engine::round_act(num.round_inputs, xt[i]);
      xt = xr.data();
    }
    float* o = out + t * ldo;
    bool first = true;
    for (int r = 0; r < n_used; ++r) {
      const int32_t e = ids[t * n_used + r];
      check_id(e, L.n_expert);
      if (e < 0) continue;
      gate_up_rows<true>(L, e, xt, n_embd, 1, gu.data(), 0, 2 * n_ff, num);
      for (int64_t i = 0; i < n_ff; ++i) {
        h[i] = engine::round_act(num.act, (L.glu == engine::Glu::kGelu ? engine::gelu(gu[i]) : engine::silu(gu[i])) *
                                              gu[n_ff + i]);
        h[i] = engine::round_act(num.round_inputs, h[i]);
      }
      quant::matmul_ref(expert_args(L.down, e, h.data(), n_ff, 1, y.data(), n_embd, bank_at(L, e, 2), num), 0, n_embd);
      const float wr = weights[t * n_used + r];
      for (int64_t i = 0; i < n_embd; ++i) o[i] = first ? y[i] * wr : o[i] + y[i] * wr;
      first = false;
    }
    if (first) std::fill(o, o + n_embd, 0.0f);
    engine::round_act(num.act, o, n_embd);
  }
}

}  // namespace ft::moe_cpu
