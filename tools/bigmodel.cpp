// ft-bigmodel: writes realistic-size GGUF models (real Llama-3.1-8B, Qwen3-30B-A3B and
// Qwen3.6-35B-A3B shapes) with random but valid weights, fast enough for tens of GB in a
// minute or two:
// the quantised blocks are drawn directly (random E2M1 codes, UE4M3 block scales chosen
// for a target RMS) instead of quantising floats, each tensor is cut into ~16 MiB row
// chunks filled by all cores and written with pwrite at offsets computed up front.
//
//   ft-bigmodel --preset llama8b-nvfp4 --out /tmp/llama8b.gguf
//   ft-bigmodel --preset qwen3moe-30b-nvfp4 --out /tmp/qwen30b.gguf --layers 2 --type q4_K
//
// The weights keep activations bounded through every layer: each input projection
// preserves RMS (weight RMS 1/sqrt(k)), the residual branches (attn_output, ffn_down)
// add ~1.5/sqrt(n_layer) of the stream's RMS, norms are ~1, logits have a std of ~3.
// NVFP4 second-level scales s2 (per tensor, per expert) are u * 2^-k with u log-uniform in
// [0.5, 2] (never within 5% of 1) and k chosen to keep the block scales in E4M3's normal
// range; the block scales are divided by s2, so a reader that forgets the `.scale` tensors
// computes with weights off by 1/s2 and gets different logits.
//
// The file is a function of (preset, overrides, seed) only, not of --threads: every
// chunk has its own random stream keyed by tensor name and first row.
//
// Prints on stdout the file size and the weight bytes a batch-1 decode step reads
// (every tensor except token_embd, of which one row; n_expert_used/n_expert of each
// expert tensor; the KV cache is not counted).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "format/ggml_type.h"
#include "format/gguf_writer.h"
#include "quant/quantize.h"
#include "testgen/bpe_vocab.h"
#include "testgen/rng.h"

namespace {

using ft::GgmlType;
using ft::testgen::Rng;

// ---- model shapes ---------------------------------------------------------------------

struct Shape {
  std::string arch;  // llama | qwen3moe
  std::string name;
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ff = 0;  // dense FFN (qwen3moe: the key only)
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  int64_t n_vocab = 0, n_ctx_train = 0;
  float rope_base = 0, rms_eps = 0;
  bool rope_freqs = false;  // llama3 rope factors tensor
  bool qk_norm = false;
  std::string tokenizer_pre;
  GgmlType quant = GgmlType::NVFP4;  // attention, MLP, experts
  GgmlType embd = GgmlType::BF16, output = GgmlType::BF16, router = GgmlType::F32;
  // qwen35moe (shared/spec/arch/qwen35.md, qwen35moe.md): Gated DeltaNet layers with every
  // full_attn_interval-th layer gated attention, partial rope, a gated shared expert.
  struct Qwen35 {
    int64_t n_rot = 0, interval = 0, d_conv = 0, d_state = 0, n_group = 0, dt_rank = 0, n_ff_shexp = 0;
    std::vector<int32_t> sections;
    GgmlType mixer = GgmlType::BF16;  // attention and Gated DeltaNet projections
  } q35;
  bool is_qwen35() const { return q35.interval > 0; }
  // gemma4 (shared/spec/arch/gemma4.md): sliding-window layers with every period-th layer (and
  // the last) global; global layers with their own head dim (head_dim) and KV heads and V = K
  // (no attn_v); MoE experts beside the dense MLP, GeGLU, post-norms, tied output.
  struct Gemma4 {
    int64_t head_dim_swa = 0, n_head_kv_global = 0, n_swa = 0, period = 0;
    float rope_base_swa = 0, softcap = 0, partial_rotary = 0;
  } g4;
  bool is_gemma4() const { return g4.period > 0; }
  bool g4_global(int64_t il) const { return il % g4.period == g4.period - 1 || il == n_layer - 1; }
};

Shape preset(const std::string& name) {
  Shape s;
  if (name == "llama8b-nvfp4") {  // Llama-3.1-8B config.json
    s.arch = "llama";
    s.name = "ft-bigmodel Llama-3.1-8B-shaped";
    s.n_layer = 32, s.n_embd = 4096, s.n_head = 32, s.n_head_kv = 8, s.head_dim = 128;
    s.n_ff = 14336, s.n_vocab = 128256, s.n_ctx_train = 131072;
    s.rope_base = 500000.0f, s.rms_eps = 1e-5f, s.rope_freqs = true;
    s.tokenizer_pre = "llama-bpe";
  } else if (name == "qwen3moe-30b-nvfp4") {  // Qwen3-30B-A3B config.json
    s.arch = "qwen3moe";
    s.name = "ft-bigmodel Qwen3-30B-A3B-shaped";
    s.n_layer = 48, s.n_embd = 2048, s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128;
    s.n_ff = 6144, s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768;
    s.n_vocab = 151936, s.n_ctx_train = 40960;
    s.rope_base = 1e6f, s.rms_eps = 1e-6f, s.qk_norm = true;
    s.tokenizer_pre = "qwen2";
  } else if (name == "qwen36-35b-a3b-nvfp4") {  // Qwen3.6-35B-A3B (Qwen3.5-35B-A3B) config.json
    // NVFP4 on the experts, the shared experts and the output head, as the NVFP4 checkpoint
    // our users run (qwen35moe.md §4); attention and Gated DeltaNet projections BF16.
    s.arch = "qwen35moe";
    s.name = "ft-bigmodel Qwen3.6-35B-A3B-shaped";
    s.n_layer = 40, s.n_embd = 2048, s.n_head = 16, s.n_head_kv = 2, s.head_dim = 256;
    s.n_ff = 512, s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512;
    s.n_vocab = 248320, s.n_ctx_train = 262144;
    s.rope_base = 1e7f, s.rms_eps = 1e-6f, s.qk_norm = true;
    s.tokenizer_pre = "qwen2";
    s.output = GgmlType::NVFP4;
    s.q35.n_rot = 64;  // head_dim * partial_rotary_factor 0.25
    s.q35.interval = 4;
    s.q35.d_conv = 4, s.q35.d_state = 128, s.q35.n_group = 16, s.q35.dt_rank = 32;
    s.q35.n_ff_shexp = 512;
    s.q35.sections = {11, 11, 10, 0};
  } else if (name == "gemma4-26b-a4b-nvfp4") {
    // Gemma-4-26B-A4B's text config (HF config.json as we know it: hidden 2816, 30 layers, 16
    // heads, 8 KV heads on sliding layers (head_dim 256, window 1024) and 2 on the global ones
    // (global_head_dim 512, attention_k_eq_v), 5 sliding : 1 global, dense MLP 2112 beside 128
    // experts of 704 (top 8), vocab 262144, tied embeddings). NVFP4 attention, MLP and split
    // experts with per-expert scales (a ModelOpt conversion), BF16 embeddings.
    s.arch = "gemma4";
    s.name = "ft-bigmodel Gemma-4-26B-A4B-shaped";
    s.n_layer = 30, s.n_embd = 2816, s.n_head = 16, s.n_head_kv = 8, s.head_dim = 512;
    s.n_ff = 2112, s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 704;
    s.n_vocab = 262144, s.n_ctx_train = 262144;
    s.rope_base = 1e6f, s.rms_eps = 1e-6f, s.qk_norm = true;
    s.tokenizer_pre = "qwen2";
    s.g4.head_dim_swa = 256, s.g4.n_head_kv_global = 2, s.g4.n_swa = 1024, s.g4.period = 6;
    s.g4.rope_base_swa = 1e4f, s.g4.softcap = 30.0f, s.g4.partial_rotary = 0.25f;
  } else {
    ft::fail("unknown preset '{}' (expected llama8b-nvfp4, qwen3moe-30b-nvfp4, qwen36-35b-a3b-nvfp4 or "
             "gemma4-26b-a4b-nvfp4)", name);
  }
  return s;
}

// ---- tensor plan ------------------------------------------------------------------------

enum class Fill {
  kBytes,    // `bytes` precomputed (scales, rope factors)
  kUniform,  // F32/BF16 values uniform in [lo, hi]
  kWeight,   // a random matmul weight of RMS `rms` (per matrix divided by s2) in `type`
};

struct Planned {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;
  Fill fill = Fill::kUniform;
  float lo = 0, hi = 0;        // kUniform
  float rms = 0;               // kWeight: RMS of the effective (s2-scaled) weight
  std::vector<float> s2;       // kWeight, NVFP4: one per matrix (expert); empty = 1
  std::vector<uint8_t> bytes;  // kBytes
  double read_fraction = 1.0;  // share of the tensor one decode step reads
  int64_t cols() const { return ne[0]; }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t d = 1; d < ne.size(); ++d) r *= ne[d];
    return r;
  }
  int64_t rows_per_matrix() const { return ne.size() > 1 ? ne[1] : 1; }
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

constexpr float kE2m1Rms = 2.9261f;  // sqrt(mean of E2M1 value^2) over the 16 codes = sqrt(68.5/8)
// Smallest mean UE4M3 block scale: 2^-5 stays in E4M3's normal range (>= 2^-6) under the
// block-to-block jitter, so no block scale is subnormal or rounds to 0.
constexpr float kMinBlockScale = 1.0f / 32;

// NVFP4 second-level scale of a matrix whose effective weights have RMS `rms`:
// u * 2^-k, u log-uniform in [lo, hi] and at least 5% away from 1 (so that forgetting it
// shows), k >= 0 the smallest that keeps the block scales rms / (E2M1 rms * s2) at or above
// kMinBlockScale for every u (so the spread of u survives). With the default [0.5, 2]
// that gives s2 of 1/128 .. 1/2 on the presets: matmul outputs before the scale stay well
// within fp16 range (real ModelOpt files use ~1e-4).
float draw_s2(Rng& rng, float lo, float hi, float rms) {
  float u;
  do {
    u = std::exp(rng.uniform(std::log(lo), std::log(hi)));
  } while (std::fabs(u - 1.0f) < 0.05f);
  const float need = kMinBlockScale * kE2m1Rms * hi / rms;  // 2^k >= need, one k for all u
  const int k = need > 1.0f ? static_cast<int>(std::ceil(std::log2(need))) : 0;
  return std::ldexp(u, -k);
}

// Llama-3.1 "llama3" rope factors as convert_hf_to_gguf writes them (factor 8, low 1,
// high 4, original context 8192); shared/spec/arch/llama.md §2.
std::vector<float> llama3_rope_factors(int64_t head_dim, float base) {
  const double factor = 8, low = 1, high = 4, L = 8192;
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const double freq = std::pow(static_cast<double>(base),
                                 -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < L / high) {
      f[i] = 1.0f;
    } else if (wavelen > L / low) {
      f[i] = static_cast<float>(factor);
    } else {
      const double smooth = (L / wavelen - low) / (high - low);
      f[i] = static_cast<float>(1.0 / ((1 - smooth) / factor + smooth));
    }
  }
  return f;
}

struct Options {
  uint64_t seed = 1;
  float s2_lo = 0.5f, s2_hi = 2.0f;
  float resid_rms = 1.0f;   // RMS of the embeddings (the residual stream)
  float branch_rel = 1.5f;  // branch RMS = branch_rel * resid_rms / sqrt(n_layer)
  float logit_std = 3.0f;
};

std::vector<Planned> plan_tensors(const Shape& s, const Options& o) {
  std::vector<Planned> out;
  Rng srng(Rng::mix(o.seed, ft::testgen::hash_name("s2")));
  const bool moe = s.n_expert > 0;
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  const float E = o.resid_rms;
  const float branch = o.branch_rel * E / std::sqrt(static_cast<float>(s.n_layer));
  auto inv_sqrt = [](int64_t k) { return 1.0f / std::sqrt(static_cast<float>(k)); };

  auto uniform = [&](const std::string& name, GgmlType t, std::vector<int64_t> ne, float lo,
                     float hi) {
    Planned p;
    p.name = name, p.type = t, p.ne = std::move(ne), p.fill = Fill::kUniform, p.lo = lo, p.hi = hi;
    out.push_back(std::move(p));
  };
  auto bytes = [&](const std::string& name, std::vector<int64_t> ne, std::vector<float> v) {
    Planned p;
    p.name = name, p.type = GgmlType::F32, p.ne = std::move(ne), p.fill = Fill::kBytes,
    p.bytes = f32_bytes(v);
    out.push_back(std::move(p));
  };
  // A matmul weight; NVFP4 ones get their `.scale` companion right after.
  auto weight = [&](const std::string& base, GgmlType t, std::vector<int64_t> ne, float rms,
                    bool scaled, double read_fraction = 1.0) {
    Planned p;
    p.name = base + ".weight", p.type = t, p.ne = std::move(ne), p.fill = Fill::kWeight,
    p.rms = rms;
    p.read_fraction = read_fraction;
    const int64_t n_mat = p.ne.size() > 2 ? p.ne[2] : 1;
    if (t == GgmlType::NVFP4 && scaled)
      for (int64_t m = 0; m < n_mat; ++m) p.s2.push_back(draw_s2(srng, o.s2_lo, o.s2_hi, rms));
    std::vector<float> s2 = p.s2;
    const bool expert = p.ne.size() > 2;
    out.push_back(std::move(p));
    if (!s2.empty()) bytes(base + ".scale", {expert ? n_mat : 1}, s2);
  };

  // Embeddings: uniform of RMS E (uniform in [-a, a] has RMS a/sqrt(3)).
  const float ea = E * std::sqrt(3.0f);
  out.push_back(Planned{"token_embd.weight",
                        s.embd,
                        {s.n_embd, s.n_vocab},
                        Fill::kUniform,
                        -ea,
                        ea,
                        0,
                        {},
                        {},
                        1.0 / static_cast<double>(s.n_vocab)});
  if (s.rope_freqs)
    bytes("rope_freqs.weight", {s.head_dim / 2}, llama3_rope_factors(s.head_dim, s.rope_base));
  uniform("output_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
  // The head is BF16 in the presets (no .scale: llama.cpp loads output.scale only next
  // to an NVFP4 output).
  if (!s.is_gemma4())  // gemma4: tied to token_embd
    weight("output", s.output, {s.n_embd, s.n_vocab}, o.logit_std * inv_sqrt(s.n_embd), true);
  if (s.is_gemma4()) {
    // Proportional rope of the global layers: the first partial_rotary of the pairs rotate
    // (factor 1), the rest keep angle ~0 (factor 1e30), as the converter synthesises it.
    std::vector<float> ff(static_cast<size_t>(s.head_dim / 2), 1e30f);
    const auto n_rotated = static_cast<size_t>(static_cast<float>(s.head_dim) * s.g4.partial_rotary / 2);
    for (size_t i = 0; i < n_rotated; ++i) ff[i] = 1.0f;
    bytes("rope_freqs.weight", {s.head_dim / 2}, ff);
    // token_embd is also the (tied) output head: read whole by a decode token, and of RMS
    // logit_std / sqrt(n_embd) so that the logits (before the softcap of 30) have a std of
    // logit_std (the residual stream is normed everywhere, so the embeddings' scale is free).
    const float ta = o.logit_std * inv_sqrt(s.n_embd) * std::sqrt(3.0f);
    for (Planned& t : out)
      if (t.name == "token_embd.weight") t.read_fraction = 1.0, t.lo = -ta, t.hi = ta;
  }
  for (int64_t il = 0; il < s.n_layer && s.is_gemma4(); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const bool global = s.g4_global(il);
    const int64_t hd = global ? s.head_dim : s.g4.head_dim_swa;
    const int64_t nkv = global ? s.g4.n_head_kv_global : s.n_head_kv;
    const int64_t qd = s.n_head * hd, kvd = nkv * hd;
    uniform(p + "attn_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    weight(p + "attn_q", s.quant, {s.n_embd, qd}, inv_sqrt(s.n_embd), true);
    weight(p + "attn_k", s.quant, {s.n_embd, kvd}, inv_sqrt(s.n_embd), true);
    if (!global) weight(p + "attn_v", s.quant, {s.n_embd, kvd}, inv_sqrt(s.n_embd), true);  // global: V = K
    uniform(p + "attn_q_norm.weight", GgmlType::F32, {hd}, 0.8f, 1.2f);
    uniform(p + "attn_k_norm.weight", GgmlType::F32, {hd}, 0.8f, 1.2f);
    weight(p + "attn_output", s.quant, {qd, s.n_embd}, inv_sqrt(qd), true);
    uniform(p + "post_attention_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    uniform(p + "layer_output_scale.weight", GgmlType::F32, {1}, 0.5f, 1.0f);
    uniform(p + "ffn_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    weight(p + "ffn_gate", s.quant, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd), true);
    weight(p + "ffn_up", s.quant, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd), true);
    weight(p + "ffn_down", s.quant, {s.n_ff, s.n_embd}, inv_sqrt(s.n_ff), true);
    uniform(p + "post_ffw_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    weight(p + "ffn_gate_inp", s.router, {s.n_embd, s.n_expert}, 2.5f, false);  // input is RMS 1/sqrt(n_embd)
    uniform(p + "ffn_gate_inp.scale", GgmlType::F32, {s.n_embd}, 0.5f, 1.5f);
    uniform(p + "pre_ffw_norm_2.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    uniform(p + "post_ffw_norm_1.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    uniform(p + "post_ffw_norm_2.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    const double used = static_cast<double>(s.n_expert_used) / static_cast<double>(s.n_expert);
    weight(p + "ffn_gate_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true, used);
    weight(p + "ffn_up_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true, used);
    weight(p + "ffn_down_exps", s.quant, {s.n_ff_exp, s.n_embd, s.n_expert}, inv_sqrt(s.n_ff_exp), true, used);
  }
  for (int64_t il = 0; il < s.n_layer && s.is_qwen35(); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const Shape::Qwen35& q = s.q35;
    const GgmlType mx = q.mixer;
    uniform(p + "attn_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    if ((il + 1) % q.interval != 0) {  // Gated DeltaNet
      const int64_t key_dim = q.n_group * q.d_state, value_dim = q.dt_rank * q.d_state;
      const int64_t conv_dim = 2 * key_dim + value_dim;
      weight(p + "attn_qkv", mx, {s.n_embd, conv_dim}, inv_sqrt(s.n_embd), true);
      weight(p + "attn_gate", mx, {s.n_embd, value_dim}, inv_sqrt(s.n_embd), true);
      uniform(p + "ssm_conv1d.weight", GgmlType::F32, {q.d_conv, conv_dim}, -0.5f, 0.5f);
      uniform(p + "ssm_dt.bias", GgmlType::F32, {q.dt_rank}, -1.0f, 1.0f);
      uniform(p + "ssm_a", GgmlType::F32, {q.dt_rank}, -8.0f, -0.5f);  // -exp(A_log)
      weight(p + "ssm_beta", mx, {s.n_embd, q.dt_rank}, inv_sqrt(s.n_embd), true);
      weight(p + "ssm_alpha", mx, {s.n_embd, q.dt_rank}, inv_sqrt(s.n_embd), true);
      uniform(p + "ssm_norm.weight", GgmlType::F32, {q.d_state}, 0.8f, 1.2f);
      weight(p + "ssm_out", mx, {value_dim, s.n_embd}, branch / 0.6f * inv_sqrt(value_dim), true);
    } else {  // gated attention: attn_q holds the query and its output gate per head
      weight(p + "attn_q", mx, {s.n_embd, 2 * q_dim}, inv_sqrt(s.n_embd), true);
      weight(p + "attn_k", mx, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd), true);
      weight(p + "attn_v", mx, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd), true);
      uniform(p + "attn_q_norm.weight", GgmlType::F32, {s.head_dim}, 0.8f, 1.2f);
      uniform(p + "attn_k_norm.weight", GgmlType::F32, {s.head_dim}, 0.8f, 1.2f);
      weight(p + "attn_output", mx, {q_dim, s.n_embd}, branch / 0.5f * inv_sqrt(q_dim), true);
    }
    uniform(p + "post_attention_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    weight(p + "ffn_gate_inp", s.router, {s.n_embd, s.n_expert}, 2.5f * inv_sqrt(s.n_embd), false);
    const double used = static_cast<double>(s.n_expert_used) / static_cast<double>(s.n_expert);
    weight(p + "ffn_gate_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true, used);
    weight(p + "ffn_up_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd), true, used);
    weight(p + "ffn_down_exps", s.quant, {s.n_ff_exp, s.n_embd, s.n_expert}, branch / 0.6f * inv_sqrt(s.n_ff_exp),
           true, used);
    weight(p + "ffn_gate_inp_shexp", GgmlType::F32, {s.n_embd}, inv_sqrt(s.n_embd), false);
    weight(p + "ffn_gate_shexp", s.quant, {s.n_embd, q.n_ff_shexp}, inv_sqrt(s.n_embd), true);
    weight(p + "ffn_up_shexp", s.quant, {s.n_embd, q.n_ff_shexp}, inv_sqrt(s.n_embd), true);
    weight(p + "ffn_down_shexp", s.quant, {q.n_ff_shexp, s.n_embd}, branch / 0.6f * inv_sqrt(q.n_ff_shexp), true);
  }
  for (int64_t il = 0; il < s.n_layer && !s.is_qwen35() && !s.is_gemma4(); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    uniform(p + "attn_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    weight(p + "attn_q", s.quant, {s.n_embd, q_dim}, inv_sqrt(s.n_embd), true);
    weight(p + "attn_k", s.quant, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd), true);
    weight(p + "attn_v", s.quant, {s.n_embd, kv_dim}, inv_sqrt(s.n_embd), true);
    // The attention output has about the RMS of v (a convex mix of v rows, ~1 early on).
    weight(p + "attn_output", s.quant, {q_dim, s.n_embd}, branch * inv_sqrt(q_dim), true);
    if (s.qk_norm) {
      uniform(p + "attn_q_norm.weight", GgmlType::F32, {s.head_dim}, 0.8f, 1.2f);
      uniform(p + "attn_k_norm.weight", GgmlType::F32, {s.head_dim}, 0.8f, 1.2f);
    }
    uniform(p + "ffn_norm.weight", GgmlType::F32, {s.n_embd}, 0.8f, 1.2f);
    // silu(g) * u of unit-RMS g, u has RMS ~0.6, hence down's 1/0.6.
    if (!moe) {
      weight(p + "ffn_gate", s.quant, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd), true);
      weight(p + "ffn_up", s.quant, {s.n_embd, s.n_ff}, inv_sqrt(s.n_embd), true);
      weight(p + "ffn_down", s.quant, {s.n_ff, s.n_embd}, branch / 0.6f * inv_sqrt(s.n_ff), true);
    } else {
      // Router logits with a std of ~2.5 spread the tokens over the experts.
      weight(p + "ffn_gate_inp", s.router, {s.n_embd, s.n_expert}, 2.5f * inv_sqrt(s.n_embd),
             false);
      const double used = static_cast<double>(s.n_expert_used) / static_cast<double>(s.n_expert);
      weight(p + "ffn_gate_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd),
             true, used);
      weight(p + "ffn_up_exps", s.quant, {s.n_embd, s.n_ff_exp, s.n_expert}, inv_sqrt(s.n_embd),
             true, used);
      weight(p + "ffn_down_exps", s.quant, {s.n_ff_exp, s.n_embd, s.n_expert},
             branch / 0.6f * inv_sqrt(s.n_ff_exp), true, used);
    }
  }
  return out;
}

// ---- random blocks ------------------------------------------------------------------------
// Each filler writes `n_rows` rows starting at global row `row0` (rows of all matrices
// counted together) of tensor `t` into dst.

constexpr float kNib4Rms = 4.6098f;  // RMS of (q - 7.5), q uniform in 0..15
constexpr float kInt8Rms = 73.616f;  // RMS of a uniform integer in [-127, 127]

float matrix_rms(const Planned& t, int64_t row) {
  const float s2 = t.s2.empty() ? 1.0f : t.s2[static_cast<size_t>(row / t.rows_per_matrix())];
  return t.rms / s2;
}

// 16 UE4M3 block-scale codes spread over target * 2^u, u in [-0.5, 0.5] (real block
// scales follow the local amax, so they vary from block to block), normalised so that
// their mean square is target^2.
std::array<uint8_t, 16> e4m3_choices(float target) {
  float ms = 0;
  for (int i = 0; i < 16; ++i)
    ms += std::exp2(2.0f * (static_cast<float>(i) - 7.5f) / 15.0f) / 16.0f;
  std::array<uint8_t, 16> c{};
  for (int i = 0; i < 16; ++i) {
    const float v = target / std::sqrt(ms) * std::exp2((static_cast<float>(i) - 7.5f) / 15.0f);
    c[static_cast<size_t>(i)] = std::max<uint8_t>(1, ft::quant::e4m3_encode_rne(v));
  }
  return c;
}

void fill_nvfp4(const Planned& t, int64_t row0, int64_t n_rows, uint8_t* dst, Rng& rng) {
  const int64_t blocks = t.cols() / 64;
  int64_t cur_m = -1;
  std::array<uint8_t, 16> choice{};
  for (int64_t r = row0; r < row0 + n_rows; ++r) {
    const int64_t m = t.s2.empty() ? 0 : r / t.rows_per_matrix();
    if (m != cur_m) {
      choice = e4m3_choices(matrix_rms(t, r) / kE2m1Rms);
      cur_m = m;
    }
    for (int64_t b = 0; b < blocks; ++b, dst += 36) {
      const uint64_t sc = rng.next_u64();
      for (int i = 0; i < 4; ++i) dst[i] = choice[(sc >> (4 * i)) & 15];
      for (int i = 0; i < 4; ++i) {
        const uint64_t q = rng.next_u64();
        std::memcpy(dst + 4 + 8 * i, &q, 8);
      }
    }
  }
}

void fill_mxfp4(const Planned& t, int64_t row0, int64_t n_rows, uint8_t* dst, Rng& rng) {
  const int64_t blocks = t.cols() / 32;
  for (int64_t r = row0; r < row0 + n_rows; ++r) {
    // value = E2M1 * 2^(e - 127). Per block e = c or c + 1 (c = floor(t)), c + 1 with
    // probability p = (4^(t - c) - 1) / 3, so that the mean square of 2^(e - 127) is 4^t.
    const double t2 = std::log2(static_cast<double>(matrix_rms(t, r)) / kE2m1Rms);
    const double c = std::floor(t2), p = (std::exp2(2 * (t2 - c)) - 1) / 3;
    const uint64_t p_fix = static_cast<uint64_t>(p * 4294967296.0);
    for (int64_t b = 0; b < blocks; ++b, dst += 17) {
      const uint64_t a = rng.next_u64();
      const int e = 127 + static_cast<int>(c) + ((a & 0xFFFFFFFFu) < p_fix ? 1 : 0);
      dst[0] = static_cast<uint8_t>(std::clamp(e, 1, 254));
      const uint64_t q0 = rng.next_u64(), q1 = rng.next_u64();
      std::memcpy(dst + 1, &q0, 8);
      std::memcpy(dst + 9, &q1, 8);
    }
  }
}

// Q4_K: value = d*sc*q - dmin*m. With dmin = 7.5*d and m = sc per sub-block, the weight
// is d*sc*(q - 7.5): zero mean, and sc in 32..63 varies the sub-block magnitude.
void fill_q4_k(const Planned& t, int64_t row0, int64_t n_rows, uint8_t* dst, Rng& rng) {
  const int64_t blocks = t.cols() / 256;
  for (int64_t r = row0; r < row0 + n_rows; ++r) {
    const float d = matrix_rms(t, r) / (kNib4Rms * 48.5f);  // 48.5 = RMS of 32..63
    const uint16_t dh = ft::f32_to_f16(d), mh = ft::f32_to_f16(7.5f * d);
    for (int64_t b = 0; b < blocks; ++b, dst += 144) {
      std::memcpy(dst, &dh, 2);
      std::memcpy(dst + 2, &mh, 2);
      uint8_t sc[8];
      const uint64_t a = rng.next_u64();
      for (int j = 0; j < 8; ++j) sc[j] = static_cast<uint8_t>(32 + ((a >> (5 * j)) & 31));
      uint8_t* s = dst + 4;  // ggml's 12-byte packing of 8 six-bit (sc, m) pairs
      for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));  // m = sc
        s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((sc[j + 4] & 15) << 4));
      }
      for (int i = 0; i < 16; ++i) {
        const uint64_t q = rng.next_u64();
        std::memcpy(dst + 16 + 8 * i, &q, 8);
      }
    }
  }
}

void fill_q8_0(const Planned& t, int64_t row0, int64_t n_rows, uint8_t* dst, Rng& rng) {
  const int64_t blocks = t.cols() / 32;
  for (int64_t r = row0; r < row0 + n_rows; ++r) {
    const uint16_t dh = ft::f32_to_f16(matrix_rms(t, r) / kInt8Rms);
    for (int64_t b = 0; b < blocks; ++b, dst += 34) {
      std::memcpy(dst, &dh, 2);
      for (int i = 0; i < 4; ++i) {
        uint64_t q = rng.next_u64();
        for (int k = 0; k < 8; ++k, q >>= 8)
          dst[2 + 8 * i + k] = static_cast<uint8_t>((q & 0xFF) == 0x80 ? 0x81 : q & 0xFF);
      }
    }
  }
}

// F32 / F16 / BF16 values uniform in [lo, hi].
void fill_float(const Planned& t, float lo, float hi, int64_t n, uint8_t* dst, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = rng.uniform(lo, hi);
    if (t.type == GgmlType::F32) {
      std::memcpy(dst + 4 * i, &v, 4);
    } else {
      const uint16_t h = t.type == GgmlType::BF16 ? ft::f32_to_bf16(v) : ft::f32_to_f16(v);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

void fill_rows(const Planned& t, int64_t row0, int64_t n_rows, uint8_t* dst, uint64_t seed) {
  Rng rng(Rng::mix(seed, ft::testgen::hash_name(t.name.c_str()) ^
                             (static_cast<uint64_t>(row0) * 0x9E3779B97F4A7C15ull)));
  const int64_t rb = ft::row_bytes(t.type, t.cols());
  switch (t.fill) {
    case Fill::kBytes:
      std::memcpy(dst, t.bytes.data() + row0 * rb, static_cast<size_t>(n_rows * rb));
      return;
    case Fill::kUniform:
      fill_float(t, t.lo, t.hi, n_rows * t.cols(), dst, rng);
      return;
    case Fill::kWeight:
      break;
  }
  switch (t.type) {
    case GgmlType::NVFP4:
      fill_nvfp4(t, row0, n_rows, dst, rng);
      return;
    case GgmlType::MXFP4:
      fill_mxfp4(t, row0, n_rows, dst, rng);
      return;
    case GgmlType::Q4_K:
      fill_q4_k(t, row0, n_rows, dst, rng);
      return;
    case GgmlType::Q8_0:
      fill_q8_0(t, row0, n_rows, dst, rng);
      return;
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: {
      // Rows of one matrix share the RMS; a uniform in [-a, a] has RMS a/sqrt(3).
      for (int64_t r = row0; r < row0 + n_rows; ++r) {
        const float a = matrix_rms(t, r) * std::sqrt(3.0f);
        fill_float(t, -a, a, t.cols(), dst + (r - row0) * rb, rng);
      }
      return;
    }
    default:
      ft::fail("ft-bigmodel: no random filler for type {}", ft::type_name(t.type));
  }
}

// ---- metadata --------------------------------------------------------------------------------

uint32_t file_type(GgmlType t) {
  switch (t) {
    case GgmlType::NVFP4:
      return 39;  // MOSTLY_NVFP4
    case GgmlType::MXFP4:
      return 38;  // MOSTLY_MXFP4_MOE
    case GgmlType::Q4_K:
      return 15;  // MOSTLY_Q4_K_M
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::BF16:
      return 32;
    case GgmlType::F16:
      return 1;
    default:
      return 0;
  }
}

// The test generator's byte-level BPE vocab (256 bytes, a few hundred merges, the Qwen
// specials) grown to the real vocab size with unique NORMAL tokens "Ġ<letters>": every
// character is in GPT-2's byte map, so llama.cpp's token-to-piece cache accepts them.
ft::testgen::BpeVocab full_vocab(int64_t n_vocab) {
  auto v = ft::testgen::build_byte_bpe_vocab(400);
  if (static_cast<int64_t>(v.tokens.size()) > n_vocab)
    ft::fail("--vocab {} is smaller than the base BPE vocabulary ({} tokens)", n_vocab,
             v.tokens.size());
  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  const std::string g = "\xC4\xA0";  // U+0120 'Ġ' = the space byte
  for (uint64_t j = 0; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++j) {
    std::string s;
    for (uint64_t x = j;; x = x / 26 - 1) {
      s.insert(s.begin(), static_cast<char>('a' + x % 26));
      if (x < 26) break;
    }
    s = g + s;
    if (!seen.insert(s).second) continue;
    v.tokens.push_back(s);
    v.token_types.push_back(1);
  }
  return v;
}

const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void set_metadata(ft::gguf::Writer& w, const Shape& s) {
  const std::string A = s.arch;
  auto key = [&](const char* k) { return A + "." + k; };
  w.set_string("general.architecture", A);
  w.set_string("general.name", s.name);
  w.set_u32("general.file_type", file_type(s.quant));
  w.set_u32("general.quantization_version", 2);
  w.set_u32(key("context_length"), static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32(key("embedding_length"), static_cast<uint32_t>(s.n_embd));
  w.set_u32(key("block_count"), static_cast<uint32_t>(s.n_layer));
  w.set_u32(key("feed_forward_length"), static_cast<uint32_t>(s.n_ff));
  w.set_u32(key("attention.head_count"), static_cast<uint32_t>(s.n_head));
  w.set_u32(key("attention.head_count_kv"), static_cast<uint32_t>(s.n_head_kv));
  w.set_u32(key("attention.key_length"), static_cast<uint32_t>(s.head_dim));
  w.set_u32(key("attention.value_length"), static_cast<uint32_t>(s.head_dim));
  w.set_u32(key("rope.dimension_count"), static_cast<uint32_t>(s.is_qwen35() ? s.q35.n_rot : s.head_dim));
  w.set_f32(key("attention.layer_norm_rms_epsilon"), s.rms_eps);
  w.set_f32(key("rope.freq_base"), s.rope_base);
  w.set_u32(key("vocab_size"), static_cast<uint32_t>(s.n_vocab));
  if (s.n_expert > 0) {
    w.set_u32(key("expert_count"), static_cast<uint32_t>(s.n_expert));
    w.set_u32(key("expert_used_count"), static_cast<uint32_t>(s.n_expert_used));
    w.set_u32(key("expert_feed_forward_length"), static_cast<uint32_t>(s.n_ff_exp));
  }
  if (s.is_qwen35()) {
    const Shape::Qwen35& q = s.q35;
    w.set_i32_array(key("rope.dimension_sections"), q.sections);
    w.set_u32(key("full_attention_interval"), static_cast<uint32_t>(q.interval));
    w.set_u32(key("ssm.conv_kernel"), static_cast<uint32_t>(q.d_conv));
    w.set_u32(key("ssm.state_size"), static_cast<uint32_t>(q.d_state));
    w.set_u32(key("ssm.group_count"), static_cast<uint32_t>(q.n_group));
    w.set_u32(key("ssm.time_step_rank"), static_cast<uint32_t>(q.dt_rank));
    w.set_u32(key("ssm.inner_size"), static_cast<uint32_t>(q.dt_rank * q.d_state));
    w.set_u32(key("expert_shared_feed_forward_length"), static_cast<uint32_t>(q.n_ff_shexp));
  }
  if (s.is_gemma4()) {  // spec gemma4.md §1 (the generic head_count_kv becomes the per-layer array)
    const Shape::Gemma4& g = s.g4;
    std::vector<uint32_t> kv;
    std::vector<bool> swa;
    for (int64_t il = 0; il < s.n_layer; ++il) {
      swa.push_back(!s.g4_global(il));
      kv.push_back(static_cast<uint32_t>(s.g4_global(il) ? g.n_head_kv_global : s.n_head_kv));
    }
    w.set_u32_array(key("attention.head_count_kv"), kv);
    w.set_bool_array(key("attention.sliding_window_pattern"), swa);
    w.set_u32(key("attention.key_length_swa"), static_cast<uint32_t>(g.head_dim_swa));
    w.set_u32(key("attention.value_length_swa"), static_cast<uint32_t>(g.head_dim_swa));
    w.set_u32(key("attention.sliding_window"), static_cast<uint32_t>(g.n_swa));
    w.set_u32(key("attention.shared_kv_layers"), 0);
    w.set_u32(key("embedding_length_per_layer_input"), 0);
    w.set_f32(key("rope.freq_base_swa"), g.rope_base_swa);
    w.set_u32(key("rope.dimension_count_swa"), static_cast<uint32_t>(g.head_dim_swa));
    w.set_f32(key("final_logit_softcapping"), g.softcap);
  }
  const auto v = full_vocab(s.n_vocab);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", s.tokenizer_pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template", kChatTemplate);
}

// ---- parallel writer ---------------------------------------------------------------------------

struct Chunk {
  size_t tensor;
  int64_t row0, n_rows;
  uint64_t offset, nbytes;
};

// ~16 MiB of whole rows: large sequential pwrites, and enough chunks to keep 16 cores busy
// on the smallest preset tensor stacks. Depends on the row size only (never on --threads),
// so the random streams and hence the file do not either.
constexpr uint64_t kChunkBytes = 16ull << 20;

class Progress {
 public:
  explicit Progress(uint64_t total)
      : total_(total), tty_(isatty(STDERR_FILENO) != 0), t0_(clock::now()) {}
  void show(uint64_t done, bool final = false) {
    const double s = std::chrono::duration<double>(clock::now() - t0_).count();
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    const int pct = static_cast<int>(frac * 100);
    if (!tty_ && !final && pct < next_pct_) return;  // logs: one line per 10%
    next_pct_ = pct / 10 * 10 + 10;
    const int w = 30, filled = static_cast<int>(frac * w);
    const double rate = s > 0 ? static_cast<double>(done) / s / 1e9 : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / 1e9 / rate : 0;
    std::fprintf(stderr, "%s[%s%s] %3d%% %.2f/%.2f GB %.2f GB/s %s %.0fs%s", tty_ ? "\r" : "",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(w - filled), '.').c_str(), pct,
                 static_cast<double>(done) / 1e9, static_cast<double>(total_) / 1e9, rate,
                 final ? "in" : "eta", final ? s : eta, tty_ && !final ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  using clock = std::chrono::steady_clock;
  uint64_t total_;
  bool tty_;
  clock::time_point t0_;
  int next_pct_ = 0;
};

void write_model(const std::string& path, const ft::gguf::Writer& w, const std::vector<Planned>& ts,
                 uint64_t seed, int n_threads, bool quiet) {
  const auto layout = w.layout();
  std::vector<Chunk> chunks;
  uint64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    const uint64_t rb = static_cast<uint64_t>(ft::row_bytes(t.type, t.cols()));
    const int64_t per = static_cast<int64_t>(std::max<uint64_t>(1, kChunkBytes / rb));
    for (int64_t r = 0; r < t.rows(); r += per) {
      const int64_t n = std::min(per, t.rows() - r);
      chunks.push_back(Chunk{i, r, n, layout.offsets[i] + static_cast<uint64_t>(r) * rb,
                             static_cast<uint64_t>(n) * rb});
      total += static_cast<uint64_t>(n) * rb;
    }
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) ft::fail("{}: cannot open for writing: {}", tmp, std::strerror(errno));
  auto check_io = [&](bool ok, const char* what) {
    if (!ok) {
      const int e = errno;
      ::close(fd);
      std::remove(tmp.c_str());
      ft::fail("{}: {} failed: {}", tmp, what, std::strerror(e));
    }
  };
  // The size first: the padding between tensors stays a hole that reads as zeros.
  check_io(::ftruncate(fd, static_cast<off_t>(layout.file_size)) == 0, "ftruncate");
  check_io(::pwrite(fd, layout.head.data(), layout.head.size(), 0) ==
               static_cast<ssize_t>(layout.head.size()),
           "pwrite (header)");

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<int> err{0};
  auto worker = [&] {
    std::vector<uint8_t> buf;
    for (size_t c; err.load() == 0 && (c = next.fetch_add(1)) < chunks.size();) {
      const Chunk& ch = chunks[c];
      buf.resize(ch.nbytes);
      fill_rows(ts[ch.tensor], ch.row0, ch.n_rows, buf.data(), seed);
      for (uint64_t off = 0; off < ch.nbytes;) {
        const ssize_t n =
            ::pwrite(fd, buf.data() + off, ch.nbytes - off, static_cast<off_t>(ch.offset + off));
        if (n <= 0) {
          err.store(n < 0 ? errno : EIO);
          return;
        }
        off += static_cast<uint64_t>(n);
      }
      done.fetch_add(ch.nbytes);
    }
  };
  Progress bar(total);
  std::vector<std::thread> pool;
  for (int i = 0; i < n_threads; ++i) pool.emplace_back(worker);
  while (!quiet && done.load() < total && err.load() == 0) {
    bar.show(done.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  for (auto& t : pool) t.join();
  if (err.load() != 0) {
    errno = err.load();
    check_io(false, "pwrite");
  }
  if (!quiet) bar.show(done.load(), true);
  check_io(::close(fd) == 0, "close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    ft::fail("{}: cannot rename {} to it: {}", path, tmp, std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Write a realistic-size GGUF model with random but valid weights (Llama-3.1-8B / "
      "Qwen3-30B-A3B shapes)"};
  std::string preset_name, out, type_name;
  Options o;
  int64_t layers = -1, vocab = -1, experts = -1;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quiet = false;
  std::vector<float> s2_range;
  app.add_option("--preset", preset_name,
                 "llama8b-nvfp4 | qwen3moe-30b-nvfp4 | qwen36-35b-a3b-nvfp4 | gemma4-26b-a4b-nvfp4")
      ->required();
  bool plan_only = false;
  app.add_option("--out,-o", out, "output GGUF (required unless --plan)");
  app.add_flag("--plan", plan_only, "print the sizes and bytes per token only, write nothing");
  app.add_option("--layers", layers, "number of layers (default: the real model's)");
  app.add_option("--type", type_name,
                 "type of the attention, MLP and expert weights: nvfp4 (default), mxfp4, q4_K, "
                 "q8_0, bf16, f16");
  app.add_option(
      "--experts", experts,
      "MoE presets: number of experts (default: the real model's; small values for tests)");
  app.add_option("--vocab", vocab,
                 "vocabulary size (default: the real model's; small values for tests)");
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--s2", s2_range, "range of the NVFP4 second-level scales (default 0.5 2)")
      ->expected(2);
  app.add_option("--threads,-t", n_threads, "fill threads (default: all cores)");
  app.add_flag("--quiet,-q", quiet, "no progress bar");
  CLI11_PARSE(app, argc, argv);

  try {
    Shape s = preset(preset_name);
    if (layers >= 0) {
      if (layers < 1) ft::fail("--layers {}: expected at least 1", layers);
      s.n_layer = layers;
    }
    if (vocab >= 0) s.n_vocab = vocab;
    if (experts >= 0) {
      if (s.n_expert == 0) ft::fail("--experts: preset {} is not a MoE model", preset_name);
      if (experts < 1) ft::fail("--experts {}: expected at least 1", experts);
      s.n_expert = experts;
      s.n_expert_used = std::min(s.n_expert_used, experts);
    }
    if (!type_name.empty()) {
      const auto t = ft::ggml_type_from_name(type_name);
      const GgmlType ok[] = {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q4_K,
                             GgmlType::Q8_0,  GgmlType::BF16,  GgmlType::F16};
      if (!t || std::find(std::begin(ok), std::end(ok), *t) == std::end(ok))
        ft::fail("--type '{}': expected nvfp4, mxfp4, q4_K, q8_0, bf16 or f16", type_name);
      s.quant = *t;
    }
    if (!s2_range.empty()) {
      if (!(s2_range[0] > 0 && s2_range[1] >= s2_range[0]))
        ft::fail("--s2 {} {}: expected 0 < lo <= hi", s2_range[0], s2_range[1]);
      o.s2_lo = s2_range[0], o.s2_hi = s2_range[1];
    }
    if (n_threads < 1) ft::fail("--threads {}: expected at least 1", n_threads);
    if (out.empty() && !plan_only) ft::fail("--out: an output file is required (or --plan)");

    const auto ts = plan_tensors(s, o);
    ft::gguf::Writer w;
    set_metadata(w, s);
    uint64_t bytes_per_token = 0, weight_bytes = 0;
    int n_scales = 0;
    float s2_min = 0, s2_max = 0;
    for (const auto& t : ts) {
      for (float v : t.s2) {
        s2_min = s2_min == 0 ? v : std::min(s2_min, v);
        s2_max = std::max(s2_max, v);
      }
      w.add_tensor_stream(t.name, t.type, t.ne, nullptr);
      const uint64_t nb =
          static_cast<uint64_t>(ft::row_bytes(t.type, t.cols())) * static_cast<uint64_t>(t.rows());
      weight_bytes += nb;
      bytes_per_token +=
          static_cast<uint64_t>(std::llround(static_cast<double>(nb) * t.read_fraction));
      n_scales += t.name.ends_with(".scale");
    }
    if (!plan_only) write_model(out, w, ts, o.seed, n_threads, quiet);
    const uint64_t file_bytes = w.layout().file_size;
    fmt::print("{}: {}, {} layers, {} tensors ({} .scale), {} weights, vocab {}\n",
               plan_only ? preset_name : out, s.arch, s.n_layer, ts.size(), n_scales,
               ft::type_name(s.quant), s.n_vocab);
    if (n_scales > 0) fmt::print("NVFP4 second-level scales {:.4g} .. {:.4g}\n", s2_min, s2_max);
    fmt::print("file_bytes {}\n", file_bytes);
    fmt::print("weight_bytes {}\n", weight_bytes);
    fmt::print("bytes_per_token {}\n", bytes_per_token);
  } catch (const ft::Error& e) {
    std::fprintf(stderr, "ft-bigmodel: %s\n", e.what());
    return 2;
  }
  return 0;
}
