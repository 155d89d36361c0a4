// GPU q/k norm + rope (src/cuda/rope.h) against engine::rmsnorm_heads + engine::rope_apply
// on fused qkv rows, bit for bit: both layouts, partial rotation (n_rot < head_dim), with
// and without the qwen3 q/k norms, several head counts and dims, positions read on the
// device, every rounding. The v part of each row must come back untouched.
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

}  // namespace
}  // namespace ft::cuda
