// The routed experts of a MoE layer, shared by every architecture's forward pass (forward.cpp,
// forward_qwen35.cpp, forward_gemma4.cpp): the router's fp32 logits, top-k routing into
// b.ids / b.wts (cuda/moe_route.h), then the MoE backend (gpu/moe_backend.h), which adds the
// weighted experts into the caller's rows.
#include <cstdint>
#include <cstdlib>

#include "cuda/gemv.h"
#include "cuda/moe_route.h"
#include "gpu/debug_skip.h"
#include "gpu/forward.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

// A router the one-launch kernels take: one part, no row or tensor scale.
bool router_one_launch(const DevLayer& L) {
  return L.router.parts.size() == 1 && L.router.row_scale == nullptr && L.router.parts[0].scale == 1.0f;
}

}  // namespace

void GpuForward::route_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, bool one_launch,
                               cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const int64_t n_embd = hp.n_embd, n_expert = hp.n_expert;
  const int n_used = static_cast<int>(hp.n_expert_used[il]);
  const DevMatrix& r0 = L.router.parts[0];
  if (one_launch && n_tok <= cuda::kGemvMaxTokens && router_one_launch(L) &&
      cuda::moe_router_route_supported(r0.type, r0.k, r0.row_bytes, n_tok)) {
    // Decode: router GEMV and routing in one launch.
    cuda::moe_router_route(h, n_embd, n_tok, r0.type, r0.w, r0.row_bytes, r0.k, n_expert, b_.router.as<float>(),
                           n_expert, n_used, b_.ids.as<int32_t>(), b_.wts.as<float>(),
                           b_.route_ticket.as<unsigned>(), s);
    return;
  }
  // Router logits stay fp32 in every dtype (as on the CPU and in llama.cpp).
  linear(L.router, h, n_embd, n_tok, b_.router.as<float>(), n_expert, cuda::Round::kNone, false, num_.q8, s,
         /*exact=*/true, xq_ready);
  cuda::moe_route(b_.router.as<float>(), n_expert, n_expert, n_tok, n_used, b_.ids.as<int32_t>(), b_.wts.as<float>(),
                  s);
}

// FT_MOE_NORM_ROUTE=0: the norm and the router as two launches (session 12's A/B).
const bool g_norm_route = [] {
  const char* e = std::getenv("FT_MOE_NORM_ROUTE");
  return e == nullptr || *e != '0';
}();

bool GpuForward::norm_route_experts(int64_t il, const float* x, float* h, cudaStream_t s, bool* deferred) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  if (!g_norm_route || !router_one_launch(L)) return false;
  const DevMatrix& r0 = L.router.parts[0];
  if (r0.k != hp.n_embd ||
      !cuda::moe_norm_router_route_supported(r0.type, r0.k, r0.row_bytes, x, L.ffn_norm, h, b_.xq.get(), r0.w))
    return false;
  // A backend that routes in its expert launch (MoeBackend::routes_decode) gets the logits only:
  // the router's fence, ticket and last-block routing leave the chain (H200 session 21 call 4,
  // Qwen3-30B-A3B tg128 477.46 / 476.51 / 475.28 against 475.22 / 473.98 / 474.99 with
  // FT_MOE_ROUTE_IN_EXPERTS=0, alternating: +0.4%; the router link stays ~9 us a layer without its
  // routing tail, FT_DEBUG_SKIP).
  const bool defer = deferred != nullptr && moe_->routes_decode();
  cuda::moe_norm_router_route(x, L.ffn_norm, hp.rms_eps, num_.round, h, b_.xq.get(), hp.n_embd, r0.type, r0.w,
                              r0.row_bytes, hp.n_expert, b_.router.as<float>(), hp.n_expert,
                              static_cast<int>(hp.n_expert_used[il]), b_.ids.as<int32_t>(), b_.wts.as<float>(),
                              b_.route_ticket.as<unsigned>(), s, /*route=*/!defer);
  if (deferred != nullptr) *deferred = defer;
  return true;
}

void GpuForward::run_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, float* out, cudaStream_t s,
                             bool route_pending) const {
  MoeStep st;
  if (route_pending) {
    st.route_logits = b_.router.as<float>();
    st.route_n_expert = m_.hp.n_expert;
    st.route_ids = b_.ids.as<int32_t>();
    st.route_wts = b_.wts.as<float>();
  }
  st.layer = il;
  st.n_tok = n_tok;
  st.n_used = static_cast<int>(m_.hp.n_expert_used[il]);
  st.h = h;
  st.xq_ready = xq_ready;
  st.ids = b_.ids.as<int32_t>();
  st.wts = b_.wts.as<float>();
  st.x = out;
  st.b = &b_;
  st.num = &num_;
  if (n_tok <= cuda::kGemvMaxTokens)
    moe_->decode(st, s);
  else
    moe_->prefill(st, s);
}

void GpuForward::routed_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, float* out,
                                cudaStream_t s) const {
  route_experts(il, h, n_tok, xq_ready, /*one_launch=*/true, s);
  run_experts(il, h, n_tok, xq_ready, out, s);
}

}  // namespace ft::gpu
