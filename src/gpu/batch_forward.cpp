#include "gpu/batch_forward.h"

#include "cuda/attention_batch.h"
#include "cuda/rope.h"
#include "gpu/state.h"
#include "gpu/weights.h"
#include "model/model.h"

namespace ft::gpu {

void batch_attention(const model::Model& m, const DevLayer& L, int64_t il, GpuBuffers& b, const GpuNumerics& num,
                     int64_t n_tok, cudaStream_t s, void* out_q8) {
  const model::HParams& hp = m.hp;
  const BatchRows& br = *b.batch;
  const int64_t hd = hp.head_dim_k, nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t ld = L.qkv.rows;
  float* qkv = b.qkv.as<float>();
  cuda::KvStore kv;
  kv.type = num.kv;
  kv.k_cache = b.k_cache[il].get();
  kv.v_cache = b.v_cache[il].get();
  kv.v = qkv + nh * hd + nkv * hd;
  kv.ldv = ld;
  kv.v_head_dim = hp.head_dim_v;
  cuda::qk_norm_rope_store_batch(qkv, ld, n_tok, nh, nkv, hd, L.q_norm, L.k_norm, hp.rms_eps, b.rope_cs.as<float>(),
                                 hp.rope.n_rot, hp.rope.type == model::RopeType::kNeox, br.pos, br.base, num.round,
                                 kv, s);
  cuda::AttnBatchArgs a;
  a.n_head = nh;
  a.n_head_kv = nkv;
  a.head_dim = hd;
  if (hp.head_dim_v != hd) a.head_dim = -1;  // rejected by the kernel's checks (as attention())
  a.scale = hp.attn_scale;
  a.q = qkv;
  a.ldq = ld;
  a.n_tok = n_tok;
  a.d_pos = br.pos;
  a.d_base = br.base;
  a.kv_type = num.kv;
  a.k_cache = b.k_cache[il].get();
  a.v_cache = b.v_cache[il].get();
  a.out = b.attn.as<float>();
  a.ldo = nh * hp.head_dim_v;
  a.round = num.round;
  a.n_ctx = b.n_ctx;
  a.workspace = br.attn_ws;
  a.split_tokens = br.attn_split_tokens;
  a.out_q8 = out_q8;
  cuda::attention_decode_batch(a, s);
}

}  // namespace ft::gpu
