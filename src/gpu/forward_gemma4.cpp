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
#include "cuda/act_q8.h"
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
#include "quant/act_quant.h"

namespace ft::gpu {

using cuda::Round;

namespace {

// --dtype auto rounds a matmul's input where llama.cpp's CPU build (the parity oracle, and the
// CPU engine's auto) rounds it: to ggml-cpu's vec_dot_type of the weight. The GPU's kernels
// would keep it fp32, so these tiny gemma4 models left llama.cpp (CPU engine with fp32 inputs
// to its BF16 matmuls: parity teacher-forced 22/32 at margins up to 1.34 on moe-bf16-tied; with
// an fp32 router input alone 28/32 on moe-mxfp4, 29/32 on moe-nvfp4; 32/32 each when rounded).
//   BF16 / F16 weights: the input rounded to bf16 / f16, by the kernel that produces it;
//   Q8_0-dot weights (NVFP4, MXFP4, Q8_0, Q4_0): Q8_0 blocks -- the decode GEMV's xq, and in
//     prefill q8_prefill_input below;
//   F32 weights, mixed parts: unchanged.
// Set by GpuNumerics::half_inputs / q8_prefill (gpu/session.cpp); the other dtypes keep
// their own rounding (num.round).
Round in_round(const GpuNumerics& num, GgmlType t) {
  if (!num.half_inputs) return num.round;
  if (t == GgmlType::BF16) return Round::kBF16;
  if (t == GgmlType::F16) return Round::kF16;
  return Round::kNone;
}

Round in_round(const GpuNumerics& num, const DevLinear& l) {
  const Round r = in_round(num, l.parts.at(0).type);
  for (const DevMatrix& p : l.parts)
    if (in_round(num, p.type) != r) return num.round;
  return r;
}

// --dtype auto, prefill (more than kGemvMaxTokens tokens) through Q8_0-dot weights: the GEMM's
// bf16 operands would round x where llama.cpp's CPU build makes Q8_0 blocks, so x becomes its
// Q8 values in place (cuda/act_q8.h) and the GEMM runs on them at num.exact_prec (kBF16x3:
// fp32-exact products on tensor cores for NVFP4 / MXFP4 / BF16 weights, kF32 for the others;
// FT_GEMMA4_Q8_PREFILL=f32 for kF32 throughout, gpu/session.cpp); returns true (pass it
// as linear's `exact`; the experts' prefill does the same, gpu/moe_fused.cpp). Measured on the
// CPU engine with bf16-rounded inputs to these prefill matmuls instead: parity moe-nvfp4 prompt
// max|dlogit| 0.51, teacher-forced misses at margins 0.53 / 0.56; gemma4_session_test's
// moe_nvfp4 prompt 2.1 from the experts' alone (0 and 32/32 with Q8).
bool q8_prefill(const GpuNumerics& num, const DevLinear& l, int64_t n_tok) {
  if (!num.q8_prefill || n_tok <= cuda::kGemvMaxTokens || l.k % 32 != 0) return false;
  for (const DevMatrix& p : l.parts)
    if (!cuda::gemv_q8_supported(p.type) || quant::act_dot_type(p.type) != GgmlType::Q8_0) return false;
  return true;
}

bool q8_prefill_input(const GpuNumerics& num, const DevLinear& l, float* x, int64_t ldx, int64_t n_tok,
                      cudaStream_t s) {
  if (!q8_prefill(num, l, n_tok)) return false;
  cuda::round_trip_act_q8(x, ldx, l.k, n_tok, x, ldx, s);
  return true;
}

// The same for an input read from the residual stream x, which must stay fp32: the rounded
// input goes to `copy` (n_tok rows of l.k) when auto rounds it. Returns the input to use;
// *exact: pass as linear's `exact`.
const float* residual_input(const GpuNumerics& num, const DevLinear& l, const float* x, int64_t ldx, int64_t n_tok,
                            float* copy, bool* exact, cudaStream_t s) {
  *exact = false;
  const Round r = num.half_inputs ? in_round(num, l) : Round::kNone;
  if (r != Round::kNone) {
    cuda::copy_rows(x, ldx, n_tok, l.k, copy, l.k, r, s);
    return copy;
  }
  if (!q8_prefill(num, l, n_tok)) return x;
  cuda::round_trip_act_q8(x, ldx, l.k, n_tok, copy, l.k, s);
  *exact = true;
  return copy;
}

}  // namespace

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
    cuda::rmsnorm(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, in_round(num_, L.qkv), s);
  // q | k | v rows ld apart even when attn_v is absent (V = K) or the layer shares KV (q only).
  const bool qkv_q8 = q8_prefill_input(num_, L.qkv, h, n_embd, n_tok, s);
  linear(L.qkv, h, n_embd, n_tok, qkv, ld, num_.round, false, num_.q8, s, qkv_q8, fuse_q8);
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
  a.round = in_round(num_, L.wo);
  a.ws = g.attn_ws.as<float>();
  cuda::attention_window(a, s);
  float* br = g.branch.as<float>();
  float* tmp = g.tmp.as<float>();
  const bool wo_q8 = q8_prefill_input(num_, L.wo, attn, q_dim, n_tok, s);
  linear(L.wo, attn, q_dim, n_tok, br, n_embd, num_.round, false, num_.q8, s, wo_q8);
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
    cuda::rmsnorm(x, n_embd, L.ffn_norm, n_embd, eps, n_tok, h, n_embd, in_round(num_, L.gate_up), s);
  const bool gu_q8 = q8_prefill_input(num_, L.gate_up, h, n_embd, n_tok, s);
  linear(L.gate_up, h, n_embd, n_tok, gu, 2 * n_ff, num_.round, false, num_.q8, s, gu_q8, q8_in);
  cuda::geglu_q8(gu, 2 * n_ff, n_ff, n_tok, hh, n_ff, in_round(num_, L.down), q8_mid ? b_.xq.get() : nullptr, s);
  const bool down_q8 = q8_prefill_input(num_, L.down, hh, n_ff, n_tok, s);
  linear(L.down, hh, n_ff, n_tok, f, n_embd, num_.round, false, num_.q8, s, down_q8, q8_mid);
  if (L.moe) {
    cuda::rmsnorm(f, n_embd, L.post_ffw_norm_1, n_embd, eps, n_tok, tmp, n_embd, num_.round, s);
    // Router input: the unweighted norm of x, / sqrt(n_embd), times ffn_gate_inp.scale; its
    // logits stay fp32 (exact GEMM) as in every MoE layer.
    cuda::rmsnorm(x, n_embd, nullptr, n_embd, eps, n_tok, h, n_embd, num_.round, s);
    cuda::scale_rows(h, n_embd, n_embd, n_tok, 1.0f / std::sqrt(static_cast<float>(n_embd)), L.router_in_scale,
                     in_round(num_, L.router), s);
    route_experts(il, h, n_tok, /*xq_ready=*/false, /*one_launch=*/false, s);
    const DevExpertTensor& first = L.experts.gate_up ? L.experts.gate_up : L.experts.gate;
    const bool xq_in = gemv && num_.q8 && cuda::gemv_q8_supported(first.type) && n_embd % 32 == 0;
    if (xq_in)
      cuda::rmsnorm_q8(x, n_embd, L.pre_ffw_norm_2, n_embd, eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
    else
      cuda::rmsnorm(x, n_embd, L.pre_ffw_norm_2, n_embd, eps, n_tok, h, n_embd, in_round(num_, first.type), s);
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
    bool gate_q8 = false;
    const float* xin = residual_input(num_, L.pl_inp_gate, x, n_embd, n_tok, tmp, &gate_q8, s);
    linear(L.pl_inp_gate, xin, n_embd, n_tok, gate, n_pl, num_.round, false, num_.q8, s, gate_q8);
    cuda::gelu_mul(gate, n_pl, g.per_layer.as<float>() + il * n_pl, hp.n_layer * n_pl, n_pl, n_tok,
                   in_round(num_, L.pl_proj), s);
    if (n_tok <= cuda::kGemvMaxTokens || n_pl % 32 == 0) {
      const bool proj_q8 = q8_prefill_input(num_, L.pl_proj, gate, n_pl, n_tok, s);
      linear(L.pl_proj, gate, n_pl, n_tok, br, n_embd, num_.round, false, num_.q8, s, proj_q8);
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
    bool p_q8 = false;
    const float* xin = residual_input(num_, w_.per_layer_model_proj, x, n_embd, n_tok, g.tmp.as<float>(), &p_q8, s);
    linear(w_.per_layer_model_proj, xin, n_embd, n_tok, P, W, num_.round, false, num_.q8, s, p_q8);
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
  cuda::rmsnorm(x + first * n_embd, n_embd, w_.output_norm, n_embd, hp.rms_eps, rows, h, n_embd,
                in_round(num_, w_.output), s);
  float* logits = b_.logits.as<float>();
  const bool out_q8 = q8_prefill_input(num_, w_.output, h, n_embd, rows, s);
  linear(w_.output, h, n_embd, rows, logits, hp.n_vocab, Round::kNone, false, num_.q8, s, out_q8);
  if (hp.final_logit_softcap > 0.0f) cuda::softcap(logits, hp.n_vocab, hp.n_vocab, rows, hp.final_logit_softcap, s);
  if (head == Head::kArgmax) cuda::argmax(logits, hp.n_vocab, hp.n_vocab, 1, b_.argmax.as<int32_t>(), s, b_.argmax_ws.get());
}

}  // namespace ft::gpu
