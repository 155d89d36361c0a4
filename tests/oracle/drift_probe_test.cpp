// Drift probe: where do our CPU engine's numbers first part from llama.cpp's, tensor by
// tensor and token by token, on the same file and the same prompt (one batch)?
//
// llama.cpp runs in process with an eval callback (llama_context_params.cb_eval) that
// copies every named intermediate ("attn_norm-0", "linear_attn_qkv_mixed-0", "l_out-2",
// ...); our side runs the same layer loop as the architecture's forward, reading the
// block buffers State leaves behind (s.h, dn.in, dn.y, dn.out, s.branch, s.x). Three views:
//   free    our whole forward vs llama.cpp's, per tensor: the first token whose row
//           differs by more than kJump (relative to the row's largest |value|);
//   layer   each layer fed llama.cpp's input to that layer: what the layer alone adds
//           (and the MoE routing / experts / shared-expert gate from llama.cpp's inputs);
//   op      each op fed llama.cpp's input to that op: RoPE, attention scores, softmax and
//           V sum; the Gated DeltaNet rmsnorm, input projections, conv + silu, delta rule,
//           gated norm and ssm_out.
// Then 8 decode steps, one token each, compared by their logits.
// Asserted: no tensor jumps (a Q8 rounding flip shows as a relative jump > kJump), every op
// view tensor is bit-identical, prompt and decode logits within 1e-5 (measured: 0).
// When it fails, the first tensor and token named are where to look: an op that rounds
// differently from ggml-cpu (engine/vec_math.h says which ones had to match).
// FT_DRIFT_VERBOSE=1 prints every tensor's worst row and llama.cpp's tensor names;
// FT_DRIFT_PROMPT=N sets the prompt length (default 100).
#include <gtest/gtest.h>
#include <ggml-backend.h>
#include <llama.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oracle_isa.h"  // both sides on AVX2 where the CPU has AVX-512 (why: there)
#include "engine/conv1d.h"
#include "engine/deltanet.h"
#include "engine/ffn.h"
#include "engine/linear.h"
#include "engine/moe.h"
#include "engine/norm.h"
#include "engine/state.h"
#include "engine/vec_math.h"
#include "model/decoder.h"
#include "model/model.h"
#include "model/qwen35_blocks.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;
using ft::GgmlType;
using ft::testgen::Arch;
using ft::testgen::ModelSpec;
using ft::testgen::Role;

namespace {

bool verbose() {
  const char* v = std::getenv("FT_DRIFT_VERBOSE");
  return v && *v && *v != '0';
}

// ---- llama.cpp side: every F32 node by name, flattened (ne0 fastest) ----------------------
struct Captured {
  std::map<std::string, std::vector<float>> t;  // the prompt batch's tensors
  std::vector<float> step_logits;               // [n_steps][n_vocab] decode steps after it
  bool on = true;                               // the callback keeps tensors
  std::vector<std::string> order;  // names in evaluation order
  std::vector<float> logits;       // [n_tok][n_vocab]
  int n_vocab = 0;
  const std::vector<float>* get(const std::string& name) const {
    auto it = t.find(name);
    return it == t.end() ? nullptr : &it->second;
  }
};

bool capture_cb(ggml_tensor* t, bool ask, void* user) {
  auto* c = static_cast<Captured*>(user);
  if (t->type != GGML_TYPE_F32 || !c->on) return !ask;
  if (ask) return true;
  std::vector<float> v(static_cast<size_t>(ggml_nelements(t)));
  size_t n = 0;
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          v[n++] = *reinterpret_cast<const float*>(static_cast<const char*>(t->data) + i0 * t->nb[0] +
                                                   i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
  const std::string name = ggml_get_name(t);
  if (!c->t.count(name)) c->order.push_back(name);
  c->t[name] = std::move(v);  // a name written twice keeps the last (it is the final value)
  return true;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// The prompt as one batch with logits for every position, 1 thread, F32 KV, no flash
// attention: the settings of tool_oracle.cpp (parity_test's reference).
Captured run_llama(const std::string& path, const std::vector<int32_t>& prompt, const std::vector<int32_t>& steps) {
  static bool loaded = false;
  if (!loaded) {
    llama_log_set(quiet_log, nullptr);
    const char* libdir = std::getenv("FT_LLAMA_LIB_DIR");
    ggml_backend_load_all_from_path(libdir && *libdir ? libdir : FT_LLAMA_LIB_DIR);
    llama_backend_init();
    loaded = true;
  }
  Captured c;
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) return c;
  auto cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(prompt.size() + steps.size() + 8);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max<size_t>(512, prompt.size()));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.no_perf = true;
  cp.cb_eval = capture_cb;
  cp.cb_eval_user_data = &c;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx) {
    llama_batch b = llama_batch_init(static_cast<int32_t>(prompt.size()), 0, 1);
    for (size_t i = 0; i < prompt.size(); ++i) {
      b.token[i] = prompt[i];
      b.pos[i] = static_cast<int32_t>(i);
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = true;
    }
    b.n_tokens = static_cast<int32_t>(prompt.size());
    if (llama_decode(ctx, b) == 0) {
      c.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
      for (size_t i = 0; i < prompt.size(); ++i) {
        const float* l = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
        c.logits.insert(c.logits.end(), l, l + c.n_vocab);
      }
      // Decode steps one token at a time (their tensors are not kept).
      c.on = false;
      for (size_t i = 0; i < steps.size(); ++i) {
        llama_batch d = llama_batch_init(1, 0, 1);
        d.token[0] = steps[i];
        d.pos[0] = static_cast<int32_t>(prompt.size() + i);
        d.n_seq_id[0] = 1;
        d.seq_id[0][0] = 0;
        d.logits[0] = true;
        d.n_tokens = 1;
        const bool ok = llama_decode(ctx, d) == 0;
        llama_batch_free(d);
        if (!ok) break;
        const float* l = llama_get_logits_ith(ctx, -1);
        c.step_logits.insert(c.step_logits.end(), l, l + c.n_vocab);
      }
    }
    llama_batch_free(b);
    llama_free(ctx);
  }
  llama_model_free(model);
  return c;
}

// ---- comparison --------------------------------------------------------------------------
// Row t of both: max |a - b| over the row, relative to the row's max |b| (floored at 1e-3).
struct RowDiff {
  int first_jump = -1;  // first token whose relative difference exceeds kJump
  int worst = -1;
  float worst_rel = 0, worst_abs = 0;
  float max_rel_before_jump = 0;  // the largest relative difference before first_jump
};
constexpr float kJump = 1e-4f;

RowDiff compare_rows(const float* ours, int64_t ld_ours, const float* ref, int64_t width, int64_t n_tok) {
  RowDiff r;
  for (int64_t t = 0; t < n_tok; ++t) {
    float d = 0, m = 1e-3f;
    for (int64_t i = 0; i < width; ++i) {
      const float a = ours[t * ld_ours + i], b = ref[t * width + i];
      d = std::max(d, std::fabs(a - b));
      m = std::max(m, std::fabs(b));
      if (std::isnan(a) != std::isnan(b)) d = INFINITY;
    }
    const float rel = d / m;
    if (r.first_jump < 0 && rel > kJump) r.first_jump = static_cast<int>(t);
    if (r.first_jump < 0) r.max_rel_before_jump = std::max(r.max_rel_before_jump, rel);
    if (rel > r.worst_rel || r.worst < 0) {
      r.worst = static_cast<int>(t);
      r.worst_rel = rel;
      r.worst_abs = d;
    }
  }
  return r;
}

struct Report {
  std::string view;
  // (name, diff) in evaluation order
  std::vector<std::pair<std::string, RowDiff>> rows;
  void add(const std::string& name, const RowDiff& d) { rows.emplace_back(name, d); }
  // The first tensor (in order) with a jump, at its earliest token.
  const std::pair<std::string, RowDiff>* first_jump() const {
    const std::pair<std::string, RowDiff>* best = nullptr;
    for (const auto& r : rows)
      if (r.second.first_jump >= 0 && (!best || r.second.first_jump < best->second.first_jump)) best = &r;
    return best;
  }
  void print() const {
    for (const auto& [name, d] : rows)
      if (verbose() || d.first_jump >= 0)
        std::printf("  %-6s %-28s first jump %4d  worst t=%4d rel %.3g abs %.3g  (before the jump: rel %.3g)\n",
                    view.c_str(), name.c_str(), d.first_jump, d.worst, d.worst_rel, d.worst_abs,
                    d.max_rel_before_jump);
  }
};

// ---- our side ----------------------------------------------------------------------------
std::string tname(const char* base, int64_t il) { return std::string(base) + "-" + std::to_string(il); }

bool is_q35(const ft::model::Model& m) {
  const std::string a = m.arch->name;
  return a == "qwen35" || a == "qwen35moe";
}

// Token mixing of layer il (what the arch's forward runs).
void mix_layer(const ft::model::Model& m, ft::engine::State& st, int64_t il, int64_t n_tok) {
  if (!is_q35(m))
    ft::model::attention_block(m, il, st, n_tok, 0);
  else if (m.hp.is_recurrent(il))
    ft::model::gdn_block(m, il, st, n_tok);
  else
    ft::model::gated_attention_block(m, il, st, n_tok, 0);
}

void ffn_layer(const ft::model::Model& m, ft::engine::State& st, int64_t il, int64_t n_tok) {
  if (is_q35(m) && m.layers[il].is_moe())
    ft::model::moe_shared_ffn_block(m, il, st, n_tok);
  else
    ft::model::ffn_block(m, il, st, n_tok);
}

// Residual after token mixing: qwen35 names it attn_residual, the llama-style builders ffn_inp.
std::string resid_name(const ft::model::Model& m, int64_t il) {
  return tname(is_q35(m) ? "attn_residual" : "ffn_inp", il);
}

void compare_named(Report& rep, const Captured& ref, const std::string& name, const float* ours, int64_t ld,
                   int64_t width, int64_t n_tok, const char* note = "") {
  const auto* r = ref.get(name);
  if (!r || static_cast<int64_t>(r->size()) != width * n_tok) return;
  rep.add(name + note, compare_rows(ours, ld, r->data(), width, n_tok));
}

// The GDN block's buffers after gdn_block: in = [mixed | z | beta | alpha] rows, y = conv
// output with q, k L2-normed, out = gated normed output.
void compare_gdn(Report& rep, const Captured& ref, const ft::model::Model& m, ft::engine::State& st, int64_t il,
                 int64_t n_tok) {
  const auto& sh = m.gdn_shape;
  const int64_t ld = sh.in_dim(), cd = sh.conv_dim(), vd = sh.value_dim(), Hv = sh.n_v_heads;
  const float* in = st.dn.in.data();
  compare_named(rep, ref, tname("linear_attn_qkv_mixed", il), in, ld, cd, n_tok);
  compare_named(rep, ref, tname("z", il), in + cd, ld, vd, n_tok);
  compare_named(rep, ref, tname("beta", il), in + cd + vd, ld, Hv, n_tok);
  compare_named(rep, ref, tname("alpha", il), in + cd + vd + Hv, ld, Hv, n_tok);
  compare_named(rep, ref, tname("q_conv_predelta", il), st.dn.y.data(), cd, sh.key_dim(), n_tok);
  compare_named(rep, ref, tname("final_output", il), st.dn.out.data(), vd, vd, n_tok);
  compare_named(rep, ref, tname("linear_attn_out", il), st.s.branch.data(), m.hp.n_embd, m.hp.n_embd, n_tok);
}

struct Ours {
  std::unique_ptr<ft::ThreadPool> pool;
  std::unique_ptr<ft::engine::State> st;
};

Ours make_state(const ft::model::Model& m, int64_t n_tok) {
  Ours o;
  o.pool = std::make_unique<ft::ThreadPool>(1);
  o.st = std::make_unique<ft::engine::State>(m, *o.pool, ft::engine::ActType::kF32, n_tok + 8, n_tok + 8);
  o.st->ex.act_quant = ft::quant::ActQuant::kQ8;  // --dtype auto
  o.st->dn.reset();
  // The freq factors each forward passes: qwen35's pair divisors, else rope_freqs.
  const float* ff = is_q35(m) ? m.rope_pair_div.data() : (m.rope_freqs ? m.rope_freqs.f32() : nullptr);
  o.st->rope.build(m.hp.rope, ff, 0, n_tok);
  return o;
}

// Free run: our whole forward, compared block by block; also returns our last-row logits diff.
Report free_run(const ft::model::Model& m, const Captured& ref, const std::vector<int32_t>& prompt,
                float* last_dlogit) {
  Report rep{"free", {}};
  const int64_t n_tok = static_cast<int64_t>(prompt.size()), n_embd = m.hp.n_embd;
  Ours o = make_state(m, n_tok);
  auto& st = *o.st;
  ft::model::embed(m, prompt.data(), n_tok, st.s.x.data());
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    mix_layer(m, st, il, n_tok);
    compare_named(rep, ref, tname("attn_norm", il), st.s.h.data(), n_embd, n_embd, n_tok);
    if (is_q35(m) && m.hp.is_recurrent(il)) compare_gdn(rep, ref, m, st, il, n_tok);
    compare_named(rep, ref, resid_name(m, il), st.s.x.data(), n_embd, n_embd, n_tok);
    ffn_layer(m, st, il, n_tok);
    compare_named(rep, ref, tname(is_q35(m) ? "attn_post_norm" : "ffn_norm", il), st.s.h.data(), n_embd, n_embd,
                  n_tok);
    compare_named(rep, ref, tname("ffn_out", il), st.s.branch.data(), n_embd, n_embd, n_tok);
    compare_named(rep, ref, tname("l_out", il), st.s.x.data(), n_embd, n_embd, n_tok);
  }
  std::vector<float> logits(static_cast<size_t>(n_tok * ref.n_vocab));
  ft::model::output_head(m, st, n_tok, logits.data(), true);
  rep.add("logits", compare_rows(logits.data(), ref.n_vocab, ref.logits.data(), ref.n_vocab, n_tok));
  float d = 0;
  for (int64_t i = 0; i < ref.n_vocab; ++i)
    d = std::max(d, std::fabs(logits[(n_tok - 1) * ref.n_vocab + i] - ref.logits[(n_tok - 1) * ref.n_vocab + i]));
  *last_dlogit = d;
  return rep;
}

// Layer view: layer il starts from llama.cpp's input to it (l_out of the layer before).
Report layer_run(const ft::model::Model& m, const Captured& ref, const std::vector<int32_t>& prompt) {
  Report rep{"layer", {}};
  const int64_t n_tok = static_cast<int64_t>(prompt.size()), n_embd = m.hp.n_embd;
  Ours o = make_state(m, n_tok);
  auto& st = *o.st;
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    if (il == 0) {
      ft::model::embed(m, prompt.data(), n_tok, st.s.x.data());
    } else {
      const auto* in = ref.get(tname("l_out", il - 1));
      if (!in) return rep;
      std::copy(in->begin(), in->end(), st.s.x.begin());
    }
    mix_layer(m, st, il, n_tok);
    if (is_q35(m) && m.hp.is_recurrent(il)) compare_gdn(rep, ref, m, st, il, n_tok);
    if (is_q35(m) && !m.hp.is_recurrent(il)) {
      const int64_t q_dim = m.hp.n_head[il] * m.hp.head_dim_k;
      compare_named(rep, ref, tname("attn_gated", il), st.s.attn.data(), q_dim, q_dim, n_tok);
      // gated_attention_block leaves q (closed up), the gates' room, roped k and v in s.qkv.
      const int64_t ld = m.layers[il].qkv.rows(), kv_dim = m.hp.n_head_kv[il] * m.hp.head_dim_k;
      compare_named(rep, ref, tname("Qcur", il), st.s.qkv.data(), ld, q_dim, n_tok, " (roped)");
      compare_named(rep, ref, tname("Kcur", il), st.s.qkv.data() + 2 * q_dim, ld, kv_dim, n_tok, " (roped)");
      compare_named(rep, ref, tname("Vcur", il), st.s.qkv.data() + 2 * q_dim + kv_dim, ld, kv_dim, n_tok);
    }
    compare_named(rep, ref, resid_name(m, il), st.s.x.data(), n_embd, n_embd, n_tok);
    const auto* mid = ref.get(resid_name(m, il));
    if (mid) std::copy(mid->begin(), mid->end(), st.s.x.begin());
    ffn_layer(m, st, il, n_tok);
    compare_named(rep, ref, tname("ffn_out", il), st.s.branch.data(), n_embd, n_embd, n_tok);
    if (m.layers[il].is_moe()) {
      const int64_t n_used = m.hp.n_expert_used[il];
      compare_named(rep, ref, tname("ffn_moe_weights_norm", il), st.s.moe_w.data(), n_used, n_used, n_tok);
      if (!is_q35(m))  // qwen35moe reuses s.router for the shared-expert gate
        compare_named(rep, ref, tname("ffn_moe_logits", il), st.s.router.data(), m.hp.n_expert, m.hp.n_expert, n_tok);
      // The routing alone, from llama.cpp's router logits.
      if (const auto* lg = ref.get(tname("ffn_moe_logits", il))) {
        std::vector<float> w(static_cast<size_t>(n_tok * n_used));
        std::vector<int32_t> ids(static_cast<size_t>(n_tok * n_used));
        for (int64_t t = 0; t < n_tok; ++t)
          ft::engine::moe_route(lg->data() + t * m.hp.n_expert, m.hp.n_expert, static_cast<int>(n_used),
                                st.s.probs.data(), st.s.order.data(), ids.data() + t * n_used, w.data() + t * n_used);
        compare_named(rep, ref, tname("ffn_moe_weights_norm", il), w.data(), n_used, n_used, n_tok, " (route only)");
        // The routed experts alone, from llama.cpp's normed input and our (matching) routing.
        const auto* h = ref.get(tname(is_q35(m) ? "attn_post_norm" : "ffn_norm", il));
        if (h) {
          std::vector<float> y(static_cast<size_t>(n_tok * n_embd));
          m.layers[il].moe->forward(st.ex, h->data(), n_embd, n_tok, ids.data(), w.data(), static_cast<int>(n_used),
                                    y.data(), n_embd);
          compare_named(rep, ref, tname("ffn_moe_out", il), y.data(), n_embd, n_embd, n_tok, " (experts only)");
        }
      }
      if (is_q35(m)) {
        compare_named(rep, ref, tname("ffn_shexp", il), st.s.shexp.data(), n_embd, n_embd, n_tok);
        compare_named(rep, ref, tname("shared_expert_gate", il), st.s.router.data(), 1, 1, n_tok);
      }
    }
  }
  return rep;
}

// The attention of layer il step by step from llama.cpp's roped q, k and v: scores (kq),
// softmax (kq_soft_max), weighted V sum (kqv), each from llama.cpp's input to it, with the
// arithmetic engine/attention.cpp uses (vec_math.h).
void attention_ops(Report& rep, const Captured& ref, const ft::model::Model& m, ft::engine::State& st, int64_t il,
                   int64_t n_tok) {
  const auto* q = ref.get(tname("Qcur", il));
  const auto* k = ref.get(tname("Kcur", il));  // the last "Kcur" is the roped one
  const auto* v = ref.get(tname("Vcur", il));
  const auto* kq = ref.get(tname("kq", il));
  const auto* sm = ref.get(tname("kq_soft_max", il));
  const auto* kqv = ref.get(tname("kqv", il));
  if (!q || !k || !v || !kq || !sm || !kqv) return;
  const int64_t nh = m.hp.n_head[il], nkv = m.hp.n_head_kv[il], hd = m.hp.head_dim_k;
  // RoPE of llama.cpp's normed q
  if (const auto* qn = ref.get(tname("Qcur_normed", il))) {
    std::vector<float> qr(*qn);
    ft::engine::rope_apply(st.ex, st.rope, qr.data(), nh * hd, n_tok, nh, hd);
    compare_named(rep, ref, tname("Qcur", il), qr.data(), nh * hd, nh * hd, n_tok, " (rope)");
  }
  const int64_t n_cell = static_cast<int64_t>(kq->size()) / (n_tok * nh);
  // Our rows in llama.cpp's layouts: kq [h][t][cell], kqv [h][t][i].
  std::vector<float> s_kq(kq->size(), 0.0f), s_sm(sm->size(), 0.0f), s_kqv(kqv->size(), 0.0f), row(n_cell);
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < n_tok; ++t) {
      const int64_t g = h / (nh / nkv), r = (h * n_tok + t) * n_cell;
      for (int64_t j = 0; j <= t; ++j)
        s_kq[r + j] = ft::engine::dot_f32(q->data() + (t * nh + h) * hd, k->data() + (j * nkv + g) * hd, hd);
      // softmax of llama.cpp's scores
      float mx = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) mx = std::max(mx, row[j] = (*kq)[r + j] * m.hp.attn_scale);
      const float inv = static_cast<float>(1.0 / ft::engine::exp_sum(row.data(), 0, t + 1, mx, true));
      for (int64_t j = 0; j <= t; ++j) s_sm[r + j] = row[j] * inv;
      // V sum of llama.cpp's probabilities, in the batched (sgemm) order
      for (int64_t i = 0; i < hd; ++i) {
        float acc[8] = {};
        for (int64_t j = 0; j <= t; ++j) acc[j % 8] = std::fma(v->data()[(j * nkv + g) * hd + i], (*sm)[r + j], acc[j % 8]);
        float u[4];
        for (int l = 0; l < 4; ++l) u[l] = acc[l] + acc[l + 4];
        s_kqv[(h * n_tok + t) * hd + i] = (u[0] + u[2]) + (u[1] + u[3]);
      }
      // only compare the causal part: zero the rest on both sides
      for (int64_t j = t + 1; j < n_cell; ++j) s_kq[r + j] = (*kq)[r + j], s_sm[r + j] = (*sm)[r + j];
    }
  // Rows here are (head, token) pairs: the reported row index is h * n_tok + t.
  compare_named(rep, ref, tname("kq", il), s_kq.data(), n_cell, n_cell, nh * n_tok, " (scores)");
  compare_named(rep, ref, tname("kq_soft_max", il), s_sm.data(), n_cell, n_cell, nh * n_tok, " (softmax)");
  compare_named(rep, ref, tname("kqv", il), s_kqv.data(), hd, hd, nh * n_tok, " (V sum)");
}

// Op view: attention layers step by step (attention_ops), and each op of a Gated DeltaNet
// layer from llama.cpp's input to it.
Report op_run(const ft::model::Model& m, const Captured& ref, const std::vector<int32_t>& prompt) {
  Report rep{"op", {}};
  const int64_t n_tok = static_cast<int64_t>(prompt.size()), n_embd = m.hp.n_embd;
  Ours o = make_state(m, n_tok);
  auto& st = *o.st;
  const auto& sh = m.gdn_shape;
  const int64_t ld = sh.in_dim(), cd = sh.conv_dim(), vd = sh.value_dim(), Hv = sh.n_v_heads;
  for (int64_t il = 0; il < m.hp.n_layer; ++il) {
    if (!is_q35(m) || !m.hp.is_recurrent(il)) {
      attention_ops(rep, ref, m, st, il, n_tok);
      continue;
    }
    const auto& L = m.layers[il];
    const auto* x_in = il == 0 ? nullptr : ref.get(tname("l_out", il - 1));
    const auto* norm = ref.get(tname("attn_norm", il));
    const auto* mixed = ref.get(tname("linear_attn_qkv_mixed", il));
    const auto* z = ref.get(tname("z", il));
    const auto* beta = ref.get(tname("beta", il));
    const auto* alpha = ref.get(tname("alpha", il));
    const auto* fin = ref.get(tname("final_output", il));
    if (!norm || !mixed || !z || !beta || !alpha || !fin) {
      ADD_FAILURE() << "llama.cpp did not name the GDN tensors of layer " << il;
      return rep;
    }
    // rmsnorm
    if (x_in) {
      ft::engine::rmsnorm(st.ex, x_in->data(), n_embd, L.attn_norm.f32(), n_embd, m.hp.rms_eps, n_tok,
                          st.s.h.data(), n_embd);
      compare_named(rep, ref, tname("attn_norm", il), st.s.h.data(), n_embd, n_embd, n_tok);
    }
    // input projections from llama.cpp's normed input
    ft::engine::linear(st.ex, L.gdn_in, norm->data(), n_embd, n_tok, st.dn.in.data(), ld);
    compare_named(rep, ref, tname("linear_attn_qkv_mixed", il), st.dn.in.data(), ld, cd, n_tok);
    compare_named(rep, ref, tname("z", il), st.dn.in.data() + cd, ld, vd, n_tok);
    compare_named(rep, ref, tname("beta", il), st.dn.in.data() + cd + vd, ld, Hv, n_tok);
    compare_named(rep, ref, tname("alpha", il), st.dn.in.data() + cd + vd + Hv, ld, Hv, n_tok);
    // conv + delta rule + gated norm from llama.cpp's projections
    for (int64_t t = 0; t < n_tok; ++t) {
      float* row = st.dn.in.data() + t * ld;
      std::copy_n(mixed->data() + t * cd, cd, row);
      std::copy_n(z->data() + t * vd, vd, row + cd);
      std::copy_n(beta->data() + t * Hv, Hv, row + cd + vd);
      std::copy_n(alpha->data() + t * Hv, Hv, row + cd + vd + Hv);
    }
    ft::engine::deltanet(st.ex, sh, L.gdn, st.dn.conv(il), st.dn.ssm(il), st.dn.in.data(), ld, n_tok,
                         st.dn.out.data(), vd, st.dn.y.data());
    compare_named(rep, ref, tname("q_conv_predelta", il), st.dn.y.data(), cd, sh.key_dim(), n_tok);
    compare_named(rep, ref, tname("final_output", il), st.dn.out.data(), vd, vd, n_tok);
    // The GDN pieces one by one, each from llama.cpp's input to it.
    const auto* conv_silu = ref.get(tname("conv_output_silu", il));
    const auto* qn = ref.get(tname("q_conv_predelta", il));
    const auto* kn = ref.get(tname("k_conv_predelta", il));
    const auto* vn = ref.get(tname("v_conv_predelta", il));
    const auto* g = ref.get(tname("gate", il));
    const auto* b = ref.get(tname("beta_sigmoid", il));
    const auto* o = ref.get(tname("attn_output", il));
    if (conv_silu && qn && kn && vn && g && b && o) {
      const int64_t d = sh.d_head, Hk = sh.n_k_heads, kd = sh.key_dim();
      std::vector<float> conv_state(static_cast<size_t>(cd * (sh.d_conv - 1)), 0.0f);
      std::vector<float> y(static_cast<size_t>(n_tok * cd));
      ft::engine::conv1d_causal_silu(st.ex, mixed->data(), cd, n_tok, cd, L.gdn.conv1d, sh.d_conv,
                                     conv_state.data(), y.data(), cd);
      compare_named(rep, ref, tname("conv_output_silu", il), y.data(), cd, cd, n_tok);
      std::vector<float> S(static_cast<size_t>(Hv * d * d), 0.0f), out(static_cast<size_t>(n_tok * vd));
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t j = 0; j < Hv; ++j)
          ft::engine::delta_rule_step(S.data() + j * d * d, qn->data() + t * kd + (j % Hk) * d,
                                      kn->data() + t * kd + (j % Hk) * d, vn->data() + t * vd + j * d,
                                      (*g)[t * Hv + j], (*b)[t * Hv + j], d, out.data() + t * vd + j * d);
      compare_named(rep, ref, tname("attn_output", il), out.data(), vd, vd, n_tok);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t j = 0; j < Hv; ++j) {
          float* oj = out.data() + t * vd + j * d;
          std::copy_n(o->data() + t * vd + j * d, d, oj);
          ft::engine::rmsnorm_row(oj, L.gdn.norm, d, sh.eps, oj, ft::engine::ActType::kF32);
          for (int64_t r = 0; r < d; ++r) oj[r] *= ft::engine::silu((*z)[t * vd + j * d + r]);
        }
      compare_named(rep, ref, tname("final_output", il), out.data(), vd, vd, n_tok, " (gated norm)");
    }
    // ssm_out from llama.cpp's gated output
    ft::engine::linear(st.ex, L.gdn_out, fin->data(), vd, n_tok, st.s.branch.data(), n_embd);
    compare_named(rep, ref, tname("linear_attn_out", il), st.s.branch.data(), n_embd, n_embd, n_tok);
  }
  return rep;
}

// Decode: our arch forward over the prompt, then one token at a time; the largest
// |dlogit| against llama.cpp's steps (one-token matmuls and attention take other
// summation orders there than a batch does).
float decode_run(const ft::model::Model& m, const Captured& ref, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& steps) {
  const int64_t n_tok = static_cast<int64_t>(prompt.size());
  ft::ThreadPool pool(1);
  ft::engine::State st(m, pool, ft::engine::ActType::kF32, n_tok + static_cast<int64_t>(steps.size()) + 8, n_tok);
  st.ex.act_quant = ft::quant::ActQuant::kQ8;
  std::vector<float> logits(static_cast<size_t>(ref.n_vocab));
  m.forward(st, prompt.data(), n_tok, 0, logits.data(), false);
  float worst = 0;
  for (size_t i = 0; i < steps.size() && (i + 1) * ref.n_vocab <= ref.step_logits.size(); ++i) {
    m.forward(st, &steps[i], 1, n_tok + static_cast<int64_t>(i), logits.data(), false);
    for (int v = 0; v < ref.n_vocab; ++v)
      worst = std::max(worst, std::fabs(logits[v] - ref.step_logits[i * ref.n_vocab + v]));
  }
  return worst;
}

// ---- configs (parity_test.cpp's qwen35 / qwen35moe / default-preset ones) -----------------
struct Probe {
  std::string name;
  ModelSpec spec;
  int prompt_len = 100;
};

std::vector<Probe> probes() {
  auto base = [](Arch a) { return ft::testgen::preset_seeded("tiny", a, 7); };
  const auto all = &ft::testgen::with_all_types;
  const auto with = &ft::testgen::with_types;
  std::vector<Probe> out;
  out.push_back({"qwen35_nvfp4",
                 with(all(base(Arch::kQwen35), GgmlType::BF16), {Role::kAttn, Role::kMlp, Role::kOutput},
                      GgmlType::NVFP4)});
  out.push_back({"qwen35moe_nvfp4", with(all(base(Arch::kQwen35Moe), GgmlType::BF16),
                                         {Role::kAttn, Role::kMlp, Role::kExperts, Role::kOutput}, GgmlType::NVFP4)});
  out.push_back({"qwen35_bf16", all(base(Arch::kQwen35), GgmlType::BF16)});
  out.push_back({"qwen3moe_default", ft::testgen::preset("default", Arch::kQwen3Moe)});
  return out;
}

class Drift : public ::testing::TestWithParam<Probe> {};

TEST_P(Drift, Probe) {
  const Probe& p = GetParam();
  const fs::path dir = fs::path(FT_BINARY_DIR) / "drift-models" / p.name;
  fs::create_directories(dir);
  const std::string path = (dir / "model.gguf").string();
  const auto gen = ft::testgen::generate_model(p.spec, path);
  int n = p.prompt_len;
  if (const char* e = std::getenv("FT_DRIFT_PROMPT")) n = std::atoi(e);
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>((37 * i + 11 * p.spec.seed + 5) % gen.n_vocab));

  std::vector<int32_t> steps;
  for (int i = 0; i < 8; ++i) steps.push_back(static_cast<int32_t>((13 * i + 3) % gen.n_vocab));
  const Captured ref = run_llama(path, prompt, steps);
  ASSERT_EQ(ref.step_logits.size(), steps.size() * static_cast<size_t>(ref.n_vocab)) << "llama.cpp decode failed";
  ASSERT_EQ(static_cast<int64_t>(ref.logits.size()), n * static_cast<int64_t>(ref.n_vocab)) << "llama.cpp failed";
  if (verbose())
    for (const auto& name : ref.order) std::printf("  llama tensor %s (%zu)\n", name.c_str(), ref.t.at(name).size());
  auto m = ft::model::load_model(path);

  float dlogit = 0;
  const Report views[] = {free_run(*m, ref, prompt, &dlogit), layer_run(*m, ref, prompt), op_run(*m, ref, prompt)};
  for (const Report& rep : views) {
    const auto* fj = rep.first_jump();
    std::printf("DRIFT %s view=%s tensors=%zu first jump: %s at token %d\n", p.name.c_str(), rep.view.c_str(),
                rep.rows.size(), fj ? fj->first.c_str() : "none", fj ? fj->second.first_jump : -1);
    rep.print();
    // No tensor may jump: one Q8 rounding flip anywhere shows as a relative jump > kJump.
    EXPECT_EQ(fj, nullptr) << rep.view << " view: " << fj->first << " parts from llama.cpp at token "
                           << fj->second.first_jump << " (rel " << fj->second.worst_rel << ")";
  }
  // Each op fed llama.cpp's own input gives llama.cpp's bits.
  for (const auto& [name, d] : views[2].rows) EXPECT_EQ(d.worst_rel, 0.0f) << "op " << name << " is not bit-identical";
  EXPECT_GE(views[2].rows.size(), is_q35(*m) ? 20u : 8u) << "llama.cpp's tensor names changed: too little compared";
  EXPECT_LE(dlogit, 1e-5f);
  const float ddec = decode_run(*m, ref, prompt, steps);
  EXPECT_LE(ddec, 1e-5f) << "decode steps part from llama.cpp";
  std::printf("DRIFT %s last-token max|dlogit| %.3g, %zu decode steps after it: %.3g\n", p.name.c_str(), dlogit,
              steps.size(), ddec);
}

INSTANTIATE_TEST_SUITE_P(Models, Drift, ::testing::ValuesIn(probes()),
                         [](const ::testing::TestParamInfo<Probe>& i) { return i.param.name; });

}  // namespace
