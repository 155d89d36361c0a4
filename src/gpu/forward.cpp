#include "gpu/forward.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "cuda/attention.h"
#include "cuda/embed.h"
#include "cuda/gemm.h"
#include "cuda/act_q8.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/gemv_half.h"
#include "cuda/glu.h"
#include "cuda/moe_combine.h"
#include "cuda/norm.h"
#include "cuda/norm_fold.h"
#include "cuda/pdl_spacer.h"
#include "cuda/rope.h"
#include "cuda/rows.h"
#include "gpu/batch_forward.h"
#include "gpu/debug_skip.h"
#include "cuda/sample.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

using cuda::Round;

// The fields GEMV and GEMM arguments share, for part p of a projection.
template <class A>
void fill_common(A& a, const DevMatrix& p, const DevLinear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
                 int64_t ldy, Round round, bool accumulate) {
  a.type = p.type;
  a.w = p.w;
  a.row_bytes = p.row_bytes;
  a.k = l.k;
  a.rows = p.rows;
  a.x = x;
  a.ldx = ldx;
  a.n_tok = n_tok;
  a.y = y + p.row0;
  a.ldy = ldy;
  a.row_scale = l.row_scale ? l.row_scale + p.row0 : nullptr;
  a.scale = p.scale;
  a.round = round;
  a.accumulate = accumulate;
  a.tiled = p.tiled;
  a.lanes = p.lanes;
  if constexpr (std::is_same_v<A, cuda::GemvArgs>) a.scales_clean = p.scales_clean;
}

// Decode sizes run the GEMV family; larger batches the tensor-core GEMM.
bool use_gemv(int64_t n_tok) { return n_tok <= cuda::kGemvMaxTokens; }

// FT_ATTN_ROPE=0: the q/k norm, rope and KV store in their own launch before the attention.
const bool g_attn_rope = [] {
  const char* e = std::getenv("FT_ATTN_ROPE");
  return e == nullptr || *e != '0';
}();

// FT_GLU_FUSED=0: a dense layer's SwiGLU as its own launch after gate|up (the A/B of the
// epilogue SwiGLU, cuda::GemvArgs::glu_xq).
const bool g_glu_fused = [] {
  const char* e = std::getenv("FT_GLU_FUSED");
  return e == nullptr || *e != '0';
}();

// FT_NORM_FOLD: which decode norms the GEMVs around them make (cuda/norm_fold.h): bit 0 the FFN
// norm (wo -> gate|up), bit 1 the attention norm (the previous layer's down -> qkv); 0 none. Default 2:
// H200 session 33 call 4, Llama-8B tg128 alternating, 4 rounds: 0 518.45 / 517.77 / 517.89 / 517.97,
// 2 520.32 / 521.81 / 520.39 / 522.35 (+0.6%), 3 519.23 / 519.03 / 519.10 / 518.54 tok/s -- the FFN
// norm's fold (the lean wo kernel's tail, the gate|up launch's 1,792 CTAs each summing the partials)
// costs more than the launch it saves. Also measured and removed: the FFN norm made by one CTA more of
// the wo launch, polling the GEMV CTAs' release counts (session 40's 9432133; H200 session 41 call 1,
// 5 rounds: 479.67 against 512.06 tok/s, -6.3%, the same bits); and made by wo's last CTA through a ticket,
// no polling (session 47, branch wip/norm-ticket; H100, 10-12 rounds: -11.9% to -13.6%, the same bits). What
// loses is the norm body in one 128-thread CTA: without it the ticket launch costs 1.4-1.7%, with it ~9 us a
// layer (ncu: wo 22.2 against 11.0 us alone), whatever the fences, trigger or weight staging -- one CTA's serial
// ~1,270 instructions a warp. Eagerly loaded (H100 session 46 call 2, 10
// rounds): 2 462.25 (sd 3.48), 0 454.24 (sd 3.41), 3 455.27 (sd 1.62) -- the default +1.8% / +1.5%.
std::atomic<int> g_norm_fold{[] {
  const char* e = std::getenv("FT_NORM_FOLD");
  return e == nullptr ? 2 : std::atoi(e);
}()};

using debug::skip;
using debug::spacer;
using namespace debug;  // the SkipLink names

// FT_ATTN_KEY_BOUND=0 (a diagnostic knob, for A/B runs): no bound on the live keys of a graph
// (cuda::AttnArgs::max_keys), so its decode attention launches every chunk n_ctx allows.
bool key_bound_on() {
  static const bool on = [] {
    const char* e = std::getenv("FT_ATTN_KEY_BOUND");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

}  // namespace

bool GpuForward::plan_decode_attention(int64_t n_past, int64_t n_tok, int64_t mma_min_keys) {
  // One token with at least mma_min_keys live keys: the tensor-core decode attention.
  const bool deep = n_tok == 1 && mma_min_keys > 0 && n_past + 1 >= mma_min_keys && decode_mma_applies_;
  set_long_context(deep);
  // A one-token step below that depth sees at most mma_min_keys - 1 keys: its graph's attention
  // launches only the chunks those can fill (cuda::AttnArgs::max_keys).
  set_key_bound(key_bound_on() && n_tok == 1 && mma_min_keys > 0 && decode_mma_applies_ && !deep ? mma_min_keys - 1
                                                                                                  : 0);
  return deep;
}

void* GpuForward::kv_slot(int64_t il, bool k) const {
  const cuda::DeviceBuffer& c = k ? b_.k_cache[il] : b_.v_cache[il];
  if (solo_row0_ <= 0) return c.get();
  const model::HParams& hp = m_.hp;
  const int64_t row =
      hp.n_head_kv[il] * (k ? hp.head_dim_k : hp.head_dim_v) * static_cast<int64_t>(kv_elem_bytes(num_.kv));
  if ((solo_row0_ + b_.n_ctx) * row > static_cast<int64_t>(c.bytes()))
    fail("cuda forward: KV slot at row {} + {} rows of {} bytes is past layer {}'s cache ({} bytes)", solo_row0_,
         b_.n_ctx, row, il, c.bytes());
  return static_cast<char*>(c.get()) + solo_row0_ * row;
}

// A dense decode layer's wo launch (its CTAs, each a share, before their PDL wait, i.e. under the
// attention kernel) streams the head of the tiled gate|up weights into L2 -- half from the start of the
// gate rows, half from the start of the up rows, the tiles the SwiGLU tail's block order (gemv_mma.cu GO)
// reads first -- while the HBM idles under the attention, wo and the FFN norm: cuda::kFfnL2AheadBytes
// (gemv_tuning.h: +1.2% Llama-8B on an H100); FT_FFN_L2_AHEAD=MB overrides, 0 off (cuda/l2_ahead.h says
// why not from the norm's one CTA).
const int64_t g_ffn_l2_ahead = [] {
  const char* e = std::getenv("FT_FFN_L2_AHEAD");
  return e != nullptr ? std::max<int64_t>(0, std::atoll(e)) << 20 : cuda::kFfnL2AheadBytes;
}();

void set_norm_fold(int mode) { g_norm_fold.store(mode, std::memory_order_relaxed); }
int norm_fold_mode() { return g_norm_fold.load(std::memory_order_relaxed); }

GpuForward::GpuForward(const model::Model& m, const DeviceWeights& w, GpuBuffers& b,
                       const GpuNumerics& num, MoeBackend* moe)
    : m_(m), w_(w), b_(b), num_(num), moe_(moe) {
  if (moe_ == nullptr) {
    own_moe_ = make_moe_fused(w_);
    moe_ = own_moe_.get();
  }
  decode_mma_applies_ = find_decode_mma();
}

void GpuForward::linear(const DevLinear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
                        int64_t ldy, Round round, bool accumulate, bool q8, cudaStream_t s,
                        bool exact, bool xq_ready, bool y_early, const cuda::L2Ahead& ahead) const {
  if (use_gemv(n_tok)) {
    bool quantised = false;
    for (const DevMatrix& p : l.parts) quantised |= q8 && cuda::gemv_q8_supported(p.type);
    if (quantised && !xq_ready) cuda::quantize_act_q8(x, ldx, l.k, n_tok, b_.xq.get(), s);
    for (const DevMatrix& p : l.parts) {
      cuda::GemvArgs a;
      fill_common(a, p, l, x, ldx, n_tok, y, ldy, round, accumulate);
      a.xq = q8 && cuda::gemv_q8_supported(p.type) ? b_.xq.get() : nullptr;
      a.y_early = y_early;
      a.l2_ahead = ahead;
      if (a.xq == nullptr && cuda::gemv_half_supported(a))
        cuda::gemv_half(a, s);  // BF16/F16 (the output head): the register-direct kernel
      else
        cuda::gemv(a, s);
    }
    return;
  }
  for (const DevMatrix& p : l.parts) {
    cuda::GemmArgs a;
    fill_common(a, p, l, x, ldx, n_tok, y, ldy, round, accumulate);
    a.prec = exact ? cuda::gemm_split_prec(p.type, num_.exact_prec) : num_.prec;
    b_.gemm->run(a, s);
  }
}

cuda::L2Ahead GpuForward::ffn_l2_ahead(const DevLayer& L, int64_t n_tok) const {
  cuda::L2Ahead a;
  if (g_ffn_l2_ahead <= 0 || n_tok != 1 || L.gate_up.parts.size() != 1 || !L.gate_up.parts[0].tiled) return a;
  const DevMatrix& m = L.gate_up.parts[0];
  const int64_t half = m.rows / 2 * m.row_bytes;  // the gate rows' bytes, then the up rows'
  const int64_t each = std::min(g_ffn_l2_ahead / 2, half);
  a.p[0] = m.w;
  a.p[1] = m.w + half;
  a.bytes[0] = a.bytes[1] = each;
  return a;
}

bool GpuForward::wants_q8(const DevLinear& l) const {
  if (!num_.q8) return false;
  for (const DevMatrix& p : l.parts)
    if (cuda::gemv_q8_supported(p.type)) return true;
  return false;
}

void GpuForward::attention_block(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const int64_t n_embd = hp.n_embd, nh = hp.n_head[il], ld = L.qkv.rows;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  float* qkv = b_.qkv.as<float>();
  float* attn = b_.attn.as<float>();

  // Decode: the norm also writes the Q8 copy the qkv GEMV reads (one launch fewer).
  const bool fuse_q8 = use_gemv(n_tok) && wants_q8(L.qkv) && n_embd % 32 == 0;
  // The norm fold: the previous layer's down projection made this norm (b_.xq_n, b_.nq_part).
  const bool folded = nq_attn_ready_;
  nq_attn_ready_ = false;
  if (spacer(kSkipNorm1, n_tok)) cuda::pdl_spacer(s);
  if (folded) {
    cuda::GemvArgs a;
    fill_common(a, L.qkv.parts[0], L.qkv, h, n_embd, n_tok, qkv, ld, num_.round, false);
    fold_consume(a);
    a.after_gemv = true;  // no norm launch after the down projection
    if (spacer(kSkipQkv, n_tok)) cuda::pdl_spacer(s);
    if (!skip(kSkipQkv, n_tok)) cuda::gemv(a, s);
  } else if (skip(kSkipNorm1, n_tok)) {
  } else if (fuse_q8) {
    cuda::rmsnorm_q8(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  } else {
    cuda::rmsnorm(x, n_embd, L.attn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
  }
  if (!folded) {
    if (spacer(kSkipQkv, n_tok)) cuda::pdl_spacer(s);
    if (!skip(kSkipQkv, n_tok)) linear(L.qkv, h, n_embd, n_tok, qkv, ld, num_.round, false, num_.q8, s, false, fuse_q8);
  }
  // Decode: the attention kernel also writes the Q8 copy the wo GEMV reads (one launch fewer).
  const bool q8_wo = use_gemv(n_tok) && wants_q8(L.wo);
  if (batched()) {  // several sequences, each token against its own KV slot
    const bool q8 = q8_wo && hp.head_dim_v % 32 == 0;
    batch_attention(m_, L, il, b_, num_, n_tok, s, q8 ? b_.xq.get() : nullptr);
    // x (the residual) was last written by the previous layer's FFN: y_early (cuda/gemv.h).
    linear(L.wo, attn, nh * hp.head_dim_v, n_tok, x, n_embd, num_.round, /*accumulate=*/true, num_.q8, s, false, q8,
           /*y_early=*/true);
    return;
  }
  if (spacer(kSkipAttn, n_tok)) cuda::pdl_spacer(s);
  if (!skip(kSkipAttn, n_tok))
    rope_store_attention(il, qkv, ld, n_tok, attn, nh * hp.head_dim_v, s, q8_wo ? b_.xq.get() : nullptr,
                         /*fuse_rope=*/true);
  // x (the residual) was last written by the previous layer's FFN: y_early (cuda/gemv.h).
  if (spacer(kSkipWo, n_tok)) cuda::pdl_spacer(s);
  if (skip(kSkipWo, n_tok)) return;
  if (q8_wo && fold_wanted(il, /*attn=*/false, n_tok)) {  // wo also makes the FFN norm (norm_fold.h)
    cuda::GemvArgs a;
    fill_common(a, L.wo.parts[0], L.wo, attn, nh * hp.head_dim_v, n_tok, x, n_embd, num_.round, /*accumulate=*/true);
    a.xq = b_.xq.get();
    a.y_early = true;
    fold_produce(a, L.ffn_norm);
    cuda::gemv(a, s);
    nq_ffn_ready_ = true;
    return;
  }
  // wo's CTAs stream the head of gate|up into L2 (ffn_l2_ahead; empty when off).
  linear(L.wo, attn, nh * hp.head_dim_v, n_tok, x, n_embd, num_.round, /*accumulate=*/true, num_.q8, s, false, q8_wo,
         /*y_early=*/true, q8_wo ? ffn_l2_ahead(L, n_tok) : cuda::L2Ahead{});
}

void GpuForward::fold_produce(cuda::GemvArgs& a, const float* norm_w) const {
  a.nq_w = norm_w;
  a.nq_xq = b_.xq_n.get();
  a.nq_part = b_.nq_part.as<double>();
  a.nq_count = b_.nq_count.as<unsigned>();
}

void GpuForward::fold_consume(cuda::GemvArgs& a) const {
  a.xq = b_.xq_n.get();
  a.norm_part = b_.nq_part.as<double>();
  a.norm_eps = m_.hp.rms_eps;
}

bool GpuForward::fold_wanted(int64_t il, bool attn, int64_t n_tok) const {
  const model::HParams& hp = m_.hp;
  if (!(g_norm_fold.load(std::memory_order_relaxed) & (attn ? 2 : 1)) || n_tok != 1 || batched() || !num_.q8 ||
      num_.round != cuda::Round::kNone || b_.nq_count.get() == nullptr || il < 0 || il >= hp.n_layer ||
      !hp.recurrent.empty() || b_.g4)
    return false;
  // Only where the kernels do both halves in their launches (a tiled NVFP4 consumer; a tiled down
  // projection, an NVFP4 wo): elsewhere the fold's stand-alone launches would replace one launch by two.
  const DevLayer& L = w_.layers[il];
  if (attn) {  // the consumer: qkv; the producer: the previous layer's dense down projection
    if (il == 0 || w_.layers[il - 1].moe || L.qkv.parts.size() != 1 || !wants_q8(L.qkv) || !L.qkv.parts[0].tiled ||
        w_.layers[il - 1].down.parts.size() != 1 || !w_.layers[il - 1].down.parts[0].tiled)
      return false;
    for (SkipLink k : {kSkipNorm1, kSkipQkv, kSkipDown})
      if (skip(k, n_tok) || spacer(k, n_tok)) return false;
    return true;
  }
  if (L.moe || L.wo.parts.size() != 1 || L.gate_up.parts.size() != 1 || !wants_q8(L.gate_up) ||
      !L.gate_up.parts[0].tiled || !wants_q8(L.wo) || L.wo.parts[0].type != GgmlType::NVFP4)
    return false;
  for (SkipLink k : {kSkipNorm2, kSkipWo, kSkipGateUp})
    if (skip(k, n_tok) || spacer(k, n_tok)) return false;
  return true;
}

bool GpuForward::find_decode_mma() const {
  if (b_.g4) return false;  // gemma4's own pass never reads long_ctx_
  const model::HParams& hp = m_.hp;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (hp.is_recurrent(il)) continue;
    cuda::AttnArgs a;
    a.n_head = hp.n_head[il];
    a.n_head_kv = hp.n_head_kv[il];
    a.head_dim_k = hp.head_dim_k;
    a.head_dim_v = hp.head_dim_v;
    a.n_tok = 1;
    a.kv_type = num_.kv;
    if (cuda::attention_mma_decode_supported(a)) return true;
  }
  return false;
}

void GpuForward::rope_store_attention(int64_t il, float* qkv, int64_t ld, int64_t n_tok, float* out, int64_t ldo,
                                      cudaStream_t s, void* out_q8, bool fuse_rope) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const int64_t hd = hp.head_dim_k, nh = hp.n_head[il], nkv = hp.n_head_kv[il];
  const int64_t q_dim = nh * hd, kv_dim = nkv * hd;
  const int32_t* pos = b_.pos.as<int32_t>();
  cuda::AttnArgs a;
  a.n_head = nh;
  a.n_head_kv = nkv;
  a.head_dim_k = hd;
  a.head_dim_v = hp.head_dim_v;
  a.scale = hp.attn_scale;
  a.q = qkv;
  a.ldq = ld;
  a.n_tok = n_tok;
  a.d_pos = pos;
  a.n_ctx = b_.n_ctx;
  a.max_keys = key_bound_;
  a.kv_type = num_.kv;
  a.k_cache = kv_slot(il, true);
  a.v_cache = kv_slot(il, false);
  a.out = out;
  a.ldo = ldo;
  a.round = num_.round;
  a.ws_zeroed = true;  // GpuBuffers zeroed the workspace's counters once
  a.out_q8 = out_q8;
  const bool neox = hp.rope.type == model::RopeType::kNeox;
  // At depth the tensor-core decode kernel beats the fused SIMT one; it takes the rope inside too
  // where attention_mma_rope_on (else the rope + KV store launch goes first).
  const bool mma = long_ctx_ && n_tok == 1 && cuda::attention_mma_decode_supported(a);
  if (fuse_rope && g_attn_rope && (!mma || cuda::attention_mma_rope_on())) {  // norm, rope, KV store inside
    cuda::AttnArgs f = a;
    f.decode_mma = mma;
    f.qkv_raw = qkv;
    f.q_norm_w = L.q_norm;
    f.k_norm_w = L.k_norm;
    f.rms_eps = hp.rms_eps;
    f.rope_cs = b_.rope_cs.as<float>();
    f.n_rot = static_cast<int>(hp.rope.n_rot);
    f.neox = neox;
    if (cuda::attention_fused_rope_supported(f)) return cuda::attention(f, b_.attn_ws.get(), s);
  }
  // Norm + rope of q and k, and K and V into the cache, in one launch.
  cuda::KvStore kv;
  kv.type = num_.kv;
  kv.k_cache = kv_slot(il, true);
  kv.v_cache = kv_slot(il, false);
  kv.v = qkv + q_dim + kv_dim;
  kv.ldv = ld;
  kv.v_head_dim = hp.head_dim_v;
  cuda::qk_norm_rope_store(qkv, ld, n_tok, nh, nkv, hd, L.q_norm, L.k_norm, hp.rms_eps, b_.rope_cs.as<float>(),
                           hp.rope.n_rot, neox, pos, num_.round, kv, s);
  a.decode_mma = mma;
  cuda::attention(a, b_.attn_ws.get(), s);
}

void GpuForward::ffn_block(int64_t il, int64_t n_tok, cudaStream_t s) const {
  const model::HParams& hp = m_.hp;
  const DevLayer& L = w_.layers[il];
  const int64_t n_embd = hp.n_embd;
  float* x = b_.x.as<float>();
  float* h = b_.h.as<float>();
  if (!L.moe) {
    const int64_t n_ff = L.down.k;
    float* gu = b_.gu.as<float>();
    float* hh = b_.hh.as<float>();
    // Decode: norm and SwiGLU also write the Q8 copies their GEMVs read.
    const bool gemv = use_gemv(n_tok);
    const bool q8_in = gemv && wants_q8(L.gate_up) && n_embd % 32 == 0;
    const bool q8_mid = gemv && wants_q8(L.down) && n_ff % 32 == 0;
    // The norm fold: wo made this norm (b_.xq_n, b_.nq_part).
    const bool folded = nq_ffn_ready_;
    nq_ffn_ready_ = false;
    if (spacer(kSkipNorm2, n_tok)) cuda::pdl_spacer(s);
    if (folded || skip(kSkipNorm2, n_tok)) {
    } else if (q8_in) {
      cuda::rmsnorm_q8(x, n_embd, L.ffn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
    } else {
      cuda::rmsnorm(x, n_embd, L.ffn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
    }
    // One token of a tiled NVFP4 gate|up: the SwiGLU and its Q8 copy in the GEMV's epilogue
    // (cuda::GemvArgs::glu_xq), the copy in b_.xq_glu (the GEMV still reads xq), and the down
    // projection reading it there. (The same tail in the 2..8-token kernel, gemv_mma_batch.cu, cost
    // more than the launch it saved: H100 session 53 call 5, Llama-8B ft-bench-batch, ms a step with
    // it / the SwiGLU launch, B=4 4.14, 4.17 / 4.08, 4.09, B=8 7.14, 7.15 / 6.78, 6.83; not kept.)
    const bool glu = g_glu_fused && q8_in && q8_mid && n_tok == 1 && L.gate_up.parts.size() == 1 &&
                     L.gate_up.parts[0].tiled && L.gate_up.parts[0].row0 == 0 && L.down.parts.size() == 1 &&
                     b_.glu_count.get() != nullptr && !skip(kSkipGateUp, n_tok) && !skip(kSkipSwiglu, n_tok) &&
                     !skip(kSkipDown, n_tok);
    if (glu) {
      cuda::GemvArgs a;
      fill_common(a, L.gate_up.parts[0], L.gate_up, h, n_embd, n_tok, gu, 2 * n_ff, num_.round, false);
      a.xq = b_.xq.get();
      if (folded) fold_consume(a);
      a.glu_xq = b_.xq_glu.get();
      a.glu_h = hh;
      a.glu_count = b_.glu_count.as<unsigned>();
      if (spacer(kSkipGateUp, n_tok)) cuda::pdl_spacer(s);
      cuda::gemv(a, s);
      if (spacer(kSkipDown, n_tok)) cuda::pdl_spacer(s);
      cuda::GemvArgs d;
      fill_common(d, L.down.parts[0], L.down, hh, n_ff, n_tok, x, n_embd, num_.round, /*accumulate=*/true);
      d.xq = b_.xq_glu.get();
      d.y_early = true;  // x: written by wo, three launches back (cuda/gemv.h)
      if (fold_wanted(il + 1, /*attn=*/true, n_tok)) {  // the next layer's attention norm (norm_fold.h)
        fold_produce(d, w_.layers[il + 1].attn_norm);
        nq_attn_ready_ = true;
      }
      cuda::gemv(d, s);
      return;
    }
    if (folded) {  // gate|up off the SwiGLU tail still reads the folded row
      if (!skip(kSkipGateUp, n_tok)) {
        cuda::GemvArgs a;
        fill_common(a, L.gate_up.parts[0], L.gate_up, h, n_embd, n_tok, gu, 2 * n_ff, num_.round, false);
        fold_consume(a);
        cuda::gemv(a, s);
      }
    } else
    if (!skip(kSkipGateUp, n_tok))
      linear(L.gate_up, h, n_embd, n_tok, gu, 2 * n_ff, num_.round, false, num_.q8, s, false, q8_in);
    if (skip(kSkipSwiglu, n_tok)) {
    } else if (q8_mid) {
      cuda::swiglu_q8(gu, 2 * n_ff, n_ff, n_tok, hh, n_ff, num_.round, b_.xq.get(), s);
    } else {
      cuda::swiglu(gu, 2 * n_ff, n_ff, n_tok, hh, n_ff, num_.round, s);
    }
    // x was last written by wo, four launches back: y_early (cuda/gemv.h).
    if (!skip(kSkipDown, n_tok))
      linear(L.down, hh, n_ff, n_tok, x, n_embd, num_.round, /*accumulate=*/true, num_.q8, s, false, q8_mid,
             /*y_early=*/true);
    return;
  }
  const DevExpertTensor& first = L.experts.gate_up ? L.experts.gate_up : L.experts.gate;
  const bool q8_in = use_gemv(n_tok) && num_.q8 && cuda::gemv_q8_supported(first.type) && n_embd % 32 == 0;
  // One decode token: the norm inside the router's launch (H200 session 12, Qwen3-30B-A3B tg128
  // 402.9 / 402.7 tok/s against 395.4 / 395.5 with FT_MOE_NORM_ROUTE=0, alternating in one call).
  // FT_DEBUG_SKIP: router / experts leave out this path's two links.
  bool deferred = false;
  if (q8_in && n_tok == 1 && (skip(kSkipRouter, n_tok) || norm_route_experts(il, x, h, s, &deferred))) {
    if (!skip(kSkipExperts, n_tok)) run_experts(il, h, n_tok, /*xq_ready=*/true, x, s, deferred && !skip(kSkipRoute, n_tok));
    return;
  }
  if (q8_in)
    cuda::rmsnorm_q8(x, n_embd, L.ffn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, b_.xq.get(), s);
  else
    cuda::rmsnorm(x, n_embd, L.ffn_norm, n_embd, hp.rms_eps, n_tok, h, n_embd, num_.round, s);
  routed_experts(il, h, n_tok, /*xq_ready=*/q8_in, x, s);
}

void GpuForward::run(int64_t n_tok, Head head, cudaStream_t s) const {
  nq_attn_ready_ = nq_ffn_ready_ = false;
  if (b_.g4) {  // gemma4: its own pass over the same kernels (gpu/forward_gemma4.cpp)
    gemma4_run(n_tok, head, s);
    return;
  }
  const model::HParams& hp = m_.hp;
  const int64_t n_embd = hp.n_embd;
  const DevMatrix& te = w_.token_embd;
  cuda::embed(te.type, te.w, te.row_bytes, n_embd, te.rows, 1.0f, b_.tokens.as<int32_t>(), n_tok,
              b_.x.as<float>(), n_embd, b_.bad.as<int>(), s);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (!hp.recurrent.empty()) {  // qwen35 / qwen35moe
      qwen35_layer(il, n_tok, s);
      continue;
    }
    attention_block(il, n_tok, s);
    ffn_block(il, n_tok, s);
  }
  if (head == Head::kNone) return;
  if (head == Head::kRows && solo_row0_ < 0) {  // one row per sequence of a batch (rmsnorm is per row: norm, then gather)
    const BatchRows& br = *b_.batch;
    cuda::rmsnorm(b_.x.as<float>(), n_embd, w_.output_norm, n_embd, hp.rms_eps, n_tok, b_.h.as<float>(), n_embd,
                  num_.round, s);
    if (br.n_out == n_tok) {  // a token an item: out_rows is 0, 1, .. (no gather)
      linear(w_.output, b_.h.as<float>(), n_embd, n_tok, br.logits, hp.n_vocab, Round::kNone, false, num_.q8, s);
      return;
    }
    cuda::gather_rows(b_.h.as<float>(), n_embd, br.out_rows, 1, br.n_out, n_embd, b_.x.as<float>(), n_embd, s);
    linear(w_.output, b_.x.as<float>(), n_embd, br.n_out, br.logits, hp.n_vocab, Round::kNone, false, num_.q8, s);
    return;
  }
  // Only the rows whose logits are wanted go through the norm and the head (a solo step's kRows: its
  // last row, into the batch's logits).
  const int64_t first = head == Head::kAll ? 0 : n_tok - 1, rows = n_tok - first;
  float* h = b_.h.as<float>();
  cuda::rmsnorm(b_.x.as<float>() + first * n_embd, n_embd, w_.output_norm, n_embd, hp.rms_eps, rows,
                h, n_embd, num_.round, s);
  float* logits = head == Head::kRows ? b_.batch->logits : b_.logits.as<float>();
  linear(w_.output, h, n_embd, rows, logits, hp.n_vocab, Round::kNone, false, num_.q8, s);
  if (head == Head::kArgmax) cuda::argmax(logits, hp.n_vocab, hp.n_vocab, 1, b_.argmax.as<int32_t>(), s, b_.argmax_ws.get());
}

}  // namespace ft::gpu
