// GPU q/k norm + rope (src/cuda/rope.h) against engine::rmsnorm_heads + engine::rope_apply
// on fused qkv rows, bit for bit: both layouts, partial rotation (n_rot < head_dim), with
// and without the qwen3 q/k norms, several head counts and dims, positions read on the
// device, every rounding. The v part of each row must come back untouched. The batch entry
// (a position and a KV-slot row per token) against the CPU at each token's position and
// against the one-sequence store of that token into its slot.
#include "cuda/rope.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/threadpool.h"
#include "engine/norm.h"
#include "engine/rope.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

struct RopeCase {
  int64_t n_head, n_kv, hd;
  int n_rot;
  bool neox, norm;
  int64_t n_tok, pos0;
};

void check(const RopeCase& c, const RoundCase& rc) {
  SCOPED_TRACE(std::string(rc.name) + " heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv) + " hd " +
               std::to_string(c.hd) + " n_rot " + std::to_string(c.n_rot) + " neox " + std::to_string(c.neox) +
               " norm " + std::to_string(c.norm) + " n_tok " + std::to_string(c.n_tok) + " pos0 " +
               std::to_string(c.pos0));
  ThreadPool pool(1);
  const engine::Exec ex{&pool, rc.cpu};
  model::RopeParams rp;
  rp.type = c.neox ? model::RopeType::kNeox : model::RopeType::kNorm;
  rp.n_rot = c.n_rot;
  rp.freq_base = 1000000.0f;
  rp.n_ctx_orig = 4096;
  const int64_t n_ctx = c.pos0 + c.n_tok + 3;
  std::vector<float> cs(static_cast<size_t>(n_ctx * c.n_rot));
  for (int64_t p = 0; p < n_ctx; ++p) engine::rope_angles(rp, nullptr, p, cs.data() + p * c.n_rot);

  const int64_t ld = (c.n_head + 2 * c.n_kv) * c.hd + 3;  // q | k | v | pad
  const auto x = randn(static_cast<size_t>(c.n_tok * ld), static_cast<uint64_t>(c.hd * 7 + c.n_tok), 2.0f);
  const auto qw = randn(static_cast<size_t>(c.hd), 21), kw = randn(static_cast<size_t>(c.hd), 22);

  std::vector<float> want = x;
  float* q = want.data();
  float* k = q + c.n_head * c.hd;
  if (c.norm) {
    engine::rmsnorm_heads(ex, q, ld, c.n_tok, c.n_head, c.hd, qw.data(), 1e-6f);
    engine::rmsnorm_heads(ex, k, ld, c.n_tok, c.n_kv, c.hd, kw.data(), 1e-6f);
  }
  engine::RopeCache cache;
  cache.build(rp, nullptr, c.pos0, c.n_tok);
  engine::rope_apply(ex, cache, q, ld, c.n_tok, c.n_head, c.hd);
  engine::rope_apply(ex, cache, k, ld, c.n_tok, c.n_kv, c.hd);

  DeviceBuffer dx = to_device(x), dcs = to_device(cs), dqw = to_device(qw), dkw = to_device(kw),
               dpos = to_device(std::vector<int32_t>{static_cast<int32_t>(c.pos0)});
  qk_norm_rope(dx.as<float>(), ld, c.n_tok, c.n_head, c.n_kv, c.hd, c.norm ? dqw.as<float>() : nullptr,
               c.norm ? dkw.as<float>() : nullptr, 1e-6f, dcs.as<float>(), c.n_rot, c.neox, dpos.as<int32_t>(), rc.gpu,
               nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const Diff d = compare(to_host<float>(dx, x.size()), want, 0);
  ASSERT_EQ(d.bad, 0) << d.first_bad;
}

TEST(CudaOpsRope, MatchesCpuNormAndRope) {
  FT_OPS_REQUIRE_GPU();
  const RopeCase cases[] = {
      {4, 2, 64, 64, false, false, 1, 0},    {4, 2, 64, 64, true, false, 3, 17},   {4, 2, 64, 64, true, true, 2, 5},
      {32, 8, 128, 128, true, true, 1, 4000}, {32, 8, 128, 128, false, true, 4, 9}, {8, 8, 128, 64, false, false, 2, 33},
      {8, 4, 128, 64, true, true, 3, 2},     {16, 4, 256, 256, true, true, 1, 70},  {2, 1, 40, 32, false, true, 5, 1},
      {64, 4, 128, 128, true, true, 7, 100},
  };
  for (const RoundCase& rc : kRounds)
    for (const RopeCase& c : cases) check(c, rc);
}

// qk_norm_rope_store = qk_norm_rope then kv_store, bit for bit: the rows of x and both
// caches (the rows at *d_pos + t written, the others untouched), every cache type.
TEST(CudaOpsRope, StoreFusedEqualsRopeThenKvStore) {
  FT_OPS_REQUIRE_GPU();
  struct C {
    int64_t n_head, n_kv, hd, hd_v;
    int n_rot;
    bool neox, norm;
    int64_t n_tok, pos0;
  };
  const C cases[] = {{32, 4, 128, 128, 128, true, true, 1, 0},   {32, 8, 128, 128, 128, false, false, 1, 77},
                     {4, 2, 64, 64, 32, true, true, 3, 5},        {16, 4, 256, 256, 256, true, true, 2, 9},
                     {8, 2, 128, 64, 64, false, true, 5, 1}};
  const KvType types[] = {KvType::kF32, KvType::kF16, KvType::kBF16};
  for (const KvType kt : types) {
    for (const C& c : cases) {
      SCOPED_TRACE("kv type " + std::to_string(static_cast<int>(kt)) + " heads " + std::to_string(c.n_head) + "/" +
                   std::to_string(c.n_kv) + " hd " + std::to_string(c.hd) + " n_tok " + std::to_string(c.n_tok));
      const int64_t n_ctx = c.pos0 + c.n_tok + 4, k_dim = c.n_kv * c.hd, v_dim = c.n_kv * c.hd_v;
      const int64_t q_dim = c.n_head * c.hd, ld = q_dim + k_dim + v_dim + 5;
      model::RopeParams rp;
      rp.type = c.neox ? model::RopeType::kNeox : model::RopeType::kNorm;
      rp.n_rot = c.n_rot;
      rp.freq_base = 10000.0f;
      rp.n_ctx_orig = 4096;
      std::vector<float> cs(static_cast<size_t>(n_ctx * c.n_rot));
      for (int64_t p = 0; p < n_ctx; ++p) engine::rope_angles(rp, nullptr, p, cs.data() + p * c.n_rot);
      const auto x = randn(static_cast<size_t>(c.n_tok * ld), static_cast<uint64_t>(c.hd + c.n_tok), 2.0f);
      const auto qw = randn(static_cast<size_t>(c.hd), 31), kw = randn(static_cast<size_t>(c.hd), 32);
      const size_t es = kt == KvType::kF32 ? 4 : 2;
      const std::vector<uint8_t> fill(static_cast<size_t>(n_ctx * (k_dim + v_dim)) * es, 0xA5);
      DeviceBuffer dcs = to_device(cs), dqw = to_device(qw), dkw = to_device(kw),
                   dpos = to_device(std::vector<int32_t>{static_cast<int32_t>(c.pos0)});
      DeviceBuffer xa = to_device(x), xb = to_device(x);
      DeviceBuffer ka = to_device(fill), va = to_device(fill), kb = to_device(fill), vb = to_device(fill);
      const float* qn = c.norm ? dqw.as<float>() : nullptr;
      const float* kn = c.norm ? dkw.as<float>() : nullptr;
      qk_norm_rope(xa.as<float>(), ld, c.n_tok, c.n_head, c.n_kv, c.hd, qn, kn, 1e-6f, dcs.as<float>(), c.n_rot,
                   c.neox, dpos.as<int32_t>(), Round::kNone, nullptr);
      kv_store(kt, ka.get(), va.get(), k_dim, v_dim, xa.as<float>() + q_dim, ld, xa.as<float>() + q_dim + k_dim, ld,
               c.n_tok, dpos.as<int32_t>(), nullptr);
      KvStore st;
      st.type = kt;
      st.k_cache = kb.get();
      st.v_cache = vb.get();
      st.v = xb.as<float>() + q_dim + k_dim;
      st.ldv = ld;
      st.v_head_dim = c.hd_v;
      qk_norm_rope_store(xb.as<float>(), ld, c.n_tok, c.n_head, c.n_kv, c.hd, qn, kn, 1e-6f, dcs.as<float>(),
                         c.n_rot, c.neox, dpos.as<int32_t>(), Round::kNone, st, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(to_host<float>(xa, x.size()), to_host<float>(xb, x.size()));
      EXPECT_EQ(to_host<uint8_t>(ka, fill.size()), to_host<uint8_t>(kb, fill.size()));
      EXPECT_EQ(to_host<uint8_t>(va, fill.size()), to_host<uint8_t>(vb, fill.size()));
      // The store wrote something: the cache rows at pos0 changed from the fill.
      EXPECT_NE(to_host<uint8_t>(kb, fill.size()), fill);
    }
  }
}

// qk_norm_rope_store_batch: tokens of several sequences (positions out of order, repeated
// across slots) in one launch. Each row of x must equal engine norm + rope at that token's own
// position, and both caches must equal those written by qk_norm_rope_store of each token alone
// (d_pos = its position) into its slot (the cache pointers moved to row base[t]); rows no
// token owns keep the fill.
TEST(CudaOpsRope, StoreBatchPlacesEachTokenAtItsPositionAndSlot) {
  FT_OPS_REQUIRE_GPU();
  const int64_t n_head = 8, n_kv = 2, hd = 64, hd_v = 64, n_ctx = 16, n_seq = 3;
  const int n_rot = 64;
  const std::vector<int32_t> pos = {5, 0, 11, 5, 1, 2};
  const std::vector<int32_t> base = {0, 2 * n_ctx, n_ctx, 2 * n_ctx, 0, n_ctx};
  const int64_t n_tok = static_cast<int64_t>(pos.size());
  const int64_t q_dim = n_head * hd, k_dim = n_kv * hd, v_dim = n_kv * hd_v, ld = q_dim + k_dim + v_dim + 3;
  model::RopeParams rp;
  rp.type = model::RopeType::kNeox;
  rp.n_rot = n_rot;
  rp.freq_base = 10000.0f;
  rp.n_ctx_orig = 4096;
  std::vector<float> cs(static_cast<size_t>(n_ctx * n_rot));
  for (int64_t p = 0; p < n_ctx; ++p) engine::rope_angles(rp, nullptr, p, cs.data() + p * n_rot);
  const auto x = randn(static_cast<size_t>(n_tok * ld), 41, 2.0f);
  const auto qw = randn(static_cast<size_t>(hd), 42), kw = randn(static_cast<size_t>(hd), 43);

  // The CPU at each token's own position.
  ThreadPool pool(1);
  const engine::Exec ex{&pool, engine::ActType::kF32};
  std::vector<float> want = x;
  for (int64_t t = 0; t < n_tok; ++t) {
    float* q = want.data() + t * ld;
    engine::rmsnorm_heads(ex, q, ld, 1, n_head, hd, qw.data(), 1e-6f);
    engine::rmsnorm_heads(ex, q + q_dim, ld, 1, n_kv, hd, kw.data(), 1e-6f);
    engine::RopeCache cache;
    cache.build(rp, nullptr, pos[static_cast<size_t>(t)], 1);
    engine::rope_apply(ex, cache, q, ld, 1, n_head, hd);
    engine::rope_apply(ex, cache, q + q_dim, ld, 1, n_kv, hd);
  }

  for (const KvType kt : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    SCOPED_TRACE("kv type " + std::to_string(static_cast<int>(kt)));
    const size_t es = kt == KvType::kF32 ? 4 : 2;
    const std::vector<uint8_t> fill(static_cast<size_t>(n_seq * n_ctx * (k_dim + v_dim)) * es, 0xA5);
    DeviceBuffer dcs = to_device(cs), dqw = to_device(qw), dkw = to_device(kw), dpos = to_device(pos),
                 dbase = to_device(base);
    DeviceBuffer xa = to_device(x), xb = to_device(x);
    DeviceBuffer ka = to_device(fill), va = to_device(fill), kb = to_device(fill), vb = to_device(fill);
    auto store = [&](DeviceBuffer& xd, DeviceBuffer& k, DeviceBuffer& v, int64_t row0) {
      KvStore st;
      st.type = kt;
      st.k_cache = static_cast<uint8_t*>(k.get()) + static_cast<size_t>(row0 * k_dim) * es;
      st.v_cache = static_cast<uint8_t*>(v.get()) + static_cast<size_t>(row0 * v_dim) * es;
      st.v = xd.as<float>() + q_dim + k_dim;
      st.ldv = ld;
      st.v_head_dim = hd_v;
      return st;
    };
    qk_norm_rope_store_batch(xa.as<float>(), ld, n_tok, n_head, n_kv, hd, dqw.as<float>(), dkw.as<float>(), 1e-6f,
                             dcs.as<float>(), n_rot, true, dpos.as<int32_t>(), dbase.as<int32_t>(), Round::kNone,
                             store(xa, ka, va, 0), nullptr);
    for (int64_t t = 0; t < n_tok; ++t) {
      KvStore st = store(xb, kb, vb, base[static_cast<size_t>(t)]);
      st.v += t * ld;
      qk_norm_rope_store(xb.as<float>() + t * ld, ld, 1, n_head, n_kv, hd, dqw.as<float>(), dkw.as<float>(), 1e-6f,
                         dcs.as<float>(), n_rot, true, dpos.as<int32_t>() + t, Round::kNone, st, nullptr);
    }
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const Diff d = compare(to_host<float>(xa, x.size()), want, 0);
    EXPECT_EQ(d.bad, 0) << d.first_bad;
    EXPECT_EQ(to_host<float>(xa, x.size()), to_host<float>(xb, x.size()));
    EXPECT_EQ(to_host<uint8_t>(ka, fill.size()), to_host<uint8_t>(kb, fill.size()));
    EXPECT_EQ(to_host<uint8_t>(va, fill.size()), to_host<uint8_t>(vb, fill.size()));
    EXPECT_NE(to_host<uint8_t>(ka, fill.size()), fill);
  }
}

}  // namespace
}  // namespace ft::cuda
