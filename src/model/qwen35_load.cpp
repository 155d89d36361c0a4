#include "model/qwen35_load.h"

#include <fmt/format.h>

#include <array>
#include <limits>

#include "core/error.h"
#include "engine/conv1d.h"

namespace ft::model {
namespace {

std::string blk(int64_t il, const char* role) { return fmt::format("blk.{}.{}", il, role); }

// rope.dimension_sections: up to 4 ints (t, h, w, e), missing ones 0.
std::array<int64_t, 4> read_sections(const gguf::File& f, const std::string& key) {
  const auto v = f.get_int_array(key);
  if (!v) fail("{}: missing metadata key {} (qwen35 needs the rope sections)", f.path(), key);
  if (v->empty() || v->size() > 4)
    fail("{}: metadata key {} has {} values, expected 1 to 4", f.path(), key, v->size());
  std::array<int64_t, 4> s{0, 0, 0, 0};
  for (size_t i = 0; i < v->size(); ++i) {
    if ((*v)[i] < 0) fail("{}: metadata key {} has a negative section {}", f.path(), key, (*v)[i]);
    s[i] = (*v)[i];
  }
  if (s[0] + s[1] + s[2] <= 0) fail("{}: metadata key {}: the t, h and w sections are all 0", f.path(), key);
  return s;
}

// llama.cpp's IMROPE for text: positions (t, h, w) are the token position and e is 0. Pair
// i takes its position from its sector i mod (s0+s1+s2+s3), interleaved t, h, w; pairs
// that fall to e turn by angle 0, which a divisor of +inf gives (theta / inf = 0).
std::vector<float> imrope_pair_div(const std::array<int64_t, 4>& s, int n_rot) {
  const int64_t sect_dims = s[0] + s[1] + s[2] + s[3];
  std::vector<float> div(static_cast<size_t>(n_rot / 2), 1.0f);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const int64_t sec = i % sect_dims;
    const bool by_pos = (sec % 3 == 1 && sec < 3 * s[1]) || (sec % 3 == 2 && sec < 3 * s[2]) ||
                        (sec % 3 == 0 && sec < 3 * s[0]);
    if (!by_pos) div[i] = std::numeric_limits<float>::infinity();
  }
  return div;
}

// attention.recurrent_layers (bool per block) or, without it, full_attention_interval I:
// layers I-1, 2I-1, ... are full attention, the rest Gated DeltaNet.
std::vector<uint8_t> read_layer_types(const gguf::File& f, const std::string& p, int64_t n_layer) {
  std::vector<uint8_t> rec(static_cast<size_t>(n_layer), 0);
  const std::string key = p + "attention.recurrent_layers";
  if (const gguf::Value* v = f.find(key)) {
    if (!v->is_array() || v->elem_type != gguf::ValueType::BOOL || static_cast<int64_t>(v->arr.size()) < n_layer)
      fail("{}: metadata key {} must be an array of block_count bools", f.path(), key);
    for (int64_t il = 0; il < n_layer; ++il) rec[il] = v->arr[il].b ? 1 : 0;
    return rec;
  }
  const int64_t interval = f.get_int(p + "full_attention_interval").value_or(4);
  if (interval <= 0) fail("{}: metadata key {}full_attention_interval is {}, expected > 0", f.path(), p, interval);
  for (int64_t il = 0; il < n_layer; ++il) rec[il] = (il + 1) % interval != 0 ? 1 : 0;
  return rec;
}

}  // namespace

void load_qwen35_hparams(const gguf::File& f, Model& m) {
  HParams& hp = m.hp;
  const std::string& path = f.path();
  const std::string p = hp.arch + ".";
  if (hp.head_dim_k != hp.head_dim_v)
    fail("{}: {} needs attention.key_length == value_length, got {} and {}", path, hp.arch, hp.head_dim_k,
         hp.head_dim_v);
  hp.rope.type = RopeType::kNeox;  // IMROPE rotates NEOX pairs (i, i + n_rot/2)
  m.rope_pair_div = imrope_pair_div(read_sections(f, p + "rope.dimension_sections"), hp.rope.n_rot);
  hp.attn_gated_q = true;
  hp.recurrent = read_layer_types(f, p, hp.n_layer);

  auto req = [&](const char* k) { return static_cast<int64_t>(f.require_uint(p + k)); };
  engine::DeltaNetShape& s = m.gdn_shape;
  s.d_conv = req("ssm.conv_kernel");
  s.d_head = req("ssm.state_size");
  s.n_k_heads = req("ssm.group_count");
  s.n_v_heads = req("ssm.time_step_rank");
  s.eps = hp.rms_eps;
  const int64_t d_inner = req("ssm.inner_size");
  if (s.d_conv < 1 || s.d_conv > engine::kMaxConvKernel)
    fail("{}: {}ssm.conv_kernel is {}, expected 1 to {}", path, p, s.d_conv, engine::kMaxConvKernel);
  if (s.d_head <= 0 || s.n_k_heads <= 0 || s.n_v_heads <= 0 || s.n_v_heads % s.n_k_heads != 0)
    fail("{}: {}ssm.time_step_rank {} must be a positive multiple of ssm.group_count {} (state_size {})", path, p,
         s.n_v_heads, s.n_k_heads, s.d_head);
  if (d_inner != s.n_v_heads * s.d_head)
    fail("{}: {}ssm.inner_size is {}, expected time_step_rank * state_size = {} (value head = key head size)",
         path, p, d_inner, s.n_v_heads * s.d_head);
}

void load_qwen35_mixer(TensorLoader& tl, Model& m, int64_t il) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd;
  L.attn_norm = tl.get_f32(blk(il, "attn_norm.weight"), {n_embd});
  if (!hp.is_recurrent(il)) {
    const int64_t hd = hp.head_dim_k, qg_dim = 2 * hp.n_head[il] * hd, kv_dim = hp.n_head_kv[il] * hd;
    if (tl.has(blk(il, "attn_qkv.weight"))) {
      L.qkv.add(tl.get_scaled(blk(il, "attn_qkv"), {n_embd, qg_dim + 2 * kv_dim}));
    } else {
      L.qkv.add(tl.get_scaled(blk(il, "attn_q"), {n_embd, qg_dim}));
      L.qkv.add(tl.get_scaled(blk(il, "attn_k"), {n_embd, kv_dim}));
      L.qkv.add(tl.get_scaled(blk(il, "attn_v"), {n_embd, kv_dim}));
    }
    L.attn_q_norm = tl.get_f32(blk(il, "attn_q_norm.weight"), {hd});
    L.attn_k_norm = tl.get_f32(blk(il, "attn_k_norm.weight"), {hd});
    L.wo.add(tl.get_scaled(blk(il, "attn_output"), {hp.n_head[il] * hd, n_embd}));
    return;
  }
  const engine::DeltaNetShape& s = m.gdn_shape;
  const int64_t Hv = s.n_v_heads, value_dim = s.value_dim(), conv_dim = s.conv_dim();
  L.gdn_in.add(tl.get_scaled(blk(il, "attn_qkv"), {n_embd, conv_dim}));
  L.gdn_in.add(tl.get_scaled(blk(il, "attn_gate"), {n_embd, value_dim}));
  L.gdn_in.add(tl.get_scaled(blk(il, "ssm_beta"), {n_embd, Hv}));
  L.gdn_in.add(tl.get_scaled(blk(il, "ssm_alpha"), {n_embd, Hv}));
  L.gdn.conv1d = tl.get_f32(blk(il, "ssm_conv1d.weight"), {s.d_conv, conv_dim}).f32();
  L.gdn.dt_bias = tl.get_f32(blk(il, "ssm_dt.bias"), {Hv}).f32();
  L.gdn.a = tl.get_f32(blk(il, "ssm_a"), {Hv}).f32();
  L.gdn.norm = tl.get_f32(blk(il, "ssm_norm.weight"), {s.d_head}).f32();
  L.gdn_out.add(tl.get_scaled(blk(il, "ssm_out"), {value_dim, n_embd}));
}

void ignore_mtp_layers(TensorLoader& tl, const Model& m) {
  for (const auto& t : tl.file().tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    const int64_t il = std::strtoll(t.name.c_str() + 4, nullptr, 10);
    if (il >= m.hp.n_layer) tl.ignore(t.name);
  }
}

}  // namespace ft::model
