#include "gpu/state.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "cuda/check.h"
#include "cuda/act_q8.h"
#include "cuda/norm_fold.h"
#include "cuda/gemv.h"
#include "cuda/sample.h"
#include "engine/rope.h"
#include "gpu/state_gemma4.h"
#include "gpu/state_qwen35.h"
#include "model/model.h"

namespace ft::gpu {
size_t kv_elem_bytes(cuda::KvType t) { return t == cuda::KvType::kF32 ? 4 : 2; }

namespace {

template <class T>
T* pinned(size_t n) {
  void* p = nullptr;
  FT_CUDA_CHECK(cudaHostAlloc(&p, n * sizeof(T), cudaHostAllocDefault));
  return static_cast<T*>(p);
}

}  // namespace

GpuBuffers::GpuBuffers(const model::Model& m, const GpuNumerics& num, int64_t n_ctx_,
                       int64_t n_ubatch_, int64_t kv_rows)
    : n_ctx(n_ctx_), n_ubatch(std::max<int64_t>(1, std::min(n_ubatch_, n_ctx_))) {
  const model::HParams& hp = m.hp;
  const int64_t U = n_ubatch;
  int64_t n_ff = 0, n_head = 0, dense_ff = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    qkv_ld = std::max(qkv_ld, hp.n_head[il] * hp.head_dim_k + hp.n_head_kv[il] * (hp.head_dim_k + hp.head_dim_v));
    attn_ld = std::max(attn_ld, hp.n_head[il] * hp.head_dim_v);
    if (!hp.head_dim_l.empty()) {  // gemma4: per-layer head dims (K = V)
      const int64_t hd = hp.head_dim(il);
      qkv_ld = std::max(qkv_ld, (hp.n_head[il] + 2 * hp.n_head_kv[il]) * hd);
      attn_ld = std::max(attn_ld, hp.n_head[il] * hd);
    }
    n_head = std::max(n_head, hp.n_head[il]);
    if (m.layers[il].is_moe()) {
      n_used = std::max(n_used, hp.n_expert_used[il]);
      n_ff = std::max(n_ff, hp.n_ff_exp);
      if (!m.layers[il].ffn_gate_up.empty()) n_ff = std::max(n_ff, hp.n_ff[il]);  // gemma4: dense MLP too
    } else {
      n_ff = std::max(n_ff, hp.n_ff[il]);
      dense_ff = std::max(dense_ff, hp.n_ff[il]);
    }
  }
  gu_ld = 2 * n_ff;
  max_k = std::max({hp.n_embd, n_ff, attn_ld, qwen35_max_k(m)});
  const int64_t rows = U * std::max<int64_t>(1, n_used);  // token rows or token-expert slots
  const size_t f = sizeof(float);
  size_t ws = 0;
  auto alloc = [&](cuda::DeviceBuffer& b, size_t bytes) {
    b = cuda::DeviceBuffer(bytes);
    ws += bytes;
  };
  alloc(x, U * hp.n_embd * f);
  alloc(h, U * hp.n_embd * f);
  alloc(qkv, U * qkv_ld * f);
  alloc(attn, U * attn_ld * f);
  alloc(gu, rows * gu_ld * f);
  alloc(hh, rows * n_ff * f);
  if (n_used > 0) {
    alloc(router, U * hp.n_expert * f);
    alloc(ids, rows * sizeof(int32_t));
    alloc(wts, rows * f);
    alloc(order, rows * sizeof(int32_t));
    alloc(offsets, (hp.n_expert + 1) * sizeof(int32_t));
    alloc(sort_ws, cuda::moe_sort_workspace_bytes(rows, hp.n_expert));
    alloc(ysort, rows * hp.n_embd * f);
  }
  if (num.q8) alloc(xq, cuda::act_q8_bytes(max_k, rows));
  const int64_t logit_rows = std::min<int64_t>(U, cuda::kGemvMaxTokens);
  alloc(logits, logit_rows * hp.n_vocab * f);

  // RoPE {cos, sin} per pair for every position, built with the CPU's own function so the
  // angles are bit-identical to the CPU engine's.
  const int n_rot = hp.rope.n_rot;
  // qwen35's IMROPE pairs that take the 4th position (0 for text) turn by angle 0: its
  // per-pair divisors (+inf there) play the part of rope_freqs, as on the CPU.
  std::vector<float> cs(static_cast<size_t>(n_ctx * n_rot));
  const float* ff = m.rope_freqs ? m.rope_freqs.f32() : (m.rope_pair_div.empty() ? nullptr : m.rope_pair_div.data());
  for (int64_t p = 0; p < n_ctx; ++p) engine::rope_angles(hp.rope, ff, p, cs.data() + p * n_rot);
  alloc(rope_cs, cs.size() * f);
  FT_CUDA_CHECK(cudaMemcpy(rope_cs.get(), cs.data(), cs.size() * f, cudaMemcpyHostToDevice));

  alloc(attn_ws, cuda::attention_workspace_bytes(n_head, U, n_ctx, hp.head_dim_v));
  // The decode kernel's ticket counters start at zero and are left at zero by every call.
  cuda::attention_workspace_init(attn_ws.get(), attn_ws.bytes(), nullptr);
  alloc(tokens, U * sizeof(int32_t));
  alloc(pos, sizeof(int32_t));
  alloc(argmax, U * sizeof(int32_t));
  alloc(argmax_ws, cuda::argmax_scratch_bytes(1));
  FT_CUDA_CHECK(cudaMemset(argmax_ws.get(), 0, argmax_ws.bytes()));
  alloc(bad, sizeof(int32_t));
  FT_CUDA_CHECK(cudaMemset(bad.get(), 0, sizeof(int32_t)));
  alloc(route_ticket, sizeof(unsigned));
  FT_CUDA_CHECK(cudaMemset(route_ticket.get(), 0, sizeof(unsigned)));
  if (num.q8 && dense_ff > 0 && dense_ff % 32 == 0) {  // dense layers' SwiGLU tail (cuda::GemvArgs::glu_xq)
    const int64_t n_cnt = dense_ff / 32;
    alloc(glu_count, n_cnt * sizeof(unsigned));
    FT_CUDA_CHECK(cudaMemset(glu_count.get(), 0, n_cnt * sizeof(unsigned)));
    alloc(xq_glu, cuda::act_q8_bytes(dense_ff, 1));
    if (hp.n_embd % 32 == 0 && hp.n_embd <= cuda::kNormFoldMaxN) {  // the norm fold (forward.cpp)
      const int64_t n_blk = hp.n_embd / 32;
      alloc(xq_n, cuda::act_q8_bytes(hp.n_embd, 1));
      alloc(nq_part, n_blk * sizeof(double));
      alloc(nq_count, n_blk * sizeof(unsigned));
      FT_CUDA_CHECK(cudaMemset(nq_count.get(), 0, n_blk * sizeof(unsigned)));
    }
  }
  if (n_used > 0) {
    // Slot j of each token starts on expert j (mod n_expert): distinct experts, never uninitialised
    // memory, for a launch that reads ids no routing has written yet -- FT_DEBUG_SKIP=route. (H200
    // session 23: on a fresh allocation such probes read expert 0 eight times, from L2, which
    // session 22 took for the cost of changing experts.)
    std::vector<int32_t> iota(static_cast<size_t>(rows));
    for (size_t i = 0; i < iota.size(); ++i)
      iota[i] = static_cast<int32_t>(static_cast<int64_t>(i % static_cast<size_t>(n_used)) % hp.n_expert);
    FT_CUDA_CHECK(cudaMemcpy(ids.get(), iota.data(), iota.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }

  gemm = std::make_unique<cuda::Gemm>(max_k, U);
  ws += gemm->workspace_bytes();
  if (is_qwen35(m)) {
    q35 = std::make_unique<Qwen35Buffers>(m, U);
    ws += q35->workspace_bytes;
    kv_bytes += q35->state_bytes;  // the recurrent state is the sequence's cache
  }
  if (is_gemma4(m)) {
    g4 = std::make_unique<Gemma4Buffers>(m, n_ctx, U);
    ws += g4->bytes;
  }
  workspace_bytes = ws;

  const size_t es = kv_elem_bytes(num.kv);
  const int64_t kv_n = kv_rows > 0 ? kv_rows : n_ctx;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    // gemma4: a sliding layer keeps window + n_ubatch - 1 rows as a ring (engine::KvCache's
    // n_cells: every query of a micro-batch still sees its whole window), a KV-shared layer
    // reads its source layer's cache and has none.
    const int64_t cells = hp.window(il) > 0 && kv_rows <= 0 ? std::min(kv_n, hp.window(il) + U - 1) : kv_n;
    kv_cells.push_back(cells);
    if (!hp.head_dim_l.empty()) {
      if (hp.kv_src(il) != il) {
        k_cache.emplace_back();
        v_cache.emplace_back();
        continue;
      }
      const size_t kvb = static_cast<size_t>(cells * hp.n_head_kv[il] * hp.head_dim(il)) * es;
      k_cache.emplace_back(kvb);
      v_cache.emplace_back(kvb);
      kv_bytes += 2 * kvb;
      continue;
    }
    if (hp.is_recurrent(il)) {  // Gated DeltaNet layers keep their state in q35, no KV
      k_cache.emplace_back();
      v_cache.emplace_back();
      continue;
    }
    const size_t kb = static_cast<size_t>(kv_n * hp.n_head_kv[il] * hp.head_dim_k) * es;
    const size_t vb = static_cast<size_t>(kv_n * hp.n_head_kv[il] * hp.head_dim_v) * es;
    k_cache.emplace_back(kb);
    v_cache.emplace_back(vb);
    kv_bytes += kb + vb;
  }

  h_tokens = pinned<int32_t>(static_cast<size_t>(U));
  h_pos = pinned<int32_t>(1);
  h_argmax = pinned<int32_t>(static_cast<size_t>(U));
  h_logits = pinned<float>(static_cast<size_t>(logit_rows * hp.n_vocab));
}

GpuBuffers::~GpuBuffers() {
  cudaFreeHost(h_tokens);
  cudaFreeHost(h_pos);
  cudaFreeHost(h_argmax);
  cudaFreeHost(h_logits);
}

}  // namespace ft::gpu
