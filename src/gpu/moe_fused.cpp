// The fused MoE backend -- every expert in the weight arena -- and the expert kernels every
// GPU-side backend shares (moe_experts_decode / moe_experts_decode_slots /
// moe_experts_prefill over an ExpertView).
#include <cstdlib>
#include <fmt/format.h>

#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/gemm.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/geglu.h"
#include "cuda/glu.h"
#include "cuda/moe_combine.h"
#include "cuda/moe_route.h"
#include "gpu/debug_skip.h"
#include "gpu/moe_backend.h"
#include "quant/act_quant.h"

namespace ft::gpu {

MoeLayerStats MoeStats::total() const {
  MoeLayerStats t;
  for (const MoeLayerStats& l : layers) {
    t.routes += l.routes;
    t.hits += l.hits;
    t.misses_fetched += l.misses_fetched;
    t.misses_cpu += l.misses_cpu;
    t.bytes_h2d += l.bytes_h2d;
    t.prefill_layers += l.prefill_layers;
  }
  return t;
}

std::string format_moe_stats(const MoeStats& s) {
  std::string out = fmt::format("moe stats: {} decode steps\n", s.decode_steps);
  out += fmt::format("{:>6} {:>10} {:>8} {:>10} {:>10} {:>12} {:>8}\n", "layer", "routes", "hit%", "fetched",
                     "cpu", "H2D MiB", "prefill");
  auto row = [&](const std::string& name, const MoeLayerStats& l) {
    const double hit = l.routes ? 100.0 * static_cast<double>(l.hits) / static_cast<double>(l.routes) : 0.0;
    out += fmt::format("{:>6} {:>10} {:>8.1f} {:>10} {:>10} {:>12.1f} {:>8}\n", name, l.routes, hit, l.misses_fetched,
                       l.misses_cpu, static_cast<double>(l.bytes_h2d) / (1024.0 * 1024.0), l.prefill_layers);
  };
  for (size_t i = 0; i < s.layers.size(); ++i)
    if (s.layers[i].routes || s.layers[i].prefill_layers) row(std::to_string(i), s.layers[i]);
  const MoeLayerStats t = s.total();
  row("all", t);
  if (s.decode_steps > 0)
    out += fmt::format("per decode step: {:.2f} experts fetched, {:.2f} MiB H2D (decode+prefill)\n",
                       static_cast<double>(t.misses_fetched) / static_cast<double>(s.decode_steps),
                       static_cast<double>(t.bytes_h2d) / (1024.0 * 1024.0) / static_cast<double>(s.decode_steps));
  if (s.pregate[0] > 0) {
    auto pct = [](uint64_t a, uint64_t b) { return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0; };
    out += fmt::format("pre-gating (next layer's router on this layer's FFN input / output): {:.1f}% / {:.1f}% of {} "
                       "routes predicted; of the {} misses {:.1f}% / {:.1f}%\n",
                       pct(s.pregate[1], s.pregate[0]), pct(s.pregate[2], s.pregate[0]), s.pregate[0], s.pregate[3],
                       pct(s.pregate[4], s.pregate[3]), pct(s.pregate[5], s.pregate[3]));
  }
  if (s.spec_fetched > 0 && s.decode_steps > 0)
    out += fmt::format("speculative fetches: {} ({:.2f} per decode step, beside the misses above)\n", s.spec_fetched,
                       static_cast<double>(s.spec_fetched) / static_cast<double>(s.decode_steps));
  return out;
}

namespace {

// The fused combine (n_tok out rows of n_used slots) and a plain grouped down projection
// (n_slots out rows) may get plans of another kernel or lane count, i.e. another summation
// order: give a's per-slot call the combine's plan so that each row carries the bits the
// combine sums.
void plan_as_combine(const DevExpertTensor& d, const MoeStep& st, cuda::GemvArgs& a) {
  if (a.xq == nullptr) return;  // the float path has one plan whatever the output
  const int n_used = st.n_used;
  const int64_t n_slots = st.n_slots();
  if (d.type == GgmlType::NVFP4) {
    const int kc = cuda::gemv_nvfp4_plan(d.rows, d.k, 1, st.n_tok, n_used, true).kernel;
    const int ks = cuda::gemv_nvfp4_plan(d.rows, d.k, 1, n_slots, 1, true).kernel;
    if (kc == 0)
      a.plan_lanes = cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, st.n_tok, n_used).lanes;
    else if (kc != ks)
      a.plan_nvfp4_kernel = kc;
  } else {
    const int lc = cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, st.n_tok, n_used).lanes;
    if (lc != cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, n_slots, 1).lanes) a.plan_lanes = lc;
  }
}

// FT_MOE_PAIR=0: gate and up as two calls (the A/B of the one-launch pair below).
const bool g_pair = [] {
  const char* e = std::getenv("FT_MOE_PAIR");
  return e == nullptr || *e != '0';
}();

// FT_MOE_IDS_EARLY=0: the down launch reads its ids, and streams its first expert rows, only after
// its PDL wait (the A/B of session 14: Qwen3-30B-A3B tg128 411.2 / 411.2 / 410.9 tok/s with the early
// start against 392.1 / 391.1 / 391.8 without, alternating in one H200 call).
const bool g_ids_early = [] {
  const char* e = std::getenv("FT_MOE_IDS_EARLY");
  return e == nullptr || *e != '0';
}();

// Decode: grouped GEMVs read each chosen expert's rows and its scale from the bank; the down
// GEMV sums the slots of a token with their routing weights and adds them to st.x, or with
// y_slots set writes each route's row there ([n_slots][n_embd]) under the combine's plan.
// FT_MOE_ROUTE_IN_EXPERTS=0: the router launch routes, as before session 21 (its A/B: +0.4% with
// the routing in the gate / up launch, gpu/forward_moe.cpp norm_route_experts).
const bool g_route_in_experts = [] {
  const char* e = std::getenv("FT_MOE_ROUTE_IN_EXPERTS");
  return e == nullptr || *e != '0';
}();

// Whether gate and up go as one paired call (below).
bool paired(const ExpertView& E) {
  return !E.gate_up && g_pair && E.gate.type == E.up.type && E.gate.rows == E.up.rows && E.gate.k == E.up.k &&
         E.gate.row_bytes == E.up.row_bytes && E.gate.expert_bytes == E.up.expert_bytes;
}

void experts_decode(const ExpertView& E, const int32_t* ids, const MoeStep& st_in, float* y_slots, cudaStream_t s) {
  // A routing left to decode (MoeStep::route_logits): the paired gate / up call routes in its own
  // launch (GemvArgs::route_logits; it falls back to moe_route itself); every other path routes first.
  MoeStep st = st_in;
  if (st.route_logits != nullptr && (y_slots != nullptr || !paired(E))) {
    cuda::moe_route(st.route_logits, st.route_n_expert, st.route_n_expert, st.n_tok, st.n_used, st.route_ids,
                    st.route_wts, s);
    st.route_logits = nullptr;
  }
  const GpuNumerics& num = *st.num;
  GpuBuffers& b = *st.b;
  const int n_used = st.n_used;
  const int64_t n_embd = E.n_embd, n_ff = E.n_ff, n_slots = st.n_slots();
  float* gu = b.gu.as<float>();
  float* hh = b.hh.as<float>();
  // quantize: whether this call must (re)write the Q8 copy of x (gate and up share theirs).
  auto grouped = [&](const DevExpertTensor& t, const float* x, int64_t ldx, int64_t x_div, float* y, int64_t ldy,
                     int bank_col, bool quantize) {
    const bool q8 = num.q8 && cuda::gemv_q8_supported(t.type);
    if (q8 && quantize) cuda::quantize_act_q8(x, ldx, t.k, n_slots / x_div, b.xq.get(), s);
    cuda::GemvArgs a;
    a.type = t.type;
    a.w = t.w;
    a.row_bytes = t.row_bytes;
    a.k = t.k;
    a.rows = t.rows;
    a.x = x;
    a.ldx = ldx;
    a.n_tok = n_slots;
    a.y = y;
    a.ldy = ldy;
    a.round = num.round;
    a.ids = ids;
    a.expert_bytes = t.expert_bytes;
    a.x_div = x_div;
    a.bank = bank_col >= 0 ? E.bank : nullptr;
    a.bank_col = bank_col < 0 ? 0 : bank_col;
    a.xq = q8 ? b.xq.get() : nullptr;
    return a;
  };
  const float* h = st.h;
  if (E.gate_up) {
    cuda::gemv(grouped(E.gate_up, h, n_embd, n_used, gu, 2 * n_ff, -1, !st.xq_ready), s);
  } else if (paired(E)) {
    // gate and up in one call: one launch where the kernel takes pairs (NVFP4 slab, same bits
    // as two launches): H200 session 12, Qwen3-30B-A3B tg128 396.3 / 396.0 tok/s against
    // 380.4 / 381.5 as two launches (FT_MOE_PAIR=0), alternating in one call.
    cuda::GemvArgs a = grouped(E.gate, h, n_embd, n_used, gu, 2 * n_ff, 0, !st.xq_ready);
    a.w_pair = E.up.w;
    a.w_pair_y_off = n_ff;
    if (st.route_logits != nullptr) {
      a.route_logits = st.route_logits;
      a.route_n_expert = st.route_n_expert;
      a.route_ids = st.route_ids;
      a.route_w = st.route_wts;
    }
    cuda::gemv(a, s);
  } else {
    cuda::gemv(grouped(E.gate, h, n_embd, n_used, gu, 2 * n_ff, 0, !st.xq_ready), s);
    cuda::gemv(grouped(E.up, h, n_embd, n_used, gu + n_ff, 2 * n_ff, 1, !cuda::gemv_q8_supported(E.gate.type)), s);
  }
  const bool q8_mid = num.q8 && cuda::gemv_q8_supported(E.down.type) && n_ff % 32 == 0;
  void* xq_mid = st.xq_mid ? st.xq_mid : b.xq.get();
  if (debug::skip(debug::kSkipMoeSwiglu, st.n_tok)) {
    // FT_DEBUG_SKIP=moe_swiglu: the down launch reads whatever the Q8 buffer holds -- the FFN norm's
    // row, another layout: garbage and NaNs (session 22: meaningless alone; with `route`, ~0.9 us).
  } else if (E.gelu)  // gemma4's GeGLU experts
    cuda::geglu_q8(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, q8_mid ? xq_mid : nullptr, s);
  else if (q8_mid)
    cuda::swiglu_q8(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, xq_mid, s);
  else
    cuda::swiglu(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, s);
  cuda::GemvArgs down = grouped(E.down, hh, n_ff, 1, y_slots ? y_slots : st.x, n_embd, 2, !q8_mid);
  if (q8_mid) down.xq = xq_mid;
  // The gate / up and SwiGLU launches sit between the ids' writer and this one (FT_MOE_IDS_EARLY=0 off).
  down.ids_early = g_ids_early;
  if (y_slots == nullptr) {
    down.slot_w = st.wts;
    down.n_used = n_used;
    down.accumulate = true;
    down.y_early = true;  // st.x: written before the gate / up and SwiGLU launches
  } else {
    plan_as_combine(E.down, st, down);
  }
  cuda::gemv(down, s);
}

}  // namespace

void moe_experts_decode(const ExpertView& E, const int32_t* ids, const MoeStep& st, cudaStream_t s) {
  experts_decode(E, ids, st, nullptr, s);
}

void moe_experts_decode_slots(const ExpertView& E, const int32_t* ids, const MoeStep& st, float* y, cudaStream_t s) {
  experts_decode(E, ids, st, y, s);
}

// Prefill: token-slots sorted by expert on the device, one grouped tensor-core GEMM per
// projection over all experts, then the weighted combine back into token order.
void moe_experts_prefill(const ExpertView& E, const int32_t* ids, const MoeStep& st, cudaStream_t s) {
  const GpuNumerics& num = *st.num;
  GpuBuffers& b = *st.b;
  const int n_used = st.n_used;
  const int64_t n_embd = E.n_embd, n_ff = E.n_ff, n_slots = st.n_slots();
  int32_t* order = b.order.as<int32_t>();
  int32_t* offsets = b.offsets.as<int32_t>();
  cuda::moe_sort(ids, n_slots, E.n_expert, order, offsets, b.sort_ws.get(), s);
  float* gu = b.gu.as<float>();
  float* hh = b.hh.as<float>();
  float* ys = b.ysort.as<float>();
  // num.q8_prefill (gemma4's auto, state.h): Q8_0-dot experts multiply their inputs' Q8 values
  // in fp32, as llama.cpp's CPU build does.
  auto q8_in = [&](const DevExpertTensor& t) {
    return num.q8_prefill && t.k % 32 == 0 && cuda::gemv_q8_supported(t.type) &&
           quant::act_dot_type(t.type) == GgmlType::Q8_0;
  };
  auto grouped = [&](const DevExpertTensor& t, const float* x, int64_t ldx, const int32_t* ord,
                     int64_t x_div, float* y, int64_t ldy, int bank_col) {
    cuda::GroupedGemmArgs g;
    g.g.type = t.type;
    g.g.w = t.w;
    g.g.row_bytes = t.row_bytes;
    g.g.k = t.k;
    g.g.rows = t.rows;
    g.g.x = x;
    g.g.ldx = ldx;
    g.g.n_tok = n_slots;
    g.g.y = y;
    g.g.ldy = ldy;
    g.g.round = num.round;
    g.g.prec = q8_in(t) ? cuda::gemm_split_prec(t.type, num.exact_prec) : num.prec;
    g.expert_bytes = t.expert_bytes;
    g.n_expert = E.n_expert;
    g.order = ord;
    g.offsets = offsets;
    g.x_div = x_div;
    g.bank = bank_col >= 0 ? E.bank : nullptr;
    g.bank_col = bank_col < 0 ? 0 : bank_col;
    cuda::gemm_grouped(*b.gemm, g, s);
  };
  const float* h = st.h;
  if (q8_in(E.gate_up ? E.gate_up : E.gate)) {  // into ys: the down projection overwrites it after gate/up
    cuda::round_trip_act_q8(h, n_embd, n_embd, st.n_tok, ys, n_embd, s);
    h = ys;
  }
  if (E.gate_up) {
    grouped(E.gate_up, h, n_embd, order, n_used, gu, 2 * n_ff, -1);
  } else {
    grouped(E.gate, h, n_embd, order, n_used, gu, 2 * n_ff, 0);
    grouped(E.up, h, n_embd, order, n_used, gu + n_ff, 2 * n_ff, 1);
  }
  if (E.gelu)
    cuda::geglu(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, s);
  else
    cuda::swiglu(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, s);
  if (q8_in(E.down)) cuda::round_trip_act_q8(hh, n_ff, n_ff, n_slots, hh, n_ff, s);
  grouped(E.down, hh, n_ff, nullptr, 1, ys, n_embd, 2);
  // b.ids doubles as the inverse permutation's scratch: routing is done with it.
  cuda::moe_combine_sorted(ys, n_embd, order, st.n_tok, n_used, st.wts, n_embd, st.x, n_embd, num.round,
                           /*accumulate=*/true, b.ids.as<int32_t>(), s);
}

namespace {

class MoeFused : public MoeBackend {
 public:
  explicit MoeFused(const DeviceWeights& w) : w_(w) {}
  void decode(const MoeStep& st, cudaStream_t s) override {
    moe_experts_decode(w_.layers[st.layer].experts, st.ids, st, s);
  }
  void prefill(const MoeStep& st, cudaStream_t s) override {
    moe_experts_prefill(w_.layers[st.layer].experts, st.ids, st, s);
  }
  std::string describe() const override { return "fused (all experts in GPU memory)"; }
  bool routes_decode() const override { return g_route_in_experts; }

 private:
  const DeviceWeights& w_;
};

}  // namespace

std::unique_ptr<MoeBackend> make_moe_fused(const DeviceWeights& w) { return std::make_unique<MoeFused>(w); }

}  // namespace ft::gpu
