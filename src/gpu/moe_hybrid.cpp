#include "gpu/moe_hybrid.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/geglu.h"
#include "cuda/glu.h"
#include "cuda/moe_cache.h"

namespace ft::gpu {

namespace {

// The fetch cap when --moe-hybrid-max-fetch is unset: the PCIe side and the CPU side should
// finish a layer together, so fetch the share q = gather / (gather + cpu) of the expected
// misses per token, n_used * (1 - slots / experts) (uniform routing: the random-weight
// benchmark files hit at the cache fraction). q defaults to the H200 host's overlapped
// figures (ft bench-bw 22:36: gather 47.5 GB/s beside CPU GEMV 51.1 GB/s -> 0.48);
// FT_MOE_HYBRID_Q overrides it. At the measured cap of 1 and rate 0.5 the CPU took 200 us a
// layer (about 3 experts) while 2 fetched experts cost 121 us of gather: 2 is the balance.
int default_max_fetch(const MoeFactoryArgs& a, std::string* why) {
  double q = 0.48;
  if (const char* e = std::getenv("FT_MOE_HYBRID_Q")) q = std::clamp(std::atof(e), 0.0, 1.0);
  int64_t total = 0;
  for (const HostLayerBank& b : a.hb->layers) total += b.n_expert;
  const double n_used = static_cast<double>(a.max_routes) / cuda::kGemvMaxTokens;
  const double miss = total > 0 ? n_used * std::max(0.0, 1.0 - static_cast<double>(a.n_slot) / total) : 0.0;
  const int f = std::max(1, static_cast<int>(std::lround(q * miss)));
  *why = fmt::format("q {:.2f} x {:.1f} expected misses", q, miss);
  return f;
}

}  // namespace

void moe_experts_decode_slots(const ExpertView& E, const int32_t* ids, const MoeStep& st, float* y, cudaStream_t s) {
  // Step for step moe_experts_decode (moe_fused.cpp) up to the down projection.
  const GpuNumerics& num = *st.num;
  GpuBuffers& b = *st.b;
  const int n_used = st.n_used;
  const int64_t n_embd = E.n_embd, n_ff = E.n_ff, n_slots = st.n_slots();
  float* gu = b.gu.as<float>();
  float* hh = b.hh.as<float>();
  auto args = [&](const DevExpertTensor& t, const float* x, int64_t ldx, int64_t x_div, float* out, int64_t ldy,
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
    a.y = out;
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
    cuda::gemv(args(E.gate_up, h, n_embd, n_used, gu, 2 * n_ff, -1, !st.xq_ready), s);
  } else {
    cuda::gemv(args(E.gate, h, n_embd, n_used, gu, 2 * n_ff, 0, !st.xq_ready), s);
    cuda::gemv(args(E.up, h, n_embd, n_used, gu + n_ff, 2 * n_ff, 1, !cuda::gemv_q8_supported(E.gate.type)), s);
  }
  const bool q8_mid = num.q8 && cuda::gemv_q8_supported(E.down.type) && n_ff % 32 == 0;
  if (E.gelu)  // gemma4's GeGLU experts
    cuda::geglu_q8(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, q8_mid ? b.xq.get() : nullptr, s);
  else if (q8_mid)
    cuda::swiglu_q8(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, b.xq.get(), s);
  else
    cuda::swiglu(gu, 2 * n_ff, n_ff, n_slots, hh, n_ff, num.round, s);
  // The fused down GEMV is the combine (n_tok out rows of n_used slots); per route it is a
  // plain grouped call (n_slots out rows), whose plan may pick another kernel or lane count,
  // i.e. another summation order. Force the combine's (a launch-time setting, so a captured
  // graph keeps it).
  const DevExpertTensor& d = E.down;
  const cuda::GemvArgs a = args(d, hh, n_ff, 1, y, n_embd, 2, !q8_mid);
  const bool q8 = a.xq != nullptr;
  bool lanes_set = false, nvfp4_set = false;
  if (q8 && d.type == GgmlType::NVFP4) {
    const int kc = cuda::gemv_nvfp4_plan(d.rows, d.k, 1, st.n_tok, n_used, true).kernel;
    const int ks = cuda::gemv_nvfp4_plan(d.rows, d.k, 1, n_slots, 1, true).kernel;
    if (kc == 0) {
      cuda::gemv_set_lanes_override(cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, st.n_tok, n_used).lanes);
      lanes_set = true;
    } else if (kc != ks) {
      cuda::gemv_set_nvfp4_override(kc, 0, 0);
      nvfp4_set = true;
    }
  } else if (q8) {
    const int lc = cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, st.n_tok, n_used).lanes;
    if (lc != cuda::gemv_q8_plan(d.type, d.rows, d.k, 1, n_slots, 1).lanes) {
      cuda::gemv_set_lanes_override(lc);
      lanes_set = true;
    }
  }
  cuda::gemv(a, s);
  if (lanes_set) cuda::gemv_set_lanes_override(0);
  if (nvfp4_set) cuda::gemv_set_nvfp4_override(-1, 0, 0);
}

MoeHybrid::MoeHybrid(const MoeFactoryArgs& a)
    : hb_(a.hb),
      cache_(*a.m, *a.w, *a.hb, a.n_slot, a.max_routes),
      svc_(*a.m, a.hb, a.o.threads, cuda::kGemvMaxTokens, a.max_routes / cuda::kGemvMaxTokens, /*slot_out=*/true),
      max_fetch_(static_cast<int>(a.o.hybrid_max_fetch)) {
  fetch_why_ = "--moe-hybrid-max-fetch";
  if (a.o.hybrid_max_fetch < 0) {
    // FT_MOE_HYBRID_MAX_FETCH sets it for A/B runs of `ft bench` (which has no option).
    if (const char* e = std::getenv("FT_MOE_HYBRID_MAX_FETCH")) {
      max_fetch_ = std::max(0, std::atoi(e));
      fetch_why_ = "FT_MOE_HYBRID_MAX_FETCH";
    } else {
      max_fetch_ = default_max_fetch(a, &fetch_why_);
    }
  }
  const int64_t max_routes = a.max_routes;
  if (max_routes > cuda::kCacheMaxRoutes)
    fail("hybrid MoE backend: {} routes per decode step exceed the cache kernel's {}", max_routes,
         cuda::kCacheMaxRoutes);
  const size_t nb = static_cast<size_t>(max_routes) * 4;
  gpu_wts_ = cuda::DeviceBuffer(nb);
  cpu_ids_ = cuda::DeviceBuffer(nb);
  cpu_wts_ = cuda::DeviceBuffer(nb);
  extra_bytes_ = 3 * nb;
}

void MoeHybrid::decode(const MoeStep& st, cudaStream_t s) {
  const int64_t n = st.n_slots();
  float* gpu_wts = gpu_wts_.as<float>();
  int32_t* cpu_ids = cpu_ids_.as<int32_t>();
  float* cpu_wts = cpu_wts_.as<float>();
  cuda::moe_cache_ensure_hybrid(cache_.state(), st.layer, st.ids, st.wts, n, max_fetch_, cache_.slot_ids(), gpu_wts,
                                cpu_ids, cpu_wts, cache_.misses(), cache_.counters(), s);
  // The CPU starts first: its GEMVs overlap the fetch and the GPU's grouped GEMVs.
  svc_.enqueue_submit(st, cpu_ids, cpu_wts, s);
  cache_.gather(st.layer, n, s);
  // Per route on both sides, then the ranks summed in order (moe_hybrid.h). b.ysort is the
  // prefill's [slots][n_embd] scratch, idle during decode.
  float* yg = st.b->ysort.as<float>();
  moe_experts_decode_slots(cache_.view(st.layer, 0, cache_.n_slot()), cache_.slot_ids(), st, yg, s);
  svc_.enqueue_finish(st, s);
  hybrid_combine(yg, svc_.out_dev(), cpu_ids, st.wts, st.n_tok, st.n_used, hb_->layers[st.layer].n_embd, st.x,
                 hb_->layers[st.layer].n_embd, st.num->round, s);
}

std::string MoeHybrid::describe() const {
  const int64_t sb = SlotCache::slot_bytes(*hb_);
  return fmt::format("hybrid ({} GPU slots of {:.2f} MiB, at most {} misses fetched per layer and step ({}), the "
                     "rest on the CPU; {})",
                     cache_.n_slot(), static_cast<double>(sb) / (1024.0 * 1024.0), max_fetch_, fetch_why_,
                     svc_.describe());
}

MoeStats MoeHybrid::stats() const { return cache_.stats(); }

void MoeHybrid::reset_stats() {
  cache_.reset_stats();
  svc_.reset_stats();
}

}  // namespace ft::gpu
