#include "gpu/moe_spec.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/log.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/moe_route.h"
#include "cuda/norm.h"
#include "gpu/moe_offload.h"
#include "model/model.h"

namespace ft::gpu {

int MoeSpec::k_from_env(int def) {
  if (const char* sp = std::getenv("FT_MOE_SPEC")) return std::max(0, std::atoi(sp));
  return def;
}

bool MoeSpec::plain_routers(const model::Model& m, const DeviceWeights& w, std::string* why) {
  bool any = false;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const DevLayer& D = w.layers[l];
    if (!D.moe) continue;
    any = true;
    const DevMatrix r0 = D.router.parts.empty() ? DevMatrix{} : D.router.parts[0];
    const char* bad = nullptr;
    if (D.router.parts.size() != 1)
      bad = "a router in several parts";
    else if (D.router.row_scale != nullptr || r0.scale != 1.0f)
      bad = "a scaled router";
    else if (D.router_in_scale != nullptr || D.ffn_norm == nullptr)
      bad = "a router input other than the FFN norm's output";
    else if (D.router.rows != m.hp.n_expert ||
             !cuda::moe_router_route_supported(r0.type, r0.k, r0.row_bytes, cuda::kGemvMaxTokens))
      bad = "a router the one-launch router kernel does not take";
    if (bad) {
      if (why) *why = fmt::format("layer {}: {}", l, bad);
      return false;
    }
  }
  if (!any && why) *why = "no MoE layer";
  return any;
}

MoeSpec::MoeSpec(const model::Model& m, const DeviceWeights& w, int64_t max_routes, int k)
    : k_(k), m_(m), w_(w), max_routes_(max_routes) {
  const int64_t L = static_cast<int64_t>(w.layers.size());
  next_moe_.assign(static_cast<size_t>(L), -1);
  int64_t next = -1;
  for (int64_t l = L - 1; l >= 0; --l) {
    next_moe_[static_cast<size_t>(l)] = next;
    if (w.layers[static_cast<size_t>(l)].moe) next = l;
  }
  first_moe_ = next;
  if (k_ <= 0) {
    k_ = 0;
    return;
  }
  std::string why;
  if (!plain_routers(m, w, &why)) {
    if (std::getenv("FT_MOE_SPEC")) log::warn("FT_MOE_SPEC: speculative fetches off ({}: {})", m.hp.arch, why);
    k_ = 0;
    return;
  }
  const char* from = std::getenv("FT_MOE_SPEC_FROM");
  from_out_ = from && std::strcmp(from, "out") == 0;
  if (from_out_) {
    // st.x must be the residual after the routed experts: no shared expert added later.
    for (const DevLayer& D : w.layers)
      if (D.moe && !D.down_shexp.empty()) from_out_ = false;
    if (!from_out_) log::warn("FT_MOE_SPEC_FROM=out: {} adds a shared expert after the routed ones; guessing from "
                              "the FFN input", m.hp.arch);
  }
  const char* early = std::getenv("FT_MOE_SPEC_EARLY");
  early_ = !(early && early[0] == '0');
  auto alloc = [&](cuda::DeviceBuffer& b, size_t n) {
    b = cuda::DeviceBuffer(n);
    FT_CUDA_CHECK(cudaMemset(b.get(), 0, n));
    bytes_ += n;
  };
  alloc(pred_, static_cast<size_t>(max_routes) * sizeof(int32_t));
  alloc(logits_, static_cast<size_t>(cuda::kGemvMaxTokens * m.hp.n_expert) * sizeof(float));
  alloc(wts_, static_cast<size_t>(max_routes) * sizeof(float));
  alloc(ticket_, sizeof(unsigned));
  alloc(miss_, static_cast<size_t>(1 + 2 * max_routes) * sizeof(int32_t));
  alloc(count_, sizeof(unsigned long long));
  if (from_out_) alloc(hnorm_, static_cast<size_t>(cuda::kGemvMaxTokens * m.hp.n_embd) * sizeof(float));
  int32_t* p = miss_.as<int32_t>();
  m_miss_ = {p, p + 1, p + 1 + max_routes};
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&routed_, cudaEventDisableTiming));
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&booked_, cudaEventDisableTiming));
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&book_s_, cudaStreamNonBlocking));
}

MoeSpec::~MoeSpec() {
  if (routed_) cudaEventDestroy(routed_);
  if (booked_) cudaEventDestroy(booked_);
  if (copied_) cudaEventDestroy(copied_);
  if (book_s_) cudaStreamDestroy(book_s_);
}

void MoeSpec::wait_booked(cudaStream_t s) {
  if (!booked_pending_) return;
  FT_CUDA_CHECK(cudaStreamWaitEvent(s, early_ ? booked_ : copied_, 0));
  booked_pending_ = false;
}

void MoeSpec::guess(const MoeStep& st, cudaStream_t s) {
  if (k_ == 0) return;
  const int64_t next = next_moe(st.layer);
  if (next < 0) return;
  const DevLayer& D = w_.layers[static_cast<size_t>(next)];
  const DevMatrix& r0 = D.router.parts[0];
  const int64_t n_embd = m_.hp.n_embd, n_expert = m_.hp.n_expert;
  const float* in = st.h;
  if (from_out_) {
    cuda::rmsnorm(st.x, n_embd, D.ffn_norm, n_embd, m_.hp.rms_eps, st.n_tok, hnorm_.as<float>(), n_embd,
                  st.num->round, s);
    in = hnorm_.as<float>();
  }
  cuda::moe_router_route(in, n_embd, st.n_tok, r0.type, r0.w, r0.row_bytes, r0.k, n_expert, logits_.as<float>(),
                         n_expert, st.n_used, pred_.as<int32_t>(), wts_.as<float>(), ticket_.as<unsigned>(), s);
  FT_CUDA_CHECK(cudaEventRecord(routed_, s));
  guessed_for_ = next;
}

void MoeSpec::fetch(const SlotCache& c, const MoeStep& st, cudaStream_t g) {
  if (k_ == 0 || guessed_for_ < 0) return;
  const int64_t next = guessed_for_;
  guessed_for_ = -1;
  // The bookkeeping on a stream of its own, beside the layer's gather: it only reads pred_
  // and the cache state (after this layer's ensure: routed_ is later on the main stream) and
  // writes its own miss list, so the guessed copies can follow the layer's own on g at once.
  FT_CUDA_CHECK(cudaStreamWaitEvent(book_s_, routed_, 0));
  cuda::moe_cache_prefetch(c.state(), next, pred_.as<int32_t>(), st.n_slots(), k_, m_miss_,
                           count_.as<unsigned long long>(), book_s_);
  FT_CUDA_CHECK(cudaEventRecord(booked_, book_s_));
  FT_CUDA_CHECK(cudaStreamWaitEvent(g, booked_, 0));
  c.gather(next, k_, g, m_miss_, SlotCache::kClockSpec);
  FT_CUDA_CHECK(cudaEventRecord(copied_, g));
  booked_pending_ = copies_pending_ = true;
}

void MoeSpec::wait_copies(cudaStream_t s) {
  if (!copies_pending_) return;
  FT_CUDA_CHECK(cudaStreamWaitEvent(s, copied_, 0));
  copies_pending_ = false;
}

uint64_t MoeSpec::fetched() const {
  if (k_ == 0) return 0;
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return cuda::to_host<unsigned long long>(count_, 1)[0];
}

void MoeSpec::reset_stats() {
  if (k_ == 0) return;
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  FT_CUDA_CHECK(cudaMemset(count_.get(), 0, count_.bytes()));
}

std::string MoeSpec::describe() const {
  if (k_ == 0) return "";
  return fmt::format("up to {} speculative fetches a layer (guessed from the {}{})", k_,
                     from_out_ ? "layer's output" : "FFN input", early_ ? "" : ", ensure waits for the copies");
}

}  // namespace ft::gpu
