// gemma4 on the GPU (shared/spec/arch/gemma4.md), block for block the CPU's
// model/gemma4_forward.cpp with the same rounding points:
//
//   x = embed(tok) * sqrt(n_embd)                         (fp32; + per-layer inputs if n_pl > 0)
//   per layer: h = norm(x); q,k,v = W h; v = norm(v or raw k); q,k = rope(norm(q,k));
//              KV -> this layer's cache (a ring of window + n_ubatch - 1 rows when sliding);
//              x += post_norm(W_o attention_window(q, KV of kv_src))
//              f = mlp(norm(x))                           (GeGLU, tanh GELU)
//              MoE: f = norm1(f) + norm2(experts(norm(x); router(norm(x)/sqrt(n) * scale)))
//              x += post_norm(f); x += PLE; x *= layer_output_scale
//   logits = softcap(W_out norm(x))
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cuda/attention_window.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/embed.h"
#include "cuda/geglu.h"
#include "cuda/norm.h"
#include "cuda/rope.h"
#include "cuda/row_ops.h"
#include "cuda/rows.h"
#include "cuda/sample.h"
#include "gpu/forward.h"
#include "gpu/state_gemma4.h"
#include "model/model.h"

namespace ft::gpu {

using cuda::Round;

void GpuForward::gemma4_attention(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const Gemma4Buffers& g = *b_.g4;
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim(il);
  const int64_t nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd, ld = q_dim + 2 * kv_dim;
  const int64_t src = hp.kv_src(il);
  const bool own_kv = src == il, swa = hp.window(il) > 0;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* qkv = b_.qkv.as<float>();
  float* attn = b_.attn.as<float>();
  const int32_t* pos = b_.pos.as<int32_t>();

  const bool fuse_q8 = n_tok <= cuda::kGemvMaxTokens && wants_q8(L.qkv) && n_embd % 32 == 0;
  if (fuse_q8)
    cuda::rmsnorm_q8(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  else
    cuda::rmsnorm(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
  // q | k | v rows ld apart even when attn_v is absent (V = K) or the layer shares KV (q only).
  linear(L.qkv, h, n_embd, n_tok, qkv, ld, num_.round, false, num_.q8, s, false, fuse_q8);
  float* k = qkv + q_dim;
  float* v = k + kv_dim;
  // The value norm (no weight) reads the raw K when V = K, so it runs before K's norm.
  if (own_kv) cuda::head_rmsnorm(L.v_from_k ? k : v, ld, v, ld, n_tok, nkv, hd, hp.rms_eps, num_.round, s);
  const float* cs = swa ? g.rope_cs_swa.as<float>() : b_.rope_cs.as<float>();
  const int n_rot = swa ? hp.rope_swa.n_rot : hp.rope.n_rot;
  cuda::qk_norm_rope(qkv, ld, n_tok, nh, own_kv ? nkv : 0, hd, L.q_norm, L.k_norm, hp.rms_eps, cs, n_rot,
                     /*neox=*/true, pos, num_.round, s);
  if (own_kv)
    cuda::kv_store_ring(num_.kv, b_.k_cache[il].get(), b_.v_cache[il].get(), kv_dim, k, ld, v, ld, n_tok, pos,
                        b_.kv_cells[il], s);
  cuda::WindowAttnArgs a;
  a.n_head = nh;
  a.n_head_kv = nkv;
  a.head_dim = hd;
  a.scale = hp.attn_scale;
  a.q = qkv;
  a.ldq = ld;
  a.n_tok = n_tok;
  a.d_pos = pos;
  a.window = hp.window(il);
  a.n_cells = b_.kv_cells[src];
  a.kv_type = num_.kv;
  a.k_cache = b_.k_cache[src].get();
  a.v_cache = b_.v_cache[src].get();
  a.out = attn;
  a.ldo = q_dim;
  a.round = num_.round;
  a.ws = g.attn_ws.as<float>();
  cuda::attention_window(a, s);
  float* br = g.branch.as<float>();
  float* tmp = g.tmp.as<float>();
  linear(L.wo, attn, q_dim, n_tok, br, n_embd, num_.round, false, num_.q8, s);
  cuda::rmsnorm(br, n_embd, L.post_attn_norm, n_embd, hp.rms_eps, n_tok, tmp, n_embd, num_.round, s);
  cuda::add_rows(x, n_embd, tmp, n_embd, n_tok, n_embd, x, n_embd, s);
}

void GpuForward::gemma4_ffn(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const Gemma4Buffers& g = *b_.g4;
  const int64_t n_embd = hp.n_embd, n_ff = L.down.k;
  const float eps = hp.rms_eps;
  const bool gemv = n_tok <= cuda::kGemvMaxTokens;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* gu = b_.gu.as<float>();
  float* hh = b_.hh.as<float>();
  float* f = g.f.as<float>();
  float* tmp = g.tmp.as<float>();
  float* e = g.e.as<float>();
  // The dense MLP (in MoE layers the always-on shared expert).
  const bool q8_in = gemv && wants_q8(L.gate_up) && n_embd % 32 == 0;
  const bool q8_mid = gemv && wants_q8(L.down) && n_ff % 32 == 0;
  if (q8_in)
    cuda::rmsnorm_q8(x, n_embd, L.ffn_norm, n_embd, eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  else
    cuda::rmsnorm(x, n_embd, L.ffn_norm, n_embd, eps, n_tok, h, n_embd, num_.round, s);
  linear(L.gate_up, h, n_embd, n_tok, gu, 2 * n_ff, num_.round, false, num_.q8, s, false, q8_in);
  cuda::geglu_q8(gu, 2 * n_ff, n_ff, n_tok, hh, n_ff, num_.round, q8_mid ? b_.xq.get() : nullptr, s);
  linear(L.down, hh, n_ff, n_tok, f, n_embd, num_.round, false, num_.q8, s, false, q8_mid);
  if (L.moe) {
    cuda::rmsnorm(f, n_embd, L.post_ffw_norm_1, n_embd, eps, n_tok, tmp, n_embd, num_.round, s);
    // Router input: the unweighted norm of x, / sqrt(n_embd), times ffn_gate_inp.scale; its
    // logits stay fp32 (exact GEMM) as in every MoE layer.
    cuda::rmsnorm(x, n_embd, nullptr, n_embd, eps, n_tok, h, n_embd, num_.round, s);
    cuda::scale_rows(h, n_embd, n_embd, n_tok, 1.0f / std::sqrt(static_cast<float>(n_embd)), L.router_in_scale,
                     num_.round, s);
    route_experts(il, h, n_tok, /*xq_ready=*/false, /*one_launch=*/false, s);
    const DevExpertTensor& first = L.experts.gate_up ? L.experts.gate_up : L.experts.gate;
    const bool xq_in = gemv && num_.q8 && cuda::gemv_q8_supported(first.type) && n_embd % 32 == 0;
    if (xq_in)
      cuda::rmsnorm_q8(x, n_embd, L.pre_ffw_norm_2, n_embd, eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
    else
      cuda::rmsnorm(x, n_embd, L.pre_ffw_norm_2, n_embd, eps, n_tok, h, n_embd, num_.round, s);
    // The backends add into their output: it starts at zero.
    FT_CUDA_CHECK(cudaMemsetAsync(e, 0, static_cast<size_t>(n_tok * n_embd) * sizeof(float), s));
    run_experts(il, h, n_tok, xq_in, e, s);
    cuda::rmsnorm(e, n_embd, L.post_ffw_norm_2, n_embd, eps, n_tok, f, n_embd, num_.round, s);
    cuda::add_rows(tmp, n_embd, f, n_embd, n_tok, n_embd, f, n_embd, s);  // f = m + e
  }
  cuda::rmsnorm(f, n_embd, L.post_ffw_norm, n_embd, eps, n_tok, tmp, n_embd, num_.round, s);
  cuda::add_rows(x, n_embd, tmp, n_embd, n_tok, n_embd, x, n_embd, s);
}

void GpuForward::gemma4_layer_end(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const Gemma4Buffers& g = *b_.g4;
  const int64_t n_embd = hp.n_embd, n_pl = hp.n_embd_per_layer;
  float* x = b_.x.as<float>();
  if (n_pl > 0) {
    float* gate = g.pl_gate.as<float>();
    float* br = g.branch.as<float>();
    float* tmp = g.tmp.as<float>();
    linear(L.pl_inp_gate, x, n_embd, n_tok, gate, n_pl, num_.round, false, num_.q8, s);
    cuda::gelu_mul(gate, n_pl, g.per_layer.as<float>() + il * n_pl, hp.n_layer * n_pl, n_pl, n_tok, num_.round, s);
    if (n_tok <= cuda::kGemvMaxTokens || n_pl % 32 == 0) {
      linear(L.pl_proj, gate, n_pl, n_tok, br, n_embd, num_.round, false, num_.q8, s);
    } else {
      // The prefill GEMM takes k % 32 == 0 only (H200 run: "Gemm::run: k=16" on n_pl 16):
      // GEMVs of kGemvMaxTokens rows instead.
      for (int64_t t0 = 0; t0 < n_tok; t0 += cuda::kGemvMaxTokens) {
        const int64_t n = std::min<int64_t>(cuda::kGemvMaxTokens, n_tok - t0);
        linear(L.pl_proj, gate + t0 * n_pl, n_pl, n, br + t0 * n_embd, n_embd, num_.round, false, num_.q8, s);
      }
    }
    cuda::rmsnorm(br, n_embd, L.pl_post_norm, n_embd, hp.rms_eps, n_tok, tmp, n_embd, num_.round, s);
    cuda::add_rows(x, n_embd, tmp, n_embd, n_tok, n_embd, x, n_embd, s);
  }
  if (L.out_scale != 1.0f) cuda::scale_rows(x, n_embd, n_embd, n_tok, L.out_scale, nullptr, Round::kNone, s);
}

void GpuForward::gemma4_run(int64_t n_tok, Head head, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const Gemma4Buffers& g = *b_.g4;
  const int64_t n_embd = hp.n_embd;
  if (head != Head::kNone && head != Head::kLast && head != Head::kAll && head != Head::kArgmax &&
      head != Head::kSample)  // the batched runner's heads
    fail("gemma4: the batched GPU runner does not run this architecture yet");
  float* x = b_.x.as<float>();
  const int32_t* tokens = b_.tokens.as<int32_t>();
  const DevMatrix& te = w_.token_embd;
  // dequant * sqrt(n_embd) in one fp32 product: the CPU's embed (exact) then its scaling.
  cuda::embed(te.type, te.w, te.row_bytes, n_embd, te.rows, std::sqrt(static_cast<float>(n_embd)), tokens, n_tok, x,
              n_embd, b_.bad.as<int>(), s);
  if (const int64_t n_pl = hp.n_embd_per_layer; n_pl > 0) {
    // Per-layer inputs: round(((P (x) / sqrt(n_embd) -> norm per slice) + T * sqrt(n_pl)) / sqrt(2)).
    const int64_t W = n_pl * hp.n_layer;
    float* P = g.pl_tok.as<float>();
    float* PL = g.per_layer.as<float>();
    linear(w_.per_layer_model_proj, x, n_embd, n_tok, P, W, num_.round, false, num_.q8, s);
    cuda::scale_rows(P, W, W, n_tok, 1.0f / std::sqrt(static_cast<float>(n_embd)), nullptr, Round::kNone, s);
    cuda::rmsnorm(P, n_pl, w_.per_layer_proj_norm, n_pl, hp.rms_eps, n_tok * hp.n_layer, PL, n_pl, num_.round, s);
    const DevMatrix& pe = w_.per_layer_token_embd;
    cuda::embed(pe.type, pe.w, pe.row_bytes, W, pe.rows, std::sqrt(static_cast<float>(n_pl)), tokens, n_tok, P, W,
                b_.bad.as<int>(), s);
    cuda::add_scale_rows(PL, W, P, W, W, n_tok, 1.0f / std::sqrt(2.0f), num_.round, s);
  }
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    gemma4_attention(il, n_tok, s);
    gemma4_ffn(il, n_tok, s);
    gemma4_layer_end(il, n_tok, s);
  }
  if (head == Head::kNone) return;
  const int64_t first = head == Head::kAll ? 0 : n_tok - 1, rows = n_tok - first;
  float* h = b_.h.as<float>();
  cuda::rmsnorm(x + first * n_embd, n_embd, w_.output_norm, n_embd, hp.rms_eps, rows, h, n_embd, num_.round, s);
  float* logits = b_.logits.as<float>();
  linear(w_.output, h, n_embd, rows, logits, hp.n_vocab, Round::kNone, false, num_.q8, s);
  if (hp.final_logit_softcap > 0.0f) cuda::softcap(logits, hp.n_vocab, hp.n_vocab, rows, hp.final_logit_softcap, s);
  if (head == Head::kArgmax) cuda::argmax(logits, hp.n_vocab, hp.n_vocab, 1, b_.argmax.as<int32_t>(), s);
}

}  // namespace ft::gpu
