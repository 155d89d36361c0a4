#include "testgen/gen_qwen35.h"

#include <cmath>

#include "core/error.h"
#include "testgen/tensor_gen.h"

namespace ft::testgen {
namespace {

float rsqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

}  // namespace

bool is_qwen35(Arch a) { return a == Arch::kQwen35 || a == Arch::kQwen35Moe; }

void write_qwen35_keys(const ModelSpec& spec, gguf::Writer& w) {
  const auto& q = spec.q35;
  const std::string A(arch_name(spec.arch));
  auto key = [&](const char* k) { return A + "." + k; };
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  if (q.n_k_heads <= 0 || q.n_v_heads % q.n_k_heads != 0 || q.full_attn_interval <= 0)
    fail("testgen: invalid qwen35 spec: n_v_heads {} must be a multiple of n_k_heads {}, interval {} > 0",
         q.n_v_heads, q.n_k_heads, q.full_attn_interval);
  w.set_u32(key("rope.dimension_count"), u32(q.rope_dim > 0 ? q.rope_dim : spec.head_dim));
  w.set_i32_array(key("rope.dimension_sections"), {q.sections[0], q.sections[1], q.sections[2], q.sections[3]});
  w.set_u32(key("full_attention_interval"), u32(q.full_attn_interval));
  w.set_u32(key("ssm.conv_kernel"), u32(q.d_conv));
  w.set_u32(key("ssm.state_size"), u32(q.d_head));
  w.set_u32(key("ssm.group_count"), u32(q.n_k_heads));
  w.set_u32(key("ssm.time_step_rank"), u32(q.n_v_heads));
  w.set_u32(key("ssm.inner_size"), u32(q.n_v_heads * q.d_head));
  if (spec.arch == Arch::kQwen35Moe) {
    w.set_u32(key("expert_feed_forward_length"), u32(spec.n_ff_exp));
    w.set_u32(key("expert_shared_feed_forward_length"), u32(q.n_ff_shexp));
  }
}

void add_qwen35_layer(const ModelSpec& spec, int64_t il, TensorGen& b, const LayerStats& st) {
  const auto& q = spec.q35;
  const uint64_t seed = spec.seed;
  const int64_t n_embd = spec.n_embd, hd = spec.head_dim, d = q.d_head;
  const int64_t q_dim = spec.n_head * hd, kv_dim = spec.n_head_kv * hd;
  const int64_t key_dim = q.n_k_heads * d, value_dim = q.n_v_heads * d, conv_dim = 2 * key_dim + value_dim;
  const std::string p = "blk." + std::to_string(il) + ".";
  const float sd_in = st.sd_in, r_branch = st.r_branch;

  // Norm weights as the converter leaves them (+1 already added): around 1.
  b.f32(p + "attn_norm.weight", {n_embd}, uniform_vec(seed, p + "attn_norm", n_embd, 0.8f, 1.2f));
  if ((il + 1) % q.full_attn_interval == 0) {
    // Per head: query rows then gate rows. The sigmoid gate halves the output on average.
    const float a_v = st.spread(-1, 1.5f);
    b.weight(p + "attn_q.weight", n_embd, 2 * q_dim, 1, Role::kAttn, sd_in, {st.spread(-1, 1)}, true);
    b.weight(p + "attn_k.weight", n_embd, kv_dim, 1, Role::kAttn, sd_in, {st.spread(-1, 1)}, true);
    b.weight(p + "attn_v.weight", n_embd, kv_dim, 1, Role::kAttn, sd_in, {a_v}, true);
    b.weight(p + "attn_output.weight", q_dim, n_embd, 1, Role::kAttn, 2.0f * r_branch * rsqrt(q_dim), {1.0f / a_v},
             true);
    b.f32(p + "attn_q_norm.weight", {hd}, uniform_vec(seed, p + "attn_q_norm", hd, 0.5f, 1.5f));
    b.f32(p + "attn_k_norm.weight", {hd}, uniform_vec(seed, p + "attn_k_norm", hd, 0.5f, 1.5f));
  } else {
    // q and k are L2-normalised and every value head RMS-normed after the recurrence, so
    // the projection magnitudes only move the conv's SiLU and the gates.
    b.weight(p + "attn_qkv.weight", n_embd, conv_dim, 1, Role::kAttn, sd_in, {st.spread(-0.3f, 0.3f)}, true);
    b.weight(p + "attn_gate.weight", n_embd, value_dim, 1, Role::kAttn, sd_in, {st.spread(-0.3f, 0.3f)}, true);
    b.weight(p + "ssm_beta.weight", n_embd, q.n_v_heads, 1, Role::kAttn, sd_in, {st.spread(-0.3f, 0.3f)}, true);
    b.weight(p + "ssm_alpha.weight", n_embd, q.n_v_heads, 1, Role::kAttn, 0.5f * sd_in, {st.spread(-0.3f, 0.3f)}, true);
    b.f32(p + "ssm_conv1d.weight", {q.d_conv, conv_dim}, uniform_vec(seed, p + "ssm_conv1d", q.d_conv * conv_dim, -0.8f, 0.8f));
    // Decay exp(softplus(alpha + dt) * a) between ~0.1 and ~0.95 per step.
    b.f32(p + "ssm_dt.bias", {q.n_v_heads}, uniform_vec(seed, p + "ssm_dt", q.n_v_heads, -1.0f, 1.0f));
    b.f32(p + "ssm_a", {q.n_v_heads}, uniform_vec(seed, p + "ssm_a", q.n_v_heads, -1.5f, -0.1f));
    b.f32(p + "ssm_norm.weight", {d}, uniform_vec(seed, p + "ssm_norm", d, 0.5f, 1.5f));
    // Gated-norm output: RMS ~ norm weight * silu(z) ~ 0.5.
    b.weight(p + "ssm_out.weight", value_dim, n_embd, 1, Role::kAttn, 2.0f * r_branch * rsqrt(value_dim),
             {st.spread(-0.3f, 0.3f)}, true);
  }
  b.f32(p + "post_attention_norm.weight", {n_embd}, uniform_vec(seed, p + "post_attention_norm", n_embd, 0.8f, 1.2f));

  // silu(g)*u of unit-RMS g, u has RMS ~0.6.
  if (spec.arch == Arch::kQwen35) {
    const float a_up = st.spread(-1, 1.5f);
    b.weight(p + "ffn_gate.weight", n_embd, spec.n_ff, 1, Role::kMlp, sd_in, {st.spread(-0.5f, 0.5f)}, true);
    b.weight(p + "ffn_up.weight", n_embd, spec.n_ff, 1, Role::kMlp, sd_in, {a_up}, true);
    b.weight(p + "ffn_down.weight", spec.n_ff, n_embd, 1, Role::kMlp, r_branch / (0.6f * std::sqrt(float(spec.n_ff))),
             {1.0f / a_up}, true);
    return;
  }
  const int64_t E = spec.n_expert, nf = spec.n_ff_exp, ns = q.n_ff_shexp;
  b.weight(p + "ffn_gate_inp.weight", n_embd, E, 1, Role::kRouter, spec.router_std * sd_in, {}, false);
  std::vector<float> f_up(static_cast<size_t>(E)), f_down(f_up.size()), f_gate(f_up.size());
  for (size_t e = 0; e < f_up.size(); ++e) {
    f_up[e] = st.spread(-1.5f, 1.5f);
    f_down[e] = 1.0f / f_up[e];
    f_gate[e] = st.spread(-0.5f, 0.5f);
  }
  // Routed and shared branches share the residual budget.
  const float r_moe = 0.7f * r_branch;
  if (q.merged_gate_up_exps) {
    // Rows [0, nf) gate, [nf, 2 nf) up in one tensor: no per-expert scale can go with it.
    b.weight(p + "ffn_gate_up_exps.weight", n_embd, 2 * nf, E, Role::kExperts, sd_in, {}, false);
  } else {
    b.weight(p + "ffn_gate_exps.weight", n_embd, nf, E, Role::kExperts, sd_in, f_gate, true);
    b.weight(p + "ffn_up_exps.weight", n_embd, nf, E, Role::kExperts, sd_in, f_up, true);
  }
  b.weight(p + "ffn_down_exps.weight", nf, n_embd, E, Role::kExperts, r_moe / (0.6f * std::sqrt(float(nf))),
           q.merged_gate_up_exps ? std::vector<float>{} : f_down, true);
  const float a_up = st.spread(-1, 1.5f);
  b.weight(p + "ffn_gate_inp_shexp.weight", n_embd, 1, 1, Role::kRouter, 1.5f * sd_in, {}, false);
  b.weight(p + "ffn_gate_shexp.weight", n_embd, ns, 1, Role::kMlp, sd_in, {st.spread(-0.5f, 0.5f)}, true);
  b.weight(p + "ffn_up_shexp.weight", n_embd, ns, 1, Role::kMlp, sd_in, {a_up}, true);
  // The sigmoid gate halves the shared expert on average.
  b.weight(p + "ffn_down_shexp.weight", ns, n_embd, 1, Role::kMlp, 2.0f * r_moe / (0.6f * std::sqrt(float(ns))),
           {1.0f / a_up}, true);
}

}  // namespace ft::testgen
