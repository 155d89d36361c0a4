// The decoder forward pass of llama / qwen3 / qwen3moe on the GPU, from the shared kernel
// families in src/cuda. The same blocks as model/decoder.cpp on the CPU, in the same order
// and with the same rounding points, so each kernel's CPU twin is the reference:
//
//   x = embed(tokens)
//   per layer: h = rmsnorm(x); qkv = W_qkv h; q,k = rope(norm(q,k)); kv <- k,v;
//              x += W_o attention(q, kv)                    (residual add in the GEMV epilogue)
//              h = rmsnorm(x); x += ffn(h)                   (dense SwiGLU, or routed experts:
//                                                            grouped GEMV + combine for decode,
//                                                            sorted grouped GEMM for prefill)
//   logits = W_out rmsnorm(x)  (or their argmax, on the device)
//
// Tokens and the position are read from device memory, so one decode step can be captured
// in a CUDA graph and replayed for every token.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "cuda/gemv.h"
#include "cuda/l2_ahead.h"
#include "gpu/moe_backend.h"
#include "gpu/state.h"
#include "gpu/weights.h"

namespace ft::gpu {

// kSample: logits of the last row, then the session's sampling kernel (gpu/session.cpp).
// kRows: logits of the rows b.batch->out_rows into b.batch->logits (gpu/batch_forward.h).
enum class Head { kNone, kLast, kAll, kArgmax, kSample, kRows };

// The norm fold's switch (FT_NORM_FOLD at start-up; process-wide, for tests and benchmarks): bit 0
// the FFN norm, bit 1 the attention norm made by the GEMVs around them (cuda/norm_fold.h).
void set_norm_fold(int mode);
int norm_fold_mode();

class GpuForward {
 public:
  // moe: the backend of the routed experts (gpu/moe_backend.h); nullptr: fused.
  GpuForward(const model::Model& m, const DeviceWeights& w, GpuBuffers& b, const GpuNumerics& num,
             MoeBackend* moe = nullptr);

  // n_tok tokens from b.tokens at position *b.pos. kLast / kAll leave fp32 logits in b.logits
  // (kAll: n_tok <= kGemvMaxTokens rows), kArgmax leaves the last row's argmax in b.argmax.
  void run(int64_t n_tok, Head head, cudaStream_t s) const;

  // One decode token at depth (the session sets it per step and keys its graphs by it): the
  // attention of rope_store_attention runs the rope + KV store launch and the tensor-core decode
  // kernel (cuda::AttnArgs::decode_mma) instead of the fused dedicated kernel, where it applies.
  void set_long_context(bool on) { long_ctx_ = on; }
  // The most live keys the coming steps (one graph's replays) can see, 0 for no bound
  // (cuda::AttnArgs::max_keys).
  void set_key_bound(int64_t keys) { key_bound_ = keys; }
  // Whether set_long_context(true) changes any launch of this model: some attention layer goes
  // through rope_store_attention (not gemma4's pass, not a Gated DeltaNet layer) with a shape the
  // tensor-core kernel takes. The session keys its graphs by the flag only then.
  bool decode_mma_applies() const { return decode_mma_applies_; }
  // The one-token decode attention's plan for a step of n_tok tokens after n_past cached ones
  // (GpuSession::step, the batch runner's solo steps): set_long_context from mma_min_keys (0: the
  // tensor-core kernel off) and set_key_bound below it (FT_ATTN_KEY_BOUND=0: no bound). Returns the
  // long-context flag, which graphs are keyed by.
  bool plan_decode_attention(int64_t n_past, int64_t n_tok, int64_t mma_min_keys);

  // A batch runner's step of one sequence (gpu/batch_runner_gpu.cpp): run() takes the one-sequence
  // pass -- its fused decode launches (the rope, KV store and wo's Q8 row inside the attention
  // launch, the norm fold), its flash-attention prefill -- at *b.pos on the KV slot whose rows start
  // at row0 of each layer's cache, instead of the batch pass over b.batch; Head::kRows then gives
  // the last row's logits, as Head::kLast. -1: off.
  // The slot's pointers are baked into a captured graph: a graph per slot.
  void set_solo(int64_t row0) { solo_row0_ = row0; }

 private:
  int64_t solo_row0_ = -1;
  // Several sequences in this pass: b.batch set and no solo step.
  bool batched() const { return b_.batch != nullptr && solo_row0_ < 0; }
  // Layer il's K (k) or V cache from the solo slot's first row on.
  void* kv_slot(int64_t il, bool k) const;
  bool long_ctx_ = false;
  int64_t key_bound_ = 0;
  bool decode_mma_applies_ = false;  // resolved once at construction (find_decode_mma)
  bool find_decode_mma() const;
  // The norm fold (cuda/norm_fold.h; FT_NORM_FOLD): whether one decode token's RMSNorm before layer
  // il's qkv (attn) or gate|up (!attn) may be made by the GEMV writing the residual before it and
  // the one reading its Q8 row, instead of rmsnorm_q8. The producer sets the flag of the norm it
  // made (b_.xq_n, b_.nq_part); the consumer takes and clears it.
  bool fold_wanted(int64_t il, bool attn, int64_t n_tok) const;
  // The fold's fields of a GEMV: producing the norm of weight norm_w, or reading the folded row.
  void fold_produce(cuda::GemvArgs& a, const float* norm_w) const;
  void fold_consume(cuda::GemvArgs& a) const;
  mutable bool nq_attn_ready_ = false, nq_ffn_ready_ = false;
  void linear(const DevLinear& l, const float* x, int64_t ldx, int64_t n_tok, float* y, int64_t ldy,
              cuda::Round round, bool accumulate, bool q8, cudaStream_t s,
              bool exact = false, bool xq_ready = false, bool y_early = false,
              const cuda::L2Ahead& ahead = cuda::L2Ahead{}) const;  // ahead: GemvArgs::l2_ahead of decode GEMVs
  // Whether the integer GEMV will read b_.xq for this projection / expert tensor.
  bool wants_q8(const DevLinear& l) const;
  // The L2 prefetch of the FFN's gate|up weights by wo's launch (FT_FFN_L2_AHEAD; empty when off).
  cuda::L2Ahead ffn_l2_ahead(const DevLayer& L, int64_t n_tok) const;
  void attention_block(int64_t il, int64_t n_tok, cudaStream_t s) const;
  // One sequence at *b.pos: q/k norm + rope of the fused rows qkv (ld apart: q | k | v heads),
  // K and V into layer il's cache, causal attention over it into out (ldo apart). The
  // attention of llama / qwen3 and of qwen35's gated attention layers. out_q8: also out's
  // Q8 copy for the integer GEMV (cuda::AttnArgs::out_q8; decode writes it in its epilogue).
  // fuse_rope: one decode token may take the q/k norm, rope and KV store inside the attention
  // launch (cuda::AttnArgs::qkv_raw; FT_ATTN_ROPE=0 off); qkv's q and k are then left unrotated.
  void rope_store_attention(int64_t il, float* qkv, int64_t ld, int64_t n_tok, float* out, int64_t ldo,
                            cudaStream_t s, void* out_q8 = nullptr, bool fuse_rope = false) const;
  void ffn_block(int64_t il, int64_t n_tok, cudaStream_t s) const;
  // The routed experts of MoE layer il (gpu/forward_moe.cpp), every architecture:
  // route_experts: router logits of h (n_tok rows of n_embd, fp32 logits) and top-k routing
  // into b.ids / b.wts; xq_ready: b.xq holds h's Q8 copy; one_launch: decode may run the
  // router GEMV and the routing as one kernel where it takes the shape (it sums in another
  // order than the GEMV: gemma4 keeps them apart, as validated). run_experts: the MoE
  // backend on that routing adds sum_j wts * expert_j(h) into out. routed_experts: both, on
  // the same h.
  void route_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, bool one_launch,
                     cudaStream_t s) const;
  // route_pending: the router launch wrote only the logits (norm_route_experts' deferred).
  void run_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, float* out, cudaStream_t s,
                   bool route_pending = false) const;
  void routed_experts(int64_t il, const float* h, int64_t n_tok, bool xq_ready, float* out, cudaStream_t s) const;
  // One decode token: layer il's FFN norm of x into h and b.xq, router and routing in one
  // launch (cuda::moe_norm_router_route, the same bits as rmsnorm_q8 + route_experts); false
  // (nothing launched) where it does not take the layer.
  // deferred (where given): set when the launch wrote only the router's logits, leaving the
  // routing to the MoE backend's decode (MoeBackend::routes_decode; run_experts' route_pending).
  bool norm_route_experts(int64_t il, const float* x, float* h, cudaStream_t s, bool* deferred = nullptr) const;
  // qwen35 / qwen35moe (gpu/forward_qwen35.cpp): one layer, its token mixing (Gated DeltaNet
  // or gated attention) and its FFN (dense, or routed experts + gated shared expert).
  void qwen35_layer(int64_t il, int64_t n_tok, cudaStream_t s) const;
  void gated_attention_block(int64_t il, int64_t n_tok, cudaStream_t s) const;
  void gdn_block(int64_t il, int64_t n_tok, cudaStream_t s) const;
  void moe_shared_ffn_block(int64_t il, int64_t n_tok, cudaStream_t s) const;
  // gemma4 (gpu/forward_gemma4.cpp): the whole pass, and a layer's attention, FFN (dense MLP,
  // + routed experts in MoE layers) and per-layer input / output scale.
  void gemma4_run(int64_t n_tok, Head head, cudaStream_t s) const;
  void gemma4_attention(int64_t il, int64_t n_tok, cudaStream_t s) const;
  void gemma4_ffn(int64_t il, int64_t n_tok, cudaStream_t s) const;
  void gemma4_layer_end(int64_t il, int64_t n_tok, cudaStream_t s) const;

  const model::Model& m_;
  const DeviceWeights& w_;
  GpuBuffers& b_;
  GpuNumerics num_;
  std::unique_ptr<MoeBackend> own_moe_;
  MoeBackend* moe_ = nullptr;
};

}  // namespace ft::gpu
