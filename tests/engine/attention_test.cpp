#include "engine/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace ft::engine {
namespace {

// Multi-threaded attention vs the scalar twin: GQA, a batch at pos0 > 0, each cache dtype.
TEST(Attention, MatchesReference) {
  const AttnShape s{8, 2, 32, 32, 1.0f / std::sqrt(32.0f)};
  const int64_t n_ctx = 40, pos0 = 11, n_tok = 6, kv_dim = s.n_head_kv * s.head_dim_k;
  ThreadPool pool(3);
  for (ActType act : {ActType::kF32, ActType::kBF16, ActType::kF16}) {
    KvCache kv(act, n_ctx, {kv_dim, kv_dim});
    const auto k = test::randn((pos0 + n_tok) * kv_dim, 1, 2.0f), v = test::randn((pos0 + n_tok) * kv_dim, 2);
    kv.store(1, 0, pos0 + n_tok, k.data(), kv_dim, v.data(), kv_dim);
    const auto q = test::randn(n_tok * s.n_head * s.head_dim_k, 3, 2.0f);
    std::vector<float> out(n_tok * s.n_head * s.head_dim_v), ref(out.size());
    Exec ex{&pool, act};
    AttnScratch sc;
    attention(ex, s, kv, 1, q.data(), s.n_head * s.head_dim_k, n_tok, pos0, out.data(),
              s.n_head * s.head_dim_v, sc);
    attention_ref(s, kv, 1, q.data(), s.n_head * s.head_dim_k, n_tok, pos0, ref.data(),
                  s.n_head * s.head_dim_v, act);
    const float tol = act == ActType::kF32 ? 1e-5f : 1e-2f;
    EXPECT_LT(test::max_abs_diff(out, ref), tol) << act_type_name(act);
  }
}

// Independent facts: with one visible key the output is that key's V; causality means the
// first token of a batch at pos0 = 0 sees only itself, whatever later keys hold.
TEST(Attention, CausalAndSingleKey) {
  const AttnShape s{4, 1, 8, 8, 0.5f};
  const int64_t kv_dim = 8;
  KvCache kv(ActType::kF32, 8, {kv_dim});
  auto k = test::randn(3 * kv_dim, 4), v = test::randn(3 * kv_dim, 5);
  kv.store(0, 0, 3, k.data(), kv_dim, v.data(), kv_dim);
  const auto q = test::randn(3 * 4 * 8, 6);
  ThreadPool pool(2);
  Exec ex{&pool, ActType::kF32};
  AttnScratch sc;
  std::vector<float> out(3 * 32);
  attention(ex, s, kv, 0, q.data(), 32, 3, 0, out.data(), 32, sc);
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[h * 8 + i], v[i]);  // token 0: only key 0

  // Two equal keys: softmax is uniform, the output is the mean of their V rows.
  for (int i = 0; i < 8; ++i) k[8 + i] = k[i];
  kv.store(0, 0, 2, k.data(), kv_dim, v.data(), kv_dim);
  attention(ex, s, kv, 0, q.data(), 32, 1, 1, out.data(), 32, sc);  // query at pos 1
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], 0.5f * (v[i] + v[8 + i]), 1e-5f);
}

}  // namespace
}  // namespace ft::engine
