// A loaded model: hyper-parameters, the mapped file, and per-layer weights prepared as
// engine blocks (Linear projections, expert tensors behind a MoeExperts backend).
// Weights are zero-copy views into the mapping; the Model owns the mapping.
//
// Each architecture is a short builder (model/arch_<name>.cpp): it completes the
// hyper-parameters, declares its tensor table through TensorLoader and names the forward
// function (usually decoder_forward, the shared layer loop in model/decoder.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/deltanet.h"
#include "engine/linear.h"
#include "engine/moe.h"
#include "format/gguf.h"
#include "model/hparams.h"
#include "model/loader.h"
#include "model/tensor.h"

namespace ft::engine {
struct State;
}

namespace ft::model {

struct Layer {
  Tensor attn_norm;            // {n_embd} f32
  engine::Linear qkv;          // rows: q (n_head*hd) | k (n_head_kv*hd) | v (n_head_kv*hd)
  Tensor attn_q_norm;          // {hd} f32, optional (qwen3)
  Tensor attn_k_norm;          // {hd} f32, optional
  engine::Linear wo;           // {q_dim} -> {n_embd}
  Tensor ffn_norm;             // {n_embd} f32
  engine::Linear ffn_gate_up;  // dense: rows gate (n_ff) | up (n_ff)
  engine::Linear ffn_down;     // dense: {n_ff} -> {n_embd}
  engine::Linear router;       // MoE: ffn_gate_inp {n_embd} -> {n_expert}
  engine::ExpertWeights experts;
  std::unique_ptr<engine::MoeExperts> moe;  // null for dense layers
  bool is_moe() const { return moe != nullptr; }

  // qwen35 / qwen35moe (model/qwen35_blocks.h). Gated DeltaNet layers:
  engine::Linear gdn_in;         // {n_embd} -> qkv (conv_dim) | z (value_dim) | beta (H_v) | alpha (H_v)
  engine::DeltaNetWeights gdn;   // conv1d, dt bias, a, norm (f32 views)
  engine::Linear gdn_out;        // ssm_out {value_dim} -> {n_embd}
  // Shared expert beside the routed ones, scaled by sigmoid(ffn_gate_inp_shexp . x):
  engine::Linear ffn_gate_up_shexp;   // rows gate (n_ff_shexp) | up (n_ff_shexp)
  engine::Linear ffn_down_shexp;      // {n_ff_shexp} -> {n_embd}
  engine::Linear ffn_gate_inp_shexp;  // {n_embd} -> 1

  // gemma4 (model/arch_gemma4.cpp): post-norms, V = K without attn_v, MoE beside the MLP,
  // per-layer input gate, residual scale.
  bool v_from_k = false;         // no attn_v: V is the K projection (before the K norm)
  Tensor post_attn_norm;         // {n_embd} f32
  Tensor post_ffw_norm;          // {n_embd} f32
  Tensor pre_ffw_norm_2;         // {n_embd} f32, MoE: norm of the experts' input
  Tensor post_ffw_norm_1;        // {n_embd} f32, MoE: norm of the MLP output
  Tensor post_ffw_norm_2;        // {n_embd} f32, MoE: norm of the experts' output
  Tensor router_in_scale;        // {n_embd} f32, ffn_gate_inp.scale (router input scale)
  engine::Linear pl_inp_gate;    // {n_embd} -> {n_embd_per_layer}
  engine::Linear pl_proj;        // {n_embd_per_layer} -> {n_embd}
  Tensor pl_post_norm;           // {n_embd} f32
  float out_scale = 1.0f;        // layer_output_scale (whole residual stream)
};

struct Model;

// One forward pass over n_tok tokens at positions pos0..: fills logits for the last token
// (or for every token when all_logits) into `logits` (n_vocab floats per row); a null
// `logits` skips the output head (earlier micro-batches of a prompt).
using ForwardFn = void (*)(const Model& m, engine::State& st, const int32_t* tokens,
                           int64_t n_tok, int64_t pos0, float* logits, bool all_logits);

struct Arch {
  const char* name;
  void (*load)(TensorLoader& tl, Model& m);  // hparams completed + tensors declared
  ForwardFn forward;
};

// The architectures this build knows (llama, qwen3, qwen3moe, gemma4).
const std::vector<const Arch*>& architectures();

struct LoadOptions {
  std::string moe_backend = "cpu";
  // Called with (bytes done, bytes total) while touching the weights; may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
};

struct Model {
  std::unique_ptr<gguf::File> file;
  const Arch* arch = nullptr;
  HParams hp;
  Tensor token_embd;   // {n_embd, n_vocab}
  Tensor output_norm;  // {n_embd} f32
  Tensor rope_freqs;   // {n_rot/2} f32, optional
  engine::Linear output;  // {n_embd} -> {n_vocab} (token_embd when tied)
  std::vector<Layer> layers;
  // qwen35: Gated DeltaNet sizes, and per rope pair a frequency divisor: +inf for the pairs
  // llama.cpp's IMROPE turns by the 4th position, which is 0 for text (angle 0), else 1.
  engine::DeltaNetShape gdn_shape;
  std::vector<float> rope_pair_div;
  // gemma4 per-layer input embeddings (n_embd_per_layer > 0).
  Tensor per_layer_token_embd;          // {n_pl * n_layer, n_vocab}
  engine::Linear per_layer_model_proj;  // {n_embd} -> {n_pl * n_layer}
  Tensor per_layer_proj_norm;           // {n_pl} f32

  void forward(engine::State& st, const int32_t* tokens, int64_t n_tok, int64_t pos0,
               float* logits, bool all_logits) const {
    arch->forward(*this, st, tokens, n_tok, pos0, logits, all_logits);
  }
};

// Opens, validates and prepares a model. Throws ft::Error naming the file and the problem.
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& opt = {});
// Same over an already opened file (tests build files in memory).
std::unique_ptr<Model> load_model(std::unique_ptr<gguf::File> file, const LoadOptions& opt = {});

// Shared pieces the arch builders use.
void load_attention(TensorLoader& tl, Model& m, int64_t il, bool qk_norm);
// `norm`: the FFN's input norm (qwen35 calls it post_attention_norm).
void load_dense_ffn(TensorLoader& tl, Model& m, int64_t il, const char* norm = "ffn_norm");
void load_moe_ffn(TensorLoader& tl, Model& m, int64_t il, bool allow_merged_gate_up,
                  const char* norm = "ffn_norm");
void load_embeddings_and_head(TensorLoader& tl, Model& m);

}  // namespace ft::model
