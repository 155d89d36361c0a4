#include "engine/state.h"

#include <algorithm>

#include "model/model.h"

namespace ft::engine {
namespace {

std::vector<int64_t> kv_dims(const model::HParams& hp) {
  std::vector<int64_t> d(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il)
    d[il] = hp.n_head_kv[il] * hp.head_dim_k;  // archs here have head_dim_k == head_dim_v
  for (int64_t il = 0; il < hp.n_layer; ++il)
    if (hp.is_recurrent(il)) d[il] = 0;  // Gated DeltaNet layer: no KV cache
  return d;
}

}  // namespace

State::State(const model::Model& m, ThreadPool& pool, ActType act, int64_t n_ctx_,
             int64_t n_ubatch_)
    : ex{&pool, act},
      n_ctx(n_ctx_),
      n_ubatch(std::max<int64_t>(1, std::min(n_ubatch_, n_ctx_))),
      kv(act, n_ctx_, kv_dims(m.hp)),
      dn(m.gdn_shape, m.hp.recurrent, n_ubatch) {
  const model::HParams& hp = m.hp;
  const auto U = static_cast<size_t>(n_ubatch);
  int64_t qkv = 0, attn = 0, n_ff = 0, n_used = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    qkv = std::max(qkv, hp.n_head[il] * hp.head_dim_k + hp.n_head_kv[il] * (hp.head_dim_k + hp.head_dim_v));
    attn = std::max(attn, hp.n_head[il] * hp.head_dim_v);
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
  this->attn.reserve(pool.size(), n_ctx, std::max(hp.head_dim_k, hp.head_dim_v));
}

}  // namespace ft::engine
