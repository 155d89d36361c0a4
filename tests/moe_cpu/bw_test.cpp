// The pieces of `ft bench-bw` that run without a GPU: the read kernel against its plain
// twin, the host read measurement, and the synthetic expert banks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cpu_features.h"
#include "moe_cpu/gemv_bw.h"
#include "moe_cpu/host_bw.h"

namespace ft::moe_cpu {
namespace {

// Small integers: every order of summation is exact, so the kernels must agree bit for bit.
TEST(HostBw, ReadSumMatchesTwin) {
  std::vector<float> v(64 * 1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * 7919 % 13) - 6);
  const float ref = read_sum_ref(v.data(), v.size());
  double exact = 0;
  for (float x : v) exact += x;
  EXPECT_EQ(ref, static_cast<float>(exact));
  EXPECT_EQ(read_sum(v.data(), v.size()), ref);
  if (isa_supported(Isa::kAvx2)) {
    EXPECT_EQ(detail::read_sum_avx2(v.data(), v.size()), ref);
  }
}

TEST(HostBw, MeasuresAndReadsEverything) {
  ThreadPool pool(2);
  const auto r = host_read_bandwidth(pool, size_t{8} << 20, 2);
  EXPECT_GT(r.gbs, 0.0);
  EXPECT_GE(r.gbs, r.mean_gbs);
  // 3 passes (warm-up included) over 8 MiB of 1/(1 + (i mod 1024)).
  double one = 0;
  for (int i = 0; i < 1024; ++i) one += 1.0 / (1 + i);
  const double expect = 3.0 * one * ((size_t{8} << 20) / sizeof(float) / 1024);
  EXPECT_NEAR(r.checksum, expect, 1e-3 * expect);
}

TEST(GemvBw, SyntheticExpertsRun) {
  ExpertGeometry g;
  g.type = GgmlType::Q8_0;
  g.n_embd = 128;
  g.n_ff = 64;
  g.n_expert = 16;
  g.n_used = 4;
  SyntheticExperts se;
  make_synthetic_experts(g, 6 * g.expert_bytes(), se);
  EXPECT_EQ(se.h.n_expert, 6);  // capped by bytes
  ThreadPool pool(2);
  ExpertExecutor ex(pool);
  const auto r = expert_gemv_bandwidth(ex, se.h, ExpertNumerics{}, g.n_used, 5, 1);
  EXPECT_EQ(r.calls, 5);
  EXPECT_EQ(r.bytes_per_call, 4 * g.expert_bytes());
  EXPECT_GT(r.gbs, 0.0);
}

}  // namespace
}  // namespace ft::moe_cpu
