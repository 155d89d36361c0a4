// cuda::attention_decode_batch (tokens of several sequences, each against its own KV slot)
// against its CPU twin engine::attention_ref, run per token over that sequence's own cache:
// every head shape the kernel dispatches (head_dim 32..256, query groups of 1..16, split
// over blocks above 8), every cache type, decode tokens and a prompt chunk in one launch; each
// token's keys in one block, and cut in chunks of 128 (3 chunks a slot of 300) for all tokens
// or the first two, twice in a row (the tickets left at zero: the same bits again); the output's
// Q8 copy for the wo GEMV equal to quantize_act_q8's bytes of it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/attention.h"
#include "cuda/attention_batch.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "engine/attention.h"

namespace {

using ft::cuda::KvType;
using ft::cuda::Round;
using ft::engine::ActType;

struct Shape {
  int64_t n_head, n_head_kv, hd;
};

struct Tok {
  int64_t slot, pos;
};

// split_tokens: AttnBatchArgs::split_tokens (0: no workspace).
void run_case(const Shape& sh, ActType act, int64_t split_tokens) {
  const int64_t n_ctx = 300, n_slots = 4, kv_dim = sh.n_head_kv * sh.hd, q_dim = sh.n_head * sh.hd;
  // Live lengths per slot; tokens: decode rows of every slot at their last position (1, 1, 3
  // chunks), plus a 3-token chunk of slot 2 (positions 130..132: 2 chunks, each token sees the
  // chunk's keys up to itself).
  const int64_t len[n_slots] = {1, 17, 133, 300};
  std::vector<Tok> toks = {{0, 0}, {3, 299}, {1, 16}, {2, 130}, {2, 131}, {2, 132}};
  std::mt19937 rng(static_cast<unsigned>(sh.hd * 131 + sh.n_head * 7 + static_cast<int>(act)));
  std::normal_distribution<float> nd(0.0f, 1.0f);

  std::vector<ft::engine::KvCache> caches;
  for (int64_t s = 0; s < n_slots; ++s) {
    caches.emplace_back(act, n_ctx, std::vector<int64_t>{kv_dim});
    std::vector<float> k(static_cast<size_t>(kv_dim)), v(static_cast<size_t>(kv_dim));
    for (int64_t p = 0; p < len[s]; ++p) {
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      caches[s].store(0, p, 1, k.data(), kv_dim, v.data(), kv_dim);
    }
  }
  const int64_t es = caches[0].esize();
  std::vector<uint8_t> hk(static_cast<size_t>(n_slots * n_ctx * kv_dim * es), 0), hv(hk.size(), 0);
  for (int64_t s = 0; s < n_slots; ++s)
    for (int64_t p = 0; p < len[s]; ++p) {
      std::memcpy(hk.data() + (s * n_ctx + p) * kv_dim * es, caches[s].k_row(0, p), kv_dim * es);
      std::memcpy(hv.data() + (s * n_ctx + p) * kv_dim * es, caches[s].v_row(0, p), kv_dim * es);
    }
  const auto n_tok = static_cast<int64_t>(toks.size());
  std::vector<float> q(static_cast<size_t>(n_tok * q_dim));
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> pos, base;
  for (const Tok& t : toks) {
    pos.push_back(static_cast<int32_t>(t.pos));
    base.push_back(static_cast<int32_t>(t.slot * n_ctx));
  }

  ft::cuda::DeviceBuffer dk(hk.size()), dv(hv.size()), dq(q.size() * 4), dout(q.size() * 4), dpos(n_tok * 4),
      dbase(n_tok * 4);
  FT_CUDA_CHECK(cudaMemcpy(dk.get(), hk.data(), hk.size(), cudaMemcpyHostToDevice));
  FT_CUDA_CHECK(cudaMemcpy(dv.get(), hv.data(), hv.size(), cudaMemcpyHostToDevice));
  FT_CUDA_CHECK(cudaMemcpy(dq.get(), q.data(), q.size() * 4, cudaMemcpyHostToDevice));
  FT_CUDA_CHECK(cudaMemcpy(dpos.get(), pos.data(), n_tok * 4, cudaMemcpyHostToDevice));
  FT_CUDA_CHECK(cudaMemcpy(dbase.get(), base.data(), n_tok * 4, cudaMemcpyHostToDevice));
  FT_CUDA_CHECK(cudaMemset(dout.get(), 0xFF, q.size() * 4));  // NaN: every element must be written

  ft::cuda::AttnBatchArgs a;
  a.n_head = sh.n_head;
  a.n_head_kv = sh.n_head_kv;
  a.head_dim = sh.hd;
  a.scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
  a.q = dq.as<float>();
  a.ldq = q_dim;
  a.n_tok = n_tok;
  a.d_pos = dpos.as<int32_t>();
  a.d_base = dbase.as<int32_t>();
  a.kv_type = act == ActType::kF32 ? KvType::kF32 : act == ActType::kBF16 ? KvType::kBF16 : KvType::kF16;
  a.k_cache = dk.get();
  a.v_cache = dv.get();
  a.out = dout.as<float>();
  a.ldo = q_dim;
  a.round = act == ActType::kF32 ? Round::kNone : act == ActType::kBF16 ? Round::kBF16 : Round::kF16;
  ft::cuda::DeviceBuffer ws;
  if (split_tokens > 0) {
    EXPECT_EQ(ft::cuda::attention_batch_chunk(n_ctx), 128);
    ws = ft::cuda::DeviceBuffer(ft::cuda::attention_batch_workspace_bytes(split_tokens, sh.n_head, n_ctx, sh.hd));
    ft::cuda::attention_workspace_init(ws.get(), ws.bytes(), nullptr);
    a.n_ctx = n_ctx;
    a.workspace = ws.get();
    a.split_tokens = split_tokens;
  }
  // The Q8 copy of the output (AttnBatchArgs::out_q8) where head_dim allows it: quantize_act_q8's bytes.
  const int64_t q8_row = ft::cuda::act_q8_row_bytes(q_dim);
  ft::cuda::DeviceBuffer dq8(ft::cuda::act_q8_bytes(q_dim, n_tok));
  a.out_q8 = dq8.get();
  ft::cuda::attention_decode_batch(a, nullptr);
  std::vector<uint8_t> got_q8(dq8.bytes()), want_q8(static_cast<size_t>(q8_row));
  FT_CUDA_CHECK(cudaMemcpy(got_q8.data(), dq8.get(), got_q8.size(), cudaMemcpyDeviceToHost));
  std::vector<float> got(q.size()), again(q.size());
  FT_CUDA_CHECK(cudaMemcpy(got.data(), dout.get(), got.size() * 4, cudaMemcpyDeviceToHost));
  FT_CUDA_CHECK(cudaMemset(dout.get(), 0xFF, q.size() * 4));
  ft::cuda::attention_decode_batch(a, nullptr);
  FT_CUDA_CHECK(cudaMemcpy(again.data(), dout.get(), again.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * 4), 0) << "a second launch differs (tickets)";
  for (int64_t t = 0; t < n_tok; ++t) {
    ft::cuda::quantize_act_q8_row_ref(got.data() + t * q_dim, q_dim, want_q8.data());
    const auto used = static_cast<size_t>(q_dim + 8 * (q_dim / 32));  // codes and scales, not the row's padding
    EXPECT_EQ(std::memcmp(got_q8.data() + t * q8_row, want_q8.data(), used), 0)
        << "Q8 row of token " << t << ", heads " << sh.n_head << " hd " << sh.hd;
  }

  ft::engine::AttnShape s;
  s.n_head = sh.n_head;
  s.n_head_kv = sh.n_head_kv;
  s.head_dim_k = s.head_dim_v = sh.hd;
  s.scale = a.scale;
  std::vector<float> want(q.size());
  for (int64_t t = 0; t < n_tok; ++t)
    ft::engine::attention_ref(s, caches[toks[t].slot], 0, q.data() + t * q_dim, q_dim, 1, toks[t].pos,
                              want.data() + t * q_dim, q_dim, act);
  // fp32: summation order only. bf16/f16 outputs: one rounding step of the output dtype.
  const float tol = act == ActType::kF32 ? 2e-5f : act == ActType::kBF16 ? 3.2e-2f : 4e-3f;
  float worst = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) {
    const float d = std::fabs(got[i] - want[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  EXPECT_LE(worst, tol) << "heads " << sh.n_head << "/" << sh.n_head_kv << " hd " << sh.hd << " act "
                        << static_cast<int>(act) << " split tokens " << split_tokens;
}

TEST(GpuBatchAttention, MatchesCpuTwinPerSequence) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const Shape shapes[] = {{4, 2, 32}, {8, 8, 64}, {32, 8, 128}, {32, 4, 128}, {16, 1, 128}, {8, 2, 256}, {16, 1, 256}};
  for (const Shape& sh : shapes)
    for (ActType act : {ActType::kF32, ActType::kF16, ActType::kBF16})
      for (int64_t split : {0, 2, 6}) run_case(sh, act, split);
}

TEST(GpuBatchAttention, RejectsBadShapes) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  ft::cuda::AttnBatchArgs a;
  a.n_head = 4;
  a.n_head_kv = 3;
  a.head_dim = 64;
  a.n_tok = 1;
  EXPECT_THROW(ft::cuda::attention_decode_batch(a, nullptr), std::exception);
  a.n_head_kv = 2;
  a.head_dim = 96;
  EXPECT_THROW(ft::cuda::attention_decode_batch(a, nullptr), std::exception);
}

}  // namespace
