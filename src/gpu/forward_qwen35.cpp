// The qwen35 / qwen35moe layer on the GPU (shared/spec/arch/qwen35.md §3, qwen35moe.md §3):
// the CUDA twin of model/qwen35_blocks.cpp, block for block with the same rounding points.
//
//   Gated DeltaNet layer: h = rmsnorm(x); [mixed|z|beta|alpha] = W_in h;
//       y = silu(conv1d(mixed)) (rolling state); o = deltanet(y, beta, alpha) (recurrent state,
//       the chunked form for prompts, the recurrence for decode; FT_GDN_CHUNKED=0: always the
//       recurrence, =2: the cluster chunked kernel, =3: the small one);
//       o = rmsnorm(o; ssm_norm) * silu(z);  x += W_out o
//   gated attention layer: [q_h g_h ...|k|v] = W_qkv rmsnorm(x); q,k = rope(norm(q,k)); kv <- k,v;
//       x += W_o (attention(q, kv) * sigmoid(g))
//   FFN: dense SwiGLU (GpuForward::ffn_block), or routed experts through the MoeBackend plus
//       the shared expert times sigmoid(<gate_inp_shexp, h>), summed into one branch first
//       as on the CPU: x += (sh * gate + routed).
//
// The conv window and delta-rule state live in GpuBuffers::q35; the kernels read them as zero
// when the pass starts at position 0 (*b.pos, on the device), so captured graphs reset too.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "cuda/attention.h"
#include "cuda/conv1d.h"
#include "cuda/deltanet.h"
#include "cuda/gates.h"
#include "cuda/gemv.h"
#include "cuda/glu.h"
#include "cuda/norm.h"
#include "cuda/rope.h"
#include "cuda/rows.h"
#include "gpu/forward.h"
#include "gpu/state_qwen35.h"
#include "model/model.h"

namespace ft::gpu {

using cuda::Round;

void GpuForward::qwen35_layer(int64_t il, int64_t n_tok, cudaStream_t s) const {
  if (b_.q35 == nullptr) fail("qwen35 forward without its Gated DeltaNet buffers");
  if (m_.hp.is_recurrent(il))
    gdn_block(il, n_tok, s);
  else
    gated_attention_block(il, n_tok, s);
  const DevLayer& L = w_.layers[il];
  if (L.moe && !L.gate_up_shexp.empty())
    moe_shared_ffn_block(il, n_tok, s);
  else
    ffn_block(il, n_tok, s);
}

void GpuForward::gated_attention_block(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  Qwen35Buffers& q = *b_.q35;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, raw_ld = L.qkv.rows, ld = q_dim + 2 * kv_dim;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* raw = q.raw.as<float>();
  float* qkv = b_.qkv.as<float>();
  float* gate = q.gate.as<float>();
  float* attn = b_.attn.as<float>();

  const bool fuse_q8 = n_tok <= cuda::kGemvMaxTokens && wants_q8(L.qkv) && n_embd % 32 == 0;
  if (fuse_q8)
    cuda::rmsnorm_q8(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  else
    cuda::rmsnorm(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
  linear(L.qkv, h, n_embd, n_tok, raw, raw_ld, num_.round, false, num_.q8, s, false, fuse_q8);
  // [q_0 g_0 q_1 g_1 ... | k | v] -> [q_0 q_1 ... | k | v] and the gates.
  cuda::split_q_gate(raw, raw_ld, n_tok, nh, hd, 2 * kv_dim, qkv, ld, gate, q_dim, s);
  rope_store_attention(il, qkv, ld, n_tok, attn, q_dim, s);
  cuda::gate_mul(attn, q_dim, gate, q_dim, n_tok, q_dim, cuda::GateAct::kSigmoid, num_.round, s);
  linear(L.wo, attn, q_dim, n_tok, x, n_embd, num_.round, /*accumulate=*/true, num_.q8, s);
}

void GpuForward::gdn_block(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  Qwen35Buffers& q = *b_.q35;
  const engine::DeltaNetShape& g = m_.gdn_shape;
  const int64_t n_embd = hp.n_embd, in_dim = g.in_dim(), conv_dim = g.conv_dim(), value_dim = g.value_dim();
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* in = q.in.as<float>();
  float* y = q.y.as<float>();
  float* out = q.out.as<float>();
  const int32_t* pos = b_.pos.as<int32_t>();

  const bool fuse_q8 = n_tok <= cuda::kGemvMaxTokens && wants_q8(L.gdn_in) && n_embd % 32 == 0;
  if (fuse_q8)
    cuda::rmsnorm_q8(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  else
    cuda::rmsnorm(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
  linear(L.gdn_in, h, n_embd, n_tok, in, in_dim, num_.round, false, num_.q8, s, false, fuse_q8);
  cuda::conv1d_causal_silu(in, in_dim, n_tok, conv_dim, L.gdn_conv1d, g.d_conv, q.conv[il].as<float>(), y, conv_dim,
                           pos, s);
  cuda::DeltaNetArgs a;
  a.n_k_heads = g.n_k_heads;
  a.n_v_heads = g.n_v_heads;
  a.d = g.d_head;
  a.eps = g.eps;
  a.y = y;
  a.ldy = conv_dim;
  a.beta = in + conv_dim + value_dim;
  a.alpha = a.beta + g.n_v_heads;
  a.ldg = in_dim;
  a.dt_bias = L.gdn_dt_bias;
  a.a = L.gdn_a;
  a.state = q.ssm[il].as<float>();
  a.out = out;
  a.ldo = value_dim;
  a.n_tok = n_tok;
  a.d_pos = pos;
  // Prompts of >= one chunk (64 tokens) run the chunked form, decode steps the recurrence
  // (its twin: the kernel tests diff the two on 1,100 tokens). FT_GDN_CHUNKED=0 sends prompts
  // through the recurrence too, =1 (default) picks the plain kernel where its shared memory
  // fits (223 KiB at d 128: sm_90) and the small one elsewhere (89 KiB: RTX 30/40/50, A100),
  // =2 / =3 force the cluster / small kernel (A/B runs). H200 figures: benches/h200.md, session 6.
  static const int chunked = [] {
    const char* e = std::getenv("FT_GDN_CHUNKED");
    return e && *e ? std::atoi(e) : 1;
  }();
  const auto kind = chunked == 2   ? cuda::DeltaNetChunkedKind::kCluster
                    : chunked == 3 ? cuda::DeltaNetChunkedKind::kSmall
                                   : cuda::deltanet_chunked_default(a.d);
  const bool prompt = n_tok >= cuda::kDeltaNetChunk;
  const bool use_chunked = chunked != 0 && prompt && cuda::deltanet_chunked_supported(a, kind);
  static std::atomic<bool> logged{false};  // the choice, once per process (the first prompt)
  if (prompt && !logged.exchange(true)) {
    const char* name = kind == cuda::DeltaNetChunkedKind::kCluster ? "cluster"
                       : kind == cuda::DeltaNetChunkedKind::kSmall ? "small"
                                                                    : "plain";
    if (use_chunked)
      log::info("qwen35: Gated DeltaNet prompts through the {} chunked kernel ({} bytes of shared memory per block)",
                name, cuda::deltanet_chunked_smem_bytes(a.d, kind));
    else
      log::info("qwen35: Gated DeltaNet prompts through the recurrence ({})",
                chunked == 0 ? "FT_GDN_CHUNKED=0" : "the chunked kernel does not fit this device");
  }
  if (use_chunked)
    cuda::deltanet_chunked(a, q.gb.as<float>(), s, kind);
  else
    cuda::deltanet_recurrent(a, q.gb.as<float>(), s);
  // Gated RMSNorm: every (token, head) is a d-wide row of out.
  cuda::rmsnorm(out, g.d_head, L.gdn_norm, g.d_head, g.eps, n_tok * g.n_v_heads, out, g.d_head, Round::kNone, s);
  cuda::gate_mul(out, value_dim, in + conv_dim, in_dim, n_tok, value_dim, cuda::GateAct::kSilu, num_.round, s);
  linear(L.gdn_out, out, value_dim, n_tok, x, n_embd, num_.round, /*accumulate=*/true, num_.q8, s);
}

void GpuForward::moe_shared_ffn_block(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  Qwen35Buffers& q = *b_.q35;
  const int64_t n_embd = hp.n_embd, n_sh = L.down_shexp.k;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* branch = q.branch.as<float>();
  cuda::rmsnorm(x, n_embd, L.ffn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);

  // Shared expert first (its GEMVs reuse b.xq), scaled by its gate into the branch; the
  // routed experts are then added to the branch (their backend quantises h again).
  linear(L.gate_up_shexp, h, n_embd, n_tok, q.sh_gu.as<float>(), 2 * n_sh, num_.round, false, num_.q8, s);
  cuda::swiglu(q.sh_gu.as<float>(), 2 * n_sh, n_sh, n_tok, q.sh_h.as<float>(), n_sh, num_.round, s);
  linear(L.down_shexp, q.sh_h.as<float>(), n_sh, n_tok, branch, n_embd, num_.round, false, num_.q8, s);
  // The gate logit stays fp32 in every dtype (as the router).
  linear(L.gate_inp_shexp, h, n_embd, n_tok, q.sh_logit.as<float>(), 1, Round::kNone, false, num_.q8, s,
         /*exact=*/true);
  cuda::scale_by_sigmoid(branch, n_embd, q.sh_logit.as<float>(), n_tok, n_embd, branch, n_embd, num_.round, s);

  routed_experts(il, h, n_tok, /*xq_ready=*/false, branch, s);
  cuda::add_rows(x, n_embd, branch, n_embd, n_tok, n_embd, x, n_embd, s);
}

}  // namespace ft::gpu
