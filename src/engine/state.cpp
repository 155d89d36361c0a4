#include "engine/state.h"

#include <algorithm>

#include "model/model.h"

namespace ft::engine {
namespace {

std::vector<int64_t> kv_dims(const model::HParams& hp) {
  std::vector<int64_t> d(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il)  // archs here have head_dim_k == head_dim_v
    d[il] = hp.kv_src(il) == il ? hp.n_head_kv[il] * hp.head_dim(il) : 0;  // 0: reads another layer's KV
  for (int64_t il = 0; il < hp.n_layer; ++il)
    if (hp.is_recurrent(il)) d[il] = 0;  // Gated DeltaNet layer: no KV cache
  return d;
}

// A sliding-window layer keeps window + n_ubatch - 1 rows: the oldest key the first query
// of a batch still sees plus the whole batch (KvCache ring).
std::vector<int64_t> kv_cells(const model::HParams& hp, int64_t n_ubatch) {
  std::vector<int64_t> c(static_cast<size_t>(hp.n_layer), 0);
  for (int64_t il = 0; il < hp.n_layer; ++il)
    if (hp.window(il) > 0) c[il] = hp.window(il) + n_ubatch - 1;
  return c;
}

}  // namespace

State::State(const model::Model& m, ThreadPool& pool, ActType act, int64_t n_ctx_,
             int64_t n_ubatch_)
    : ex{&pool, act},
      n_ctx(n_ctx_),
      n_ubatch(std::max<int64_t>(1, std::min(n_ubatch_, n_ctx_))),
      kv(act, n_ctx_, kv_dims(m.hp), kv_cells(m.hp, n_ubatch)),
      dn(m.gdn_shape, m.hp.recurrent, n_ubatch) {
  const model::HParams& hp = m.hp;
  const auto U = static_cast<size_t>(n_ubatch);
  int64_t qkv = 0, attn = 0, n_ff = 0, n_used = 0, hd_max = std::max(hp.head_dim_k, hp.head_dim_v);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const int64_t hk = hp.head_dim_l.empty() ? hp.head_dim_k : hp.head_dim_l[il];
    const int64_t hv = hp.head_dim_l.empty() ? hp.head_dim_v : hp.head_dim_l[il];
    hd_max = std::max({hd_max, hk, hv});
    qkv = std::max(qkv, hp.n_head[il] * hk + hp.n_head_kv[il] * (hk + hv));
    attn = std::max(attn, hp.n_head[il] * hv);
    n_ff = std::max(n_ff, hp.n_ff[il]);
    if (hp.attn_gated_q) qkv = std::max(qkv, 2 * hp.n_head[il] * hp.head_dim_k + 2 * hp.n_head_kv[il] * hp.head_dim_k);
    n_used = std::max(n_used, hp.n_expert_used[il]);
  }
  const auto E = static_cast<size_t>(hp.n_expert);
  s.x.resize(U * hp.n_embd);
  s.h.resize(U * hp.n_embd);
  s.qkv.resize(U * qkv);
  s.attn.resize(U * attn);
  s.branch.resize(U * hp.n_embd);
  s.ffn_gu.resize(U * 2 * n_ff);
  s.ffn_h.resize(U * n_ff);
  s.router.resize(U * E);
  s.probs.resize(E);
  s.order.resize(E);
  s.moe_ids.resize(U * n_used);
  s.moe_w.resize(U * n_used);
  n_ff = std::max(n_ff, hp.n_ff_shexp);
  s.ffn_gu.resize(U * 2 * n_ff);
  s.ffn_h.resize(U * n_ff);
  if (hp.attn_gated_q) s.attn_gate.resize(U * attn);
  if (hp.n_ff_shexp > 0) s.shexp.resize(U * hp.n_embd);
  if (hp.n_expert > 0) s.branch2.resize(U * hp.n_embd);
  s.per_layer.resize(U * hp.n_layer * hp.n_embd_per_layer);
  // pl_gate also holds one token's whole per-layer embedding row while the inputs are built.
  s.pl_gate.resize(std::max(U, static_cast<size_t>(hp.n_layer)) * hp.n_embd_per_layer);
  this->attn.reserve(pool.size(), n_ctx, hd_max);
}

}  // namespace ft::engine
