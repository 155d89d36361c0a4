// GPU MoE routing (src/cuda/moe_route.h) against engine::moe_route: random logits over
// expert counts and n_used, and exact ties (integer logits, all-equal rows, ties straddling
// the top-k boundary) where the chosen experts and their order come from std::sort's tie
// order. ids must be identical; weights may differ by 2 ulp (exp, see ops_math.cuh).
#include "cuda/moe_route.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "cuda/act_q8.h"
#include "cuda/norm.h"
#include "engine/moe.h"
#include "format/ggml_type.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

void check(const std::vector<float>& logits, int64_t n_expert, int64_t n_tok, int n_used, const std::string& what) {
  SCOPED_TRACE(what + " n_expert " + std::to_string(n_expert) + " n_used " + std::to_string(n_used));
  const int64_t ld = n_expert + 1;
  std::vector<float> l(static_cast<size_t>(n_tok * ld), poison());
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t e = 0; e < n_expert; ++e) l[static_cast<size_t>(t * ld + e)] = logits[static_cast<size_t>(t * n_expert + e)];
  std::vector<int32_t> want_ids(static_cast<size_t>(n_tok * n_used)), order(static_cast<size_t>(n_expert));
  std::vector<float> want_w(want_ids.size()), probs(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tok; ++t)
    engine::moe_route(l.data() + t * ld, n_expert, n_used, probs.data(), order.data(), want_ids.data() + t * n_used,
                      want_w.data() + t * n_used);
  DeviceBuffer dl = to_device(l), dids(want_ids.size() * 4), dw(want_w.size() * 4);
  moe_route(dl.as<float>(), ld, n_expert, n_tok, n_used, dids.as<int32_t>(), dw.as<float>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto ids = to_host<int32_t>(dids, want_ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], want_ids[i]) << "token " << i / n_used << " rank " << i % n_used;
  const Diff d = compare(to_host<float>(dw, want_w.size()), want_w, 2);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
}

TEST(CudaOpsMoeRoute, RandomLogits) {
  FT_OPS_REQUIRE_GPU();
  for (int64_t n_expert : {1, 8, 60, 128, 256, 300})
    for (int n_used : {1, 2, 4, 8, 40}) {
      if (n_used > n_expert) continue;
      const int64_t n_tok = 37;
      check(randn(static_cast<size_t>(n_tok * n_expert), static_cast<uint64_t>(n_expert * 10 + n_used), 2.0f), n_expert,
            n_tok, n_used, "random");
    }
}

TEST(CudaOpsMoeRoute, ExactTies) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(17);
  for (int64_t n_expert : {8, 17, 60, 128, 256})
    for (int n_used : {1, 2, 8}) {
      if (n_used > n_expert) continue;
      const int64_t n_tok = 24;
      // Integer logits from a few values: many exact ties in and around the top k.
      for (int distinct : {1, 2, 3, 5}) {
        std::uniform_int_distribution<int> pick(0, distinct - 1);
        std::vector<float> l(static_cast<size_t>(n_tok * n_expert));
        for (auto& v : l) v = static_cast<float>(pick(rng));
        check(l, n_expert, n_tok, n_used, "ties over " + std::to_string(distinct) + " values");
      }
      // One clear winner, then a tie across the boundary of the top k.
      std::vector<float> l(static_cast<size_t>(n_tok * n_expert), -3.0f);
      for (int64_t t = 0; t < n_tok; ++t) {
        l[static_cast<size_t>(t * n_expert + (t * 5) % n_expert)] = 2.0f;
        for (int64_t j = 0; j < n_used + 1; ++j) l[static_cast<size_t>(t * n_expert + (t + 3 * j + 1) % n_expert)] = 0.5f;
      }
      check(l, n_expert, n_tok, n_used, "boundary tie");
    }
}

// Random router rows (n_expert x k, `type` F32 / BF16 / F16, row_bytes apart, seeded by seed):
// the bytes, and in wq the values they hold. dup_rows: experts 2j and 2j+1 get the same row
// (exactly tied logits).
std::vector<uint8_t> router_rows(GgmlType type, int64_t n_expert, int64_t k, int64_t row_bytes, uint64_t seed,
                                 bool dup_rows, std::vector<float>& wq) {
  const int64_t es = type == GgmlType::F32 ? 4 : 2;
  auto wf = randn(static_cast<size_t>(n_expert * k), seed, 0.05f);
  if (dup_rows)
    for (int64_t e = 1; e < n_expert; e += 2)
      for (int64_t i = 0; i < k; ++i) wf[static_cast<size_t>(e * k + i)] = wf[static_cast<size_t>((e - 1) * k + i)];
  std::vector<uint8_t> w(static_cast<size_t>(n_expert * row_bytes), 0);
  wq.assign(wf.size(), 0.0f);
  for (int64_t e = 0; e < n_expert; ++e)
    for (int64_t i = 0; i < k; ++i) {
      const float v = wf[static_cast<size_t>(e * k + i)];
      uint8_t* d = &w[static_cast<size_t>(e * row_bytes + i * es)];
      if (type == GgmlType::F32) {
        std::memcpy(d, &v, 4);
        wq[static_cast<size_t>(e * k + i)] = v;
      } else {
        const uint16_t h = type == GgmlType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(d, &h, 2);
        wq[static_cast<size_t>(e * k + i)] = type == GgmlType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
    }
  return w;
}

// moe_router_route: the logits it writes are the fp32 dot products (checked against double
// sums), and its ids / weights are exactly moe_route's for those logits (engine::moe_route
// on the GPU's own logits: the routing part is bit-exact; ties included, from duplicated
// weight rows). Called three times in a row: the ticket must come back to zero each time.
void check_fused(GgmlType type, int64_t n_expert, int64_t k, int64_t n_tok, int n_used, bool dup_rows) {
  SCOPED_TRACE(std::string(type_name(type)) + " n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
               " n_tok " + std::to_string(n_tok) + " n_used " + std::to_string(n_used) + " dup " +
               std::to_string(dup_rows));
  const int64_t es = type == GgmlType::F32 ? 4 : 2, row_bytes = (k * es + 15) / 16 * 16 + 16;
  std::vector<float> wq;
  const auto w = router_rows(type, n_expert, k, row_bytes, static_cast<uint64_t>(n_expert + k), dup_rows, wq);
  const int64_t ldx = k + 4, ld = n_expert + 3;
  const auto x = randn(static_cast<size_t>(n_tok * ldx), 5, 1.0f);
  DeviceBuffer dwt = to_device(w), dx = to_device(x), dl(static_cast<size_t>(n_tok * ld) * 4),
               dids(static_cast<size_t>(n_tok * n_used) * 4), dwts(static_cast<size_t>(n_tok * n_used) * 4),
               dticket = to_device(std::vector<uint32_t>{0});
  for (int rep = 0; rep < 3; ++rep)
    moe_router_route(dx.as<float>(), ldx, n_tok, type, dwt.get(), row_bytes, k, n_expert, dl.as<float>(), ld, n_used,
                     dids.as<int32_t>(), dwts.as<float>(), dticket.as<unsigned>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(to_host<uint32_t>(dticket, 1)[0], 0u);
  const auto l = to_host<float>(dl, static_cast<size_t>(n_tok * ld));
  const auto ids = to_host<int32_t>(dids, static_cast<size_t>(n_tok * n_used));
  const auto wts = to_host<float>(dwts, ids.size());
  std::vector<int32_t> want_ids(ids.size()), order(static_cast<size_t>(n_expert));
  std::vector<float> want_w(ids.size()), probs(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t e = 0; e < n_expert; ++e) {
      double dot = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double p = static_cast<double>(wq[static_cast<size_t>(e * k + i)]) * x[static_cast<size_t>(t * ldx + i)];
        dot += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(l[static_cast<size_t>(t * ld + e)], dot, 4e-6 * mag + 1e-30) << "token " << t << " expert " << e;
    }
    engine::moe_route(l.data() + t * ld, n_expert, n_used, probs.data(), order.data(), want_ids.data() + t * n_used,
                      want_w.data() + t * n_used);
  }
  EXPECT_EQ(ids, want_ids);
  const Diff d = compare(wts, want_w, 2);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
}

TEST(CudaOpsMoeRoute, RouterFused) {
  FT_OPS_REQUIRE_GPU();
  check_fused(GgmlType::F32, 128, 2048, 1, 8, false);
  check_fused(GgmlType::F32, 128, 2048, 1, 8, true);
  check_fused(GgmlType::BF16, 128, 4096, 3, 8, false);
  check_fused(GgmlType::F16, 60, 1028, 8, 4, true);
  check_fused(GgmlType::F32, 8, 64, 2, 2, false);
  check_fused(GgmlType::BF16, 256, 2048, 5, 8, true);
  check_fused(GgmlType::F32, 1, 32, 1, 1, false);
}

// moe_norm_router_route (one token) writes the bits of rmsnorm_q8 then moe_router_route on its
// output: h, the Q8 copy, the logits, ids and weights, memcmp; with and without norm weights,
// rounding, widths of 1, 2, 4 and 8 float4 per thread, weight types, tied router rows.
void check_norm_fused(GgmlType type, int64_t n_expert, int64_t k, int n_used, bool weighted, Round round,
                      bool dup_rows) {
  SCOPED_TRACE(std::string(type_name(type)) + " n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
               " weighted " + std::to_string(weighted) + " dup " + std::to_string(dup_rows));
  const int64_t es = type == GgmlType::F32 ? 4 : 2, row_bytes = (k * es + 15) / 16 * 16;
  std::vector<float> wq;
  const auto w = router_rows(type, n_expert, k, row_bytes, static_cast<uint64_t>(n_expert + 3 * k), dup_rows, wq);
  const auto x = randn(static_cast<size_t>(k), 11 + static_cast<uint64_t>(k), 3.0f);
  auto nw = randn(static_cast<size_t>(k), 7, 0.3f);
  for (auto& v : nw) v += 1.0f;
  const int64_t xqb = act_q8_row_bytes(k);
  DeviceBuffer dwt = to_device(w), dx = to_device(x), dnw = to_device(nw), dticket = to_device(std::vector<uint32_t>{0});
  struct Out {
    DeviceBuffer h, xq, l, ids, wts;
  };
  auto out = [&]() {
    return Out{DeviceBuffer(static_cast<size_t>(k) * 4), DeviceBuffer(static_cast<size_t>(xqb)),
               DeviceBuffer(static_cast<size_t>(n_expert) * 4), DeviceBuffer(static_cast<size_t>(n_used) * 4),
               DeviceBuffer(static_cast<size_t>(n_used) * 4)};
  };
  Out a = out(), b = out();
  const float* nwp = weighted ? dnw.as<float>() : nullptr;
  rmsnorm_q8(dx.as<float>(), k, nwp, k, 1e-6f, 1, a.h.as<float>(), k, round, a.xq.get(), nullptr);
  moe_router_route(a.h.as<float>(), k, 1, type, dwt.get(), row_bytes, k, n_expert, a.l.as<float>(), n_expert, n_used,
                   a.ids.as<int32_t>(), a.wts.as<float>(), dticket.as<unsigned>(), nullptr);
  for (int rep = 0; rep < 2; ++rep)
    moe_norm_router_route(dx.as<float>(), nwp, 1e-6f, round, b.h.as<float>(), b.xq.get(), k, type, dwt.get(),
                          row_bytes, n_expert, b.l.as<float>(), n_expert, n_used, b.ids.as<int32_t>(),
                          b.wts.as<float>(), dticket.as<unsigned>(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(to_host<uint32_t>(dticket, 1)[0], 0u);
  auto same = [](const DeviceBuffer& p, const DeviceBuffer& q, size_t n, const char* what) {
    const auto u = to_host<uint8_t>(p, n), v = to_host<uint8_t>(q, n);
    EXPECT_EQ(std::memcmp(u.data(), v.data(), n), 0) << what << " differs";
  };
  same(a.h, b.h, static_cast<size_t>(k) * 4, "h");
  same(a.xq, b.xq, static_cast<size_t>(xqb), "Q8 copy");
  same(a.l, b.l, static_cast<size_t>(n_expert) * 4, "logits");
  same(a.ids, b.ids, static_cast<size_t>(n_used) * 4, "ids");
  same(a.wts, b.wts, static_cast<size_t>(n_used) * 4, "weights");
}

TEST(CudaOpsMoeRoute, NormRouterFusedEqualsNormThenRouter) {
  FT_OPS_REQUIRE_GPU();
  check_norm_fused(GgmlType::F32, 128, 2048, 8, true, Round::kNone, false);  // Qwen3-30B-A3B
  check_norm_fused(GgmlType::F32, 128, 2048, 8, true, Round::kNone, true);
  check_norm_fused(GgmlType::BF16, 64, 4096, 6, false, Round::kBF16, false);
  check_norm_fused(GgmlType::F16, 256, 1024, 8, true, Round::kF16, true);
  check_norm_fused(GgmlType::F32, 60, 8192, 4, true, Round::kNone, false);
  check_norm_fused(GgmlType::F32, 8, 96, 2, true, Round::kNone, false);
  EXPECT_FALSE(moe_norm_router_route_supported(GgmlType::F32, 8224, 8224 * 4));
  EXPECT_FALSE(moe_norm_router_route_supported(GgmlType::Q8_0, 2048, 2176));
}

// The warp route (default up to 256 experts / 32 chosen) and the block route give the same
// bits: ids and weights of moe_route and of moe_router_route with each, over expert counts
// around the warp's limits (a partial last group, a partial last lane, exactly 256), random
// and tied logits; past the limits (300 experts, 40 chosen) both calls take the block route.
TEST(CudaOpsMoeRoute, WarpEqualsBlock) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(23);
  struct Reset {
    ~Reset() { moe_route_set_warp(-1); }
  } reset;
  for (int64_t n_expert : {1, 7, 8, 13, 60, 128, 250, 256, 300})
    for (int n_used : {1, 2, 8, 32, 40}) {
      if (n_used > n_expert) continue;
      for (int kind = 0; kind < 3; ++kind) {
        SCOPED_TRACE("n_expert " + std::to_string(n_expert) + " n_used " + std::to_string(n_used) +
                     (kind == 0 ? " random" : kind == 1 ? " ties" : " near ties"));
        const int64_t n_tok = 9, ld = n_expert + 2;
        std::vector<float> l = randn(static_cast<size_t>(n_tok * ld), static_cast<uint64_t>(n_expert * 7 + n_used), 3.0f);
        if (kind == 1) {
          std::uniform_int_distribution<int> pick(0, 3);
          for (auto& v : l) v = static_cast<float>(pick(rng));
        }
        if (kind == 2) {  // a few values a few ulps apart: ties in e or made by p's rounding, and none
          std::uniform_int_distribution<int> pick(0, 3), ulp(0, 3);
          for (auto& v : l) {
            float x = 0.25f * static_cast<float>(pick(rng));
            for (int u = ulp(rng); u > 0; --u) x = std::nextafter(x, 2.0f);
            v = x;
          }
        }
        DeviceBuffer dl = to_device(l);
        // Modes (moe_route_set_warp): 0 the block route, 1 the warp route with its fast path,
        // 2 without it, 3 the fast path alone (ids -1 where it finds a tie).
        std::vector<int32_t> ids[4];
        std::vector<float> wts[4];
        for (int warp = 0; warp < 4; ++warp) {
          moe_route_set_warp(warp);
          DeviceBuffer di(static_cast<size_t>(n_tok * n_used) * 4), dw(static_cast<size_t>(n_tok * n_used) * 4);
          moe_route(dl.as<float>(), ld, n_expert, n_tok, n_used, di.as<int32_t>(), dw.as<float>(), nullptr);
          FT_CUDA_CHECK(cudaDeviceSynchronize());
          ids[warp] = to_host<int32_t>(di, static_cast<size_t>(n_tok * n_used));
          wts[warp] = to_host<float>(dw, static_cast<size_t>(n_tok * n_used));
        }
        for (int warp = 1; warp < 3; ++warp) {
          EXPECT_EQ(ids[0], ids[warp]) << "mode " << warp;
          ASSERT_EQ(std::memcmp(wts[0].data(), wts[warp].data(), wts[0].size() * 4), 0) << "weights differ, mode " << warp;
        }
        // The fast path alone: every token it does not flag as tied is the block route's, bit for bit;
        // random logits (where the warp route fits) never flag.
        int flagged = 0;
        for (int64_t t = 0; t < n_tok; ++t) {
          const size_t o = static_cast<size_t>(t * n_used);
          if (ids[3][o] == -1) {
            ++flagged;
            continue;
          }
          for (int r = 0; r < n_used; ++r) {
            ASSERT_EQ(ids[3][o + r], ids[0][o + r]) << "fast path, token " << t << " rank " << r;
            ASSERT_EQ(std::memcmp(&wts[3][o + r], &wts[0][o + r], 4), 0) << "fast path weight, token " << t;
          }
        }
        if (kind == 0 && n_expert <= 256 && n_used <= 32) {
          EXPECT_EQ(flagged, 0) << "random logits flagged as tied";
        }
        if (kind == 1 && n_expert >= 8 && n_expert <= 256 && n_used <= 32) {
          EXPECT_GT(flagged, 0) << "no tie found among integer logits";
        }
        if (n_used > 8) continue;
        // The fused router's last block, both ways, on the same weights (8 tokens: 8 warps).
        const int64_t k = 64, fused_tok = 8;
        const auto wf = randn(static_cast<size_t>(n_expert * k), static_cast<uint64_t>(n_expert + 99), 0.3f);
        auto x = randn(static_cast<size_t>(fused_tok * k), 3, 1.0f);
        if (kind == 1)  // integer products: tied logits
          for (auto& v : x) v = std::round(v);
        std::vector<float> wr(wf.size());
        for (size_t i = 0; i < wf.size(); ++i) wr[i] = kind == 1 ? std::round(wf[i] * 4.0f) : wf[i];
        DeviceBuffer dwt = to_device(wr), dx = to_device(x), dticket = to_device(std::vector<uint32_t>{0});
        for (int warp = 0; warp < 2; ++warp) {
          moe_route_set_warp(warp);  // 0 block, 1 warp (fast path)
          DeviceBuffer dlog(static_cast<size_t>(fused_tok * n_expert) * 4),
              di(static_cast<size_t>(fused_tok * n_used) * 4), dw(static_cast<size_t>(fused_tok * n_used) * 4);
          moe_router_route(dx.as<float>(), k, fused_tok, GgmlType::F32, dwt.get(), k * 4, k, n_expert,
                           dlog.as<float>(), n_expert, n_used, di.as<int32_t>(), dw.as<float>(),
                           dticket.as<unsigned>(), nullptr);
          FT_CUDA_CHECK(cudaDeviceSynchronize());
          ids[warp] = to_host<int32_t>(di, static_cast<size_t>(fused_tok * n_used));
          wts[warp] = to_host<float>(dw, static_cast<size_t>(fused_tok * n_used));
        }
        EXPECT_EQ(to_host<uint32_t>(dticket, 1)[0], 0u);
        EXPECT_EQ(ids[0], ids[1]) << "fused router";
        ASSERT_EQ(std::memcmp(wts[0].data(), wts[1].data(), wts[0].size() * 4), 0) << "fused router weights differ";
      }
    }
}

TEST(CudaOpsMoeRoute, RouterFusedRefusesQuantisedWeights) {
  EXPECT_FALSE(moe_router_route_supported(GgmlType::Q8_0, 2048, 2176, 1));
  EXPECT_FALSE(moe_router_route_supported(GgmlType::F32, 2048, 8192, 9));
  EXPECT_TRUE(moe_router_route_supported(GgmlType::BF16, 2048, 4096, 8));
}

}  // namespace
}  // namespace ft::cuda
