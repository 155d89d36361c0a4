#include "model/model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "model/check_scales.h"
#include "quant/dequant.h"

namespace ft::model {

extern const Arch kArchLlama;
extern const Arch kArchQwen3;
extern const Arch kArchQwen3Moe;
extern const Arch kArchQwen35;
extern const Arch kArchQwen35Moe;
extern const Arch kArchGemma4;

const std::vector<const Arch*>& architectures() {
  static const std::vector<const Arch*> all = {&kArchLlama, &kArchQwen3, &kArchQwen3Moe, &kArchGemma4, &kArchQwen35, &kArchQwen35Moe};
  return all;
}

namespace {

std::string blk(int64_t il, const char* role) { return fmt::format("blk.{}.{}", il, role); }

// An NVFP4 FFN weight may carry a bias or a scale, not both (llama.cpp asserts the same).
void refuse_bias_with_scale(const gguf::File& f, const ScaledTensor& w, const Tensor& b) {
  if (w && b && w.has_scale && w.w.type == GgmlType::NVFP4)
    fail("{}: '{}' is NVFP4 with both a bias and a .scale, which llama.cpp refuses", f.path(),
         w.w.name);
}

// Reads one byte per page so the weights are resident before the first token (and the
// progress line means something for a big model). Tensor by tensor through their data
// pointers: a Hugging Face directory's weights lie in the checkpoint's mapping, not in the file.
void touch_weights(const gguf::File& f, const LoadOptions& opt) {
  if (!opt.progress) return;
  uint64_t total = 0, done = 0, next_report = 0;
  for (const gguf::TensorInfo& t : f.tensors()) total += t.nbytes;
  volatile uint8_t sink = 0;
  const uint64_t step = 4096, report = 256ull << 20;
  for (const gguf::TensorInfo& t : f.tensors()) {
    for (uint64_t off = 0; off < t.nbytes; off += step) sink = sink + t.data[off];
    done += t.nbytes;
    if (done >= next_report) {
      opt.progress(done, total);
      next_report = done + report;
    }
  }
  opt.progress(total, total);
}

}  // namespace

void load_embeddings_and_head(TensorLoader& tl, Model& m) {
  HParams& hp = m.hp;
  const gguf::TensorInfo* te = tl.file().find_tensor("token_embd.weight");
  if (!te) fail("{}: missing tensor 'token_embd.weight'", tl.file().path());
  if (hp.n_vocab == 0) hp.n_vocab = te->ne[1];
  m.token_embd = tl.get("token_embd.weight", {hp.n_embd, hp.n_vocab});
  if (m.token_embd.type != GgmlType::F32 && !quant::has_ref_dequant(m.token_embd.type))
    fail("{}: token_embd.weight has type {}, which cannot be dequantised", tl.file().path(),
         type_name(m.token_embd.type));
  m.output_norm = tl.get_f32("output_norm.weight", {hp.n_embd});
  const ScaledTensor out = tl.get_scaled("output", {hp.n_embd, hp.n_vocab}, false);
  if (out) {
    m.output.add(out);
  } else {
    if (!quant::matmul_supported(m.token_embd.type))
      fail("{}: tied output uses token_embd.weight of type {}, which has no CPU matmul kernel",
           tl.file().path(), type_name(m.token_embd.type));
    m.output.add(m.token_embd, 1.0f);
  }
}

void load_attention(TensorLoader& tl, Model& m, int64_t il, bool qk_norm) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t q_dim = hp.n_head[il] * hd, kv_dim = hp.n_head_kv[il] * hd;
  L.attn_norm = tl.get_f32(blk(il, "attn_norm.weight"), {n_embd});
  if (tl.has(blk(il, "attn_qkv.weight"))) {
    const int64_t n = q_dim + 2 * kv_dim;
    L.qkv.add(tl.get_scaled(blk(il, "attn_qkv"), {n_embd, n}),
              tl.get_f32(blk(il, "attn_qkv.bias"), {n}, false));
  } else {
    L.qkv.add(tl.get_scaled(blk(il, "attn_q"), {n_embd, q_dim}),
              tl.get_f32(blk(il, "attn_q.bias"), {q_dim}, false));
    L.qkv.add(tl.get_scaled(blk(il, "attn_k"), {n_embd, kv_dim}),
              tl.get_f32(blk(il, "attn_k.bias"), {kv_dim}, false));
    L.qkv.add(tl.get_scaled(blk(il, "attn_v"), {n_embd, kv_dim}),
              tl.get_f32(blk(il, "attn_v.bias"), {kv_dim}, false));
  }
  if (qk_norm) {
    L.attn_q_norm = tl.get_f32(blk(il, "attn_q_norm.weight"), {hd});
    L.attn_k_norm = tl.get_f32(blk(il, "attn_k_norm.weight"), {hd});
  }
  const int64_t o_dim = hp.n_head[il] * hp.head_dim_v;
  L.wo.add(tl.get_scaled(blk(il, "attn_output"), {o_dim, n_embd}),
           hp.arch == "llama" ? tl.get_f32(blk(il, "attn_output.bias"), {n_embd}, false) : Tensor{});
}

void load_dense_ffn(TensorLoader& tl, Model& m, int64_t il, const char* norm) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff[il];
  const bool biases = hp.arch == "llama";
  L.ffn_norm = tl.get_f32(fmt::format("blk.{}.{}.weight", il, norm), {n_embd});
  const ScaledTensor g = tl.get_scaled(blk(il, "ffn_gate"), {n_embd, n_ff});
  const ScaledTensor u = tl.get_scaled(blk(il, "ffn_up"), {n_embd, n_ff});
  const ScaledTensor d = tl.get_scaled(blk(il, "ffn_down"), {n_ff, n_embd});
  const Tensor gb = biases ? tl.get_f32(blk(il, "ffn_gate.bias"), {n_ff}, false) : Tensor{};
  const Tensor ub = biases ? tl.get_f32(blk(il, "ffn_up.bias"), {n_ff}, false) : Tensor{};
  const Tensor db = biases ? tl.get_f32(blk(il, "ffn_down.bias"), {n_embd}, false) : Tensor{};
  refuse_bias_with_scale(tl.file(), g, gb);
  refuse_bias_with_scale(tl.file(), u, ub);
  refuse_bias_with_scale(tl.file(), d, db);
  L.ffn_gate_up.add(g, gb);
  L.ffn_gate_up.add(u, ub);
  L.ffn_down.add(d, db);
}

void load_moe_ffn(TensorLoader& tl, Model& m, int64_t il, bool allow_merged_gate_up,
                  const char* norm) {
  const HParams& hp = m.hp;
  Layer& L = m.layers[il];
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff_exp, E = hp.n_expert;
  L.ffn_norm = tl.get_f32(fmt::format("blk.{}.{}.weight", il, norm), {n_embd});
  L.router.add(tl.get_weight(blk(il, "ffn_gate_inp.weight"), {n_embd, E}), 1.0f);
  engine::ExpertWeights& ew = L.experts;
  ew.n_expert = E;
  ew.n_embd = n_embd;
  ew.n_ff = n_ff;
  if (allow_merged_gate_up && tl.has(blk(il, "ffn_gate_up_exps.weight"))) {
    ew.gate_up = tl.get_experts(blk(il, "ffn_gate_up_exps"), {n_embd, 2 * n_ff, E});
  } else {
    ew.gate = tl.get_experts(blk(il, "ffn_gate_exps"), {n_embd, n_ff, E});
    ew.up = tl.get_experts(blk(il, "ffn_up_exps"), {n_embd, n_ff, E});
  }
  ew.down = tl.get_experts(blk(il, "ffn_down_exps"), {n_ff, n_embd, E});
}

std::unique_ptr<Model> load_model(std::unique_ptr<gguf::File> file, const LoadOptions& opt) {
  auto m = std::make_unique<Model>();
  const gguf::File& f = *file;
  const std::string arch = f.get_string("general.architecture").value_or("");
  for (const Arch* a : architectures())
    if (arch == a->name) m->arch = a;
  if (!m->arch) {
    std::string known;
    for (const Arch* a : architectures()) known += std::string(known.empty() ? "" : ", ") + a->name;
    fail("{}: general.architecture '{}' is not supported (supported: {})", f.path(), arch, known);
  }
  check_scales(f);
  m->hp = read_hparams(f, arch);
  m->layers.resize(static_cast<size_t>(m->hp.n_layer));
  TensorLoader tl(f);
  m->arch->load(tl, *m);
  tl.finish();
  if (opt.moe_backend != "cpu")
    fail("--moe-backend '{}' is not available in this build (cpu)", opt.moe_backend);
  for (auto& L : m->layers)
    if (L.experts.down) L.moe = engine::make_cpu_experts(L.experts);
  touch_weights(f, opt);
  m->file = std::move(file);
  return m;
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& opt) {
  return load_model(open_model_source(path, opt.progress), opt);
}

}  // namespace ft::model
