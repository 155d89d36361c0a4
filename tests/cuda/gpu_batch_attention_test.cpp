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
#include "cuda/rope.h"
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

// The rope inside (AttnBatchArgs::qkv_raw, a decode-only step): the output, its Q8 copy and both caches equal
// qk_norm_rope_store_batch + the attention's, byte for byte -- with and without the q/k norms, neox and adjacent
// pairs, a partial rotation, every cache type, keys whole and cut in chunks (the new row in the last chunk).
TEST(GpuBatchAttention, RopeInsideEqualsItsLaunch) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  struct RopeShape {
    int64_t n_head, n_head_kv, hd;
    int n_rot;
    bool neox, norm;
  };
  const RopeShape shapes[] = {{32, 8, 128, 128, false, false}, {16, 4, 128, 128, true, true},
                              {8, 2, 64, 64, true, false},     {8, 2, 256, 64, false, true},
                              {4, 2, 32, 32, false, true},     {16, 1, 128, 128, true, true}};
  const int64_t n_ctx = 300, n_slots = 5;
  const std::vector<Tok> toks = {{0, 0}, {3, 299}, {1, 16}, {4, 128}, {2, 130}};  // one token a slot
  for (const RopeShape& sh : shapes)
    for (KvType kvt : {KvType::kF32, KvType::kF16, KvType::kBF16})
      for (int64_t split : {0, 5}) {
        SCOPED_TRACE(testing::Message() << "heads " << sh.n_head << "/" << sh.n_head_kv << " hd " << sh.hd << " rot "
                                        << sh.n_rot << (sh.neox ? " neox" : "") << (sh.norm ? " norm" : "") << " kv "
                                        << static_cast<int>(kvt) << " split " << split);
        std::mt19937 rng(static_cast<unsigned>(sh.hd * 7 + sh.n_head + static_cast<int>(kvt) * 3 + split));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        const int64_t kv_dim = sh.n_head_kv * sh.hd, q_dim = sh.n_head * sh.hd, ld = q_dim + 2 * kv_dim;
        const int64_t es = kvt == KvType::kF32 ? 4 : 2, n_tok = static_cast<int64_t>(toks.size());
        std::vector<uint8_t> cache(static_cast<size_t>(n_slots * n_ctx * kv_dim * es));
        std::uniform_int_distribution<int> byte(0, 255);
        for (size_t i = 0; i < cache.size(); i += es) {  // finite values of the cache type
          const float v = nd(rng);
          if (kvt == KvType::kF32) std::memcpy(&cache[i], &v, 4);
          else {
            uint32_t u;
            std::memcpy(&u, &v, 4);
            const uint16_t h = kvt == KvType::kBF16 ? static_cast<uint16_t>(u >> 16) : static_cast<uint16_t>(0x3C00 ^ (u & 0x83FF));
            std::memcpy(&cache[i], &h, 2);
          }
        }
        std::vector<float> qkv(static_cast<size_t>(n_tok * ld)), cs(static_cast<size_t>(n_ctx * sh.n_rot)),
            qw(static_cast<size_t>(sh.hd)), kw(static_cast<size_t>(sh.hd));
        for (auto& x : qkv) x = nd(rng);
        for (size_t i = 0; i < cs.size(); ++i) cs[i] = std::cos(0.37f * static_cast<float>(i));
        for (auto& x : qw) x = 1.0f + 0.1f * nd(rng);
        for (auto& x : kw) x = 1.0f + 0.1f * nd(rng);
        std::vector<int32_t> pos, base;
        for (const Tok& t : toks) {
          pos.push_back(static_cast<int32_t>(t.pos));
          base.push_back(static_cast<int32_t>(t.slot * n_ctx));
        }
        auto run = [&](bool inside) {
          ft::cuda::DeviceBuffer dk(cache.size()), dv(cache.size()), dqkv(qkv.size() * 4), dout(n_tok * q_dim * 4),
              dpos(n_tok * 4), dbase(n_tok * 4), dcs(cs.size() * 4), dqw(qw.size() * 4), dkw(kw.size() * 4),
              dq8(ft::cuda::act_q8_bytes(q_dim, n_tok)), ws;
          FT_CUDA_CHECK(cudaMemcpy(dk.get(), cache.data(), cache.size(), cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dv.get(), cache.data(), cache.size(), cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dqkv.get(), qkv.data(), qkv.size() * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dpos.get(), pos.data(), n_tok * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dbase.get(), base.data(), n_tok * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dcs.get(), cs.data(), cs.size() * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dqw.get(), qw.data(), qw.size() * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemcpy(dkw.get(), kw.data(), kw.size() * 4, cudaMemcpyHostToDevice));
          FT_CUDA_CHECK(cudaMemset(dq8.get(), 0, dq8.bytes()));
          const Round r = kvt == KvType::kF32 ? Round::kNone : kvt == KvType::kBF16 ? Round::kBF16 : Round::kF16;
          const float* qn = sh.norm ? dqw.as<float>() : nullptr;
          const float* kn = sh.norm ? dkw.as<float>() : nullptr;
          if (!inside) {
            ft::cuda::KvStore kv;
            kv.type = kvt;
            kv.k_cache = dk.get();
            kv.v_cache = dv.get();
            kv.v = dqkv.as<float>() + q_dim + kv_dim;
            kv.ldv = ld;
            kv.v_head_dim = sh.hd;
            ft::cuda::qk_norm_rope_store_batch(dqkv.as<float>(), ld, n_tok, sh.n_head, sh.n_head_kv, sh.hd, qn, kn,
                                               1e-6f, dcs.as<float>(), sh.n_rot, sh.neox, dpos.as<int32_t>(),
                                               dbase.as<int32_t>(), r, kv, nullptr);
          }
          ft::cuda::AttnBatchArgs a;
          a.n_head = sh.n_head;
          a.n_head_kv = sh.n_head_kv;
          a.head_dim = sh.hd;
          a.scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
          a.q = dqkv.as<float>();
          a.ldq = ld;
          a.n_tok = n_tok;
          a.d_pos = dpos.as<int32_t>();
          a.d_base = dbase.as<int32_t>();
          a.kv_type = kvt;
          a.k_cache = dk.get();
          a.v_cache = dv.get();
          a.out = dout.as<float>();
          a.ldo = q_dim;
          a.round = r;
          a.out_q8 = dq8.get();
          if (split > 0) {
            ws = ft::cuda::DeviceBuffer(ft::cuda::attention_batch_workspace_bytes(split, sh.n_head, n_ctx, sh.hd));
            ft::cuda::attention_workspace_init(ws.get(), ws.bytes(), nullptr);
            a.n_ctx = n_ctx;
            a.workspace = ws.get();
            a.split_tokens = split;
          }
          if (inside) {
            a.qkv_raw = dqkv.as<float>();
            a.q_norm_w = qn;
            a.k_norm_w = kn;
            a.rms_eps = 1e-6f;
            a.rope_cs = dcs.as<float>();
            a.n_rot = sh.n_rot;
            a.neox = sh.neox;
          }
          ft::cuda::attention_decode_batch(a, nullptr);
          FT_CUDA_CHECK(cudaDeviceSynchronize());
          std::vector<uint8_t> out(static_cast<size_t>(n_tok * q_dim * 4) + dq8.bytes() + 2 * cache.size());
          uint8_t* o = out.data();
          FT_CUDA_CHECK(cudaMemcpy(o, dout.get(), n_tok * q_dim * 4, cudaMemcpyDeviceToHost));
          o += n_tok * q_dim * 4;
          FT_CUDA_CHECK(cudaMemcpy(o, dq8.get(), dq8.bytes(), cudaMemcpyDeviceToHost));
          o += dq8.bytes();
          FT_CUDA_CHECK(cudaMemcpy(o, dk.get(), cache.size(), cudaMemcpyDeviceToHost));
          FT_CUDA_CHECK(cudaMemcpy(o + cache.size(), dv.get(), cache.size(), cudaMemcpyDeviceToHost));
          return out;
        };
        const std::vector<uint8_t> want = run(false), got = run(true);
        ASSERT_EQ(got.size(), want.size());
        const size_t n_out = static_cast<size_t>(n_tok * q_dim * 4);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), n_out), 0) << "outputs differ";
        EXPECT_EQ(std::memcmp(got.data() + n_out, want.data() + n_out, got.size() - n_out), 0)
            << "the Q8 copy or the caches differ";
      }
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
