// The rope inside the decode attention (AttnArgs::qkv_raw) against qk_norm_rope_store then
// attention on the same raw q | k | v row: the same output bytes, Q8 copy and caches (the new K
// and V rows stored, nothing else touched), for every cache type, head dims 32-128, both rope
// layouts, partial rotation, with and without the q/k norms, positions in the first chunk and in
// the last of several (split keys), several row blocks per KV head, launch after launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/attention.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/rope.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using ops_test::poison;

struct RopeAttnCase {
  KvType type;
  int64_t d, n_head, n_kv;
  int n_rot;
  bool neox, norm;
  int64_t pos;
  Round round;
};

std::string describe(const RopeAttnCase& c) {
  return "type " + std::to_string(static_cast<int>(c.type)) + " d " + std::to_string(c.d) + " heads " +
         std::to_string(c.n_head) + "/" + std::to_string(c.n_kv) + " n_rot " + std::to_string(c.n_rot) + " neox " +
         std::to_string(c.neox) + " norm " + std::to_string(c.norm) + " pos " + std::to_string(c.pos) + " round " +
         std::to_string(static_cast<int>(c.round));
}

size_t elem_bytes(KvType t) { return t == KvType::kF32 ? 4 : 2; }

void check(const RopeAttnCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  constexpr int64_t kCtx = 2048;
  const int64_t kv_dim = c.n_kv * c.d, ld = (c.n_head + 2 * c.n_kv) * c.d;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto randv = [&](size_t n, float s) {
    std::vector<float> v(n);
    for (auto& x : v) x = s * nd(rng);
    return v;
  };
  // Caches: every row random (through kv_store, so the bits are of the cache type).
  const auto kf = randv(static_cast<size_t>(kCtx * kv_dim), 1.0f), vf = randv(static_cast<size_t>(kCtx * kv_dim), 1.0f);
  const size_t cache_bytes = static_cast<size_t>(kCtx * kv_dim) * elem_bytes(c.type);
  DeviceBuffer dkf = to_device(kf), dvf = to_device(vf), zero = to_device(std::vector<int32_t>{0});
  DeviceBuffer kc[2] = {DeviceBuffer(cache_bytes), DeviceBuffer(cache_bytes)};
  DeviceBuffer vc[2] = {DeviceBuffer(cache_bytes), DeviceBuffer(cache_bytes)};
  for (int i = 0; i < 2; ++i)
    kv_store(c.type, kc[i].get(), vc[i].get(), kv_dim, kv_dim, dkf.as<float>(), kv_dim, dvf.as<float>(), kv_dim, kCtx,
             zero.as<int32_t>(), nullptr);
  std::vector<float> cs(static_cast<size_t>(kCtx * c.n_rot));
  std::uniform_real_distribution<float> ang(-3.14159f, 3.14159f);
  for (size_t i = 0; i + 1 < cs.size(); i += 2) {
    const float a = ang(rng);
    cs[i] = std::cos(a), cs[i + 1] = std::sin(a);
  }
  const auto qkv = randv(static_cast<size_t>(ld), 2.0f), qw = randv(static_cast<size_t>(c.d), 0.5f),
             kw = randv(static_cast<size_t>(c.d), 0.5f);
  DeviceBuffer dcs = to_device(cs), dqw = to_device(qw), dkw = to_device(kw), dpos = to_device(std::vector<int32_t>{
                                                                                   static_cast<int32_t>(c.pos)});
  const int64_t k = c.n_head * c.d;
  const size_t q8b = act_q8_bytes(k, 1);
  DeviceBuffer x[2] = {to_device(qkv), to_device(qkv)};
  DeviceBuffer out[2] = {to_device(std::vector<float>(static_cast<size_t>(k), poison())),
                         to_device(std::vector<float>(static_cast<size_t>(k), poison()))};
  DeviceBuffer q8[2] = {DeviceBuffer(q8b), DeviceBuffer(q8b)};
  DeviceBuffer ws[2] = {DeviceBuffer(attention_workspace_bytes(c.n_head, 1, kCtx, c.d) + 16),
                        DeviceBuffer(attention_workspace_bytes(c.n_head, 1, kCtx, c.d) + 16)};
  for (int i = 0; i < 2; ++i) attention_workspace_init(ws[i].get(), ws[i].bytes(), nullptr);
  const float* nq = c.norm ? dqw.as<float>() : nullptr;
  const float* nk = c.norm ? dkw.as<float>() : nullptr;
  auto args = [&](int i) {
    AttnArgs a;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_kv;
    a.head_dim_k = a.head_dim_v = c.d;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    a.q = x[i].as<float>();
    a.ldq = ld;
    a.n_tok = 1;
    a.d_pos = dpos.as<int32_t>();
    a.n_ctx = kCtx;
    a.kv_type = c.type;
    a.k_cache = kc[i].get();
    a.v_cache = vc[i].get();
    a.out = out[i].as<float>();
    a.ldo = k;
    a.round = c.round;
    a.ws_zeroed = true;
    a.out_q8 = q8[i].get();
    return a;
  };
  for (int launch = 0; launch < 2; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    // 1: the rope kernel (in place on its copy of the row, K / V into the caches), then attention.
    x[0].upload(qkv.data(), qkv.size() * 4);
    KvStore kv;
    kv.type = c.type;
    kv.k_cache = kc[0].get();
    kv.v_cache = vc[0].get();
    kv.v = x[0].as<float>() + k + kv_dim;
    kv.ldv = ld;
    kv.v_head_dim = c.d;
    qk_norm_rope_store(x[0].as<float>(), ld, 1, c.n_head, c.n_kv, c.d, nq, nk, 1e-6f, dcs.as<float>(), c.n_rot, c.neox,
                       dpos.as<int32_t>(), c.round, kv, nullptr);
    attention(args(0), ws[0].get(), nullptr);
    // 2: one launch on the raw row.
    AttnArgs f = args(1);
    f.qkv_raw = x[1].as<float>();
    f.q_norm_w = nq;
    f.k_norm_w = nk;
    f.rms_eps = 1e-6f;
    f.rope_cs = dcs.as<float>();
    f.n_rot = c.n_rot;
    f.neox = c.neox;
    ASSERT_TRUE(attention_fused_rope_supported(f));
    attention(f, ws[1].get(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto y1 = to_host<float>(out[0], static_cast<size_t>(k)), y2 = to_host<float>(out[1], static_cast<size_t>(k));
    ASSERT_FALSE(ops_test::bits(y1[0]) == ops_test::kPoison) << "reference path wrote no output";
    ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << "attention output differs";
    const auto b1 = to_host<uint8_t>(q8[0], q8b), b2 = to_host<uint8_t>(q8[1], q8b);
    ASSERT_EQ(std::memcmp(b1.data(), b2.data(), q8b), 0) << "Q8 copy differs";
    for (int which = 0; which < 2; ++which) {
      const auto c1 = to_host<uint8_t>(which == 0 ? kc[0] : vc[0], cache_bytes);
      const auto c2 = to_host<uint8_t>(which == 0 ? kc[1] : vc[1], cache_bytes);
      ASSERT_EQ(std::memcmp(c1.data(), c2.data(), cache_bytes), 0) << (which == 0 ? "K" : "V") << " cache differs";
    }
  }
}

TEST(CudaAttention, FusedRopeEqualsRopeThenAttention) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(1313);
  const int64_t heads[][2] = {{8, 2}, {32, 8}, {16, 2}, {3, 1}};
  int n = 0;
  for (KvType t : {KvType::kF32, KvType::kBF16, KvType::kF16})
    for (int64_t d : {32, 64, 128})
      for (int64_t pos : {0, 37, 1500}) {
        const auto& hh = heads[n % 4];
        const RopeAttnCase c{t,         d,        hh[0],          hh[1], static_cast<int>(n % 3 == 2 ? d / 2 : d),
                             n % 2 == 0, n % 4 < 2, pos, n % 5 == 4 ? Round::kBF16 : Round::kNone};
        ++n;
        check(c, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// The same on the tensor-core decode kernel (mode 3: one token, 16-bit caches, head dim 128): the rope
// inside it against qk_norm_rope_store then the same kernel, at each ring depth, the new key in the
// first chunk, inside a later one and as the last of its tile.
TEST(CudaAttention, MmaFusedRopeEqualsRopeThenAttention) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(1414);
  attention_set_decode_override(3);
  const int64_t heads[][2] = {{32, 8}, {32, 4}, {16, 2}, {8, 8}};
  int n = 0;
  for (int ns : {0, 2})
    for (KvType t : {KvType::kBF16, KvType::kF16})
      for (int64_t pos : {0, 37, 1500, 2047}) {
        const auto& hh = heads[n % 4];
        const RopeAttnCase c{t,          128,       hh[0],          hh[1], n % 3 == 2 ? 64 : 128,
                             n % 2 == 0, n % 4 < 2, pos, n % 5 == 4 ? Round::kBF16 : Round::kNone};
        ++n;
        SCOPED_TRACE("stages " + std::to_string(ns));
        attention_set_mma_decode(ns, 1);
        const int64_t before = attention_mma_decode_launches();
        check(c, rng);
        attention_set_mma_decode(-1, -1);
        if (!::testing::Test::HasFatalFailure()) {  // both paths of both launches took the tensor-core kernel
          EXPECT_EQ(attention_mma_decode_launches() - before, 4);
        }
        if (::testing::Test::HasFatalFailure()) break;
      }
  attention_set_decode_override(0);
}

TEST(CudaAttention, FusedRopeDeclinesWhatItCannotTake) {
  AttnArgs a;
  a.n_tok = 1;
  a.head_dim_k = a.head_dim_v = 128;
  a.n_rot = 128;
  EXPECT_TRUE(attention_fused_rope_supported(a));
  a.n_tok = 2;
  EXPECT_FALSE(attention_fused_rope_supported(a));
  a.n_tok = 1;
  a.head_dim_k = a.head_dim_v = 256;
  a.n_rot = 64;
  EXPECT_FALSE(attention_fused_rope_supported(a));
  a.head_dim_k = 128;  // k and v head dims differ
  EXPECT_FALSE(attention_fused_rope_supported(a));
}

}  // namespace
}  // namespace ft::cuda
