// Sliding-window attention over a ring KV cache (gemma4's sliding layers) and the GELU of
// geglu.h.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/attention.h"
#include "engine/geglu.h"
#include "test_util.h"

namespace ft::engine {
namespace {

// A ring of window + batch - 1 rows, written batch by batch, gives what a full cache gives
// (threaded and scalar twin), and the window changes the result.
TEST(WindowAttention, RingCacheMatchesFullCache) {
  const int64_t window = 5, batch = 3, n_ctx = 32, n_pos = 17;
  AttnShape s{4, 2, 16, 16, 0.25f, window};
  const int64_t kv_dim = s.n_head_kv * s.head_dim_k, q_ld = s.n_head * s.head_dim_k;
  const auto k = test::randn(n_pos * kv_dim, 1, 2.0f), v = test::randn(n_pos * kv_dim, 2);
  const auto q = test::randn(n_pos * q_ld, 3, 2.0f);
  ThreadPool pool(3);
  Exec ex{&pool, ActType::kF32};
  AttnScratch sc;
  KvCache full(ActType::kF32, n_ctx, {kv_dim});
  KvCache ring(ActType::kF32, n_ctx, {kv_dim}, {window + batch - 1});
  ASSERT_EQ(ring.n_cells(0), window + batch - 1);
  ASSERT_LT(ring.bytes(), full.bytes());
  full.store(0, 0, n_pos, k.data(), kv_dim, v.data(), kv_dim);
  std::vector<float> ref(n_pos * q_ld), out(ref.size()), twin(ref.size());
  attention_ref(s, full, 0, q.data(), q_ld, n_pos, 0, ref.data(), q_ld, ActType::kF32);
  for (int64_t p0 = 0; p0 < n_pos; p0 += batch) {
    const int64_t n = std::min(batch, n_pos - p0);
    ring.store(0, p0, n, k.data() + p0 * kv_dim, kv_dim, v.data() + p0 * kv_dim, kv_dim);
    attention(ex, s, ring, 0, q.data() + p0 * q_ld, q_ld, n, p0, out.data() + p0 * q_ld, q_ld, sc);
    attention_ref(s, ring, 0, q.data() + p0 * q_ld, q_ld, n, p0, twin.data() + p0 * q_ld, q_ld, ActType::kF32);
  }
  EXPECT_LT(test::max_abs_diff(out, ref), 1e-5f);
  EXPECT_LT(test::max_abs_diff(twin, ref), 1e-5f);
  s.window = 0;
  std::vector<float> causal(ref.size());
  attention_ref(s, full, 0, q.data(), q_ld, n_pos, 0, causal.data(), q_ld, ActType::kF32);
  EXPECT_GT(test::max_abs_diff(causal, ref), 0.1f);
}

// With window 1 every query sees only its own key: the output is its own V row.
TEST(WindowAttention, WindowOfOneIsOwnValue) {
  const AttnShape s{2, 1, 8, 8, 1.0f, 1};
  KvCache kv(ActType::kF32, 16, {8}, {1});
  const auto k = test::randn(6 * 8, 4), v = test::randn(6 * 8, 5), q = test::randn(6 * 16, 6);
  ThreadPool pool(2);
  Exec ex{&pool, ActType::kF32};
  AttnScratch sc;
  std::vector<float> out(16);
  for (int64_t p = 0; p < 6; ++p) {
    kv.store(0, p, 1, k.data() + p * 8, 8, v.data() + p * 8, 8);
    attention(ex, s, kv, 0, q.data() + p * 16, 16, 1, p, out.data(), 16, sc);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[h * 8 + i], v[p * 8 + i]);
  }
}

// gelu() follows ggml-cpu's fp16 table: fp16-rounded input and output, 0 below -10, x above 10.
TEST(Gelu, TableSemantics) {
  EXPECT_EQ(gelu(-10.0f), 0.0f);
  EXPECT_EQ(gelu(-25.0f), 0.0f);
  EXPECT_EQ(gelu(10.0f), 10.0f);
  EXPECT_EQ(gelu(12.5f), 12.5f);
  EXPECT_EQ(gelu(0.0f), 0.0f);
  for (float x = -9.9f; x < 9.9f; x += 0.0137f) {
    const float xr = f16_to_f32(f32_to_f16(x));
    EXPECT_EQ(gelu(x), f16_to_f32(f32_to_f16(gelu_tanh_f32(xr)))) << x;
    EXPECT_NEAR(gelu(x), gelu_tanh_f32(x), 2e-3f * (1.0f + std::fabs(x))) << x;
  }
  EXPECT_NEAR(gelu_tanh_f32(1.0f), 0.841192f, 1e-5f);  // 0.5 (1 + tanh(sqrt(2/pi) 1.044715))
}

}  // namespace
}  // namespace ft::engine
