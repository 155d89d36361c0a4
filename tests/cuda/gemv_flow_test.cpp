// The step flow gate|up -> down (cuda::GemvArgs::flow_count, cuda/gemv_flow.cuh): the down
// projection that reads the SwiGLU row step by step while the gate|up launch writes it gives the
// bits of the pair without the flow -- gate|up's product, SwiGLU and Q8 rows, the residual after
// the down projection, and the norm fold's producer tail it carries in the decode chain -- and
// leaves its counters at zero (a second round runs on them). Unpaired calls fall back to the
// plain launches and leave the counters zero too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "../quant/random_blocks.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

struct Tiled {
  int64_t rb = 0;
  DeviceBuffer w;
};

Tiled tiled_matrix(int64_t rows, int64_t k, std::mt19937& rng) {
  Tiled m;
  m.rb = row_bytes(GgmlType::NVFP4, k);
  m.w = to_device(quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng));
  nvfp4_tile(m.w.as<uint8_t>(), rows, m.rb, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

std::vector<float> random_row(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
  return x;
}

struct PairOut {
  std::vector<float> gu, h, x;
  std::vector<double> nq_part;
  std::vector<uint8_t> q, nq_xq;
};

TEST(CudaGemvFlow, PairEqualsThePlainPairBitwise) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(3907);
  // Llama-8B's layer (down 8 warps x 4 stages), and a small one.
  for (const auto& [n_ff, n_embd, fold] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {14336, 4096, true}, {14336, 4096, false}, {1024, 512, true}}) {
    SCOPED_TRACE("n_ff " + std::to_string(n_ff) + " n_embd " + std::to_string(n_embd) + (fold ? " fold" : ""));
    const Tiled gu_w = tiled_matrix(2 * n_ff, n_embd, rng), down_w = tiled_matrix(n_embd, n_ff, rng);
    std::vector<uint8_t> xq(act_q8_bytes(n_embd, 1));
    const std::vector<float> x_in = random_row(n_embd, rng);
    quantize_act_q8_row_ref(x_in.data(), n_embd, xq.data());
    const DeviceBuffer dxq = to_device(xq);
    std::uniform_real_distribution<float> unit(0.5f, 1.5f);
    std::vector<float> rs(static_cast<size_t>(2 * n_ff)), nw(static_cast<size_t>(n_embd));
    for (auto& v : rs) v = unit(rng);
    for (auto& v : nw) v = unit(rng);
    const DeviceBuffer drs = to_device(rs), dnw = to_device(nw);
    const std::vector<float> resid = random_row(n_embd, rng);
    DeviceBuffer glu_count = to_device(std::vector<unsigned>(static_cast<size_t>(n_ff / 32), 0u));
    DeviceBuffer nq_count = to_device(std::vector<unsigned>(static_cast<size_t>(n_embd / 32), 0u));
    const size_t n_flow = static_cast<size_t>(gemv_flow_counters(n_ff));
    DeviceBuffer flow = to_device(std::vector<unsigned>(n_flow, 0u));
    const int64_t qb = act_q8_bytes(n_ff, 1), nqb = act_q8_bytes(n_embd, 1);

    auto run = [&](bool use_flow, PairOut& o) {
      DeviceBuffer dgu = to_device(std::vector<float>(static_cast<size_t>(2 * n_ff), std::nanf("")));
      DeviceBuffer dh = to_device(std::vector<float>(static_cast<size_t>(n_ff), std::nanf("")));
      DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qb), 0xA5));
      DeviceBuffer dx = to_device(resid);
      DeviceBuffer dnq = to_device(std::vector<uint8_t>(static_cast<size_t>(nqb), 0x5A));
      DeviceBuffer dpart = to_device(std::vector<double>(static_cast<size_t>(n_embd / 32), -1.0));
      GemvArgs a;
      a.type = GgmlType::NVFP4, a.w = gu_w.w.as<uint8_t>(), a.tiled = true, a.row_bytes = gu_w.rb;
      a.k = n_embd, a.rows = 2 * n_ff, a.xq = dxq.get(), a.n_tok = 1, a.y = dgu.as<float>(), a.ldy = 2 * n_ff;
      a.row_scale = drs.as<float>();
      a.scale = 1e-3f;  // random blocks: sums near 1e5 would make SwiGLU values past fp16 Q8 scales
      a.glu_xq = dq.get(), a.glu_h = dh.as<float>(), a.glu_count = glu_count.as<unsigned>();
      if (use_flow) a.flow_count = flow.as<unsigned>();
      gemv(a);
      GemvArgs d;
      d.type = GgmlType::NVFP4, d.w = down_w.w.as<uint8_t>(), d.tiled = true, d.row_bytes = down_w.rb;
      d.k = n_ff, d.rows = n_embd, d.xq = dq.get(), d.n_tok = 1, d.y = dx.as<float>(), d.ldy = n_embd;
      d.accumulate = true, d.y_early = true;
      d.scale = 1e-3f;
      if (fold)
        d.nq_w = dnw.as<float>(), d.nq_xq = dnq.get(), d.nq_part = dpart.as<double>(),
        d.nq_count = nq_count.as<unsigned>();
      if (use_flow) d.flow_count = flow.as<unsigned>();
      gemv(d);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      o.gu = to_host<float>(dgu, static_cast<size_t>(2 * n_ff));
      o.h = to_host<float>(dh, static_cast<size_t>(n_ff));
      o.q = to_host<uint8_t>(dq, static_cast<size_t>(qb));
      o.x = to_host<float>(dx, static_cast<size_t>(n_embd));
      o.nq_xq = to_host<uint8_t>(dnq, static_cast<size_t>(nqb));
      const std::vector<double> part = to_host<double>(dpart, static_cast<size_t>(n_embd / 32));
      o.nq_part = part;
    };
    PairOut want, got;
    run(false, want);
    auto bad = [](const std::vector<float>& v) {
      size_t n = 0;
      for (float f : v) n += std::isfinite(f) ? 0 : 1;
      return n;
    };
    ASSERT_EQ(bad(want.gu), 0u) << "gate|up outputs not finite";
    ASSERT_EQ(bad(want.h), 0u) << "SwiGLU rows not finite";
    for (size_t i = 0; i < want.x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(want.x[i])) << "residual " << i << ": " << want.x[i] << " of " << bad(want.x);
      ASSERT_NE(want.x[i], resid[i]) << "down row " << i << " not added";
    }
    if (fold) {
      for (size_t i = 0; i < want.nq_part.size(); ++i)
        ASSERT_TRUE(std::isfinite(want.nq_part[i]) && want.nq_part[i] > 0) << "norm sum " << i;
    }
    const bool llama = n_ff == 14336;
    for (int rep = 0; rep < 2; ++rep) {
      const int64_t f0 = gemv_flow_launches();
      run(true, got);
      // Llama-8B's plans are the flow's instances (gemv_mma.cu): both launches take it there.
      if (llama) {
        EXPECT_EQ(gemv_flow_launches() - f0, 2) << "the pair did not take the flow";
      }
      ASSERT_EQ(std::memcmp(got.gu.data(), want.gu.data(), want.gu.size() * 4), 0) << "gate|up outputs differ";
      ASSERT_EQ(std::memcmp(got.h.data(), want.h.data(), want.h.size() * 4), 0) << "SwiGLU rows differ";
      ASSERT_EQ(got.q, want.q) << "SwiGLU Q8 bytes differ";
      ASSERT_EQ(std::memcmp(got.x.data(), want.x.data(), want.x.size() * 4), 0) << "residual after down differs";
      if (fold) {
        ASSERT_EQ(got.nq_xq, want.nq_xq) << "norm fold Q8 bytes differ";
        ASSERT_EQ(got.nq_part, want.nq_part) << "norm fold sums differ";
      }
      const std::vector<unsigned> cnt = to_host<unsigned>(flow, n_flow);
      for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "flow counter " << i << " left armed";
    }
  }
}

// Unpaired calls: a consumer with no producer before it, and a producer whose next call is not its
// consumer, run the plain launches (no flow) and leave the counters zero.
TEST(CudaGemvFlow, UnpairedCallsRunPlain) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(11);
  const int64_t n_ff = 14336, n_embd = 4096;
  const Tiled gu_w = tiled_matrix(2 * n_ff, n_embd, rng), down_w = tiled_matrix(n_embd, n_ff, rng);
  std::vector<uint8_t> xq(act_q8_bytes(n_embd, 1)), hq(act_q8_bytes(n_ff, 1));
  const std::vector<float> x_in = random_row(n_embd, rng), h_in = random_row(n_ff, rng);
  quantize_act_q8_row_ref(x_in.data(), n_embd, xq.data());
  quantize_act_q8_row_ref(h_in.data(), n_ff, hq.data());
  const DeviceBuffer dxq = to_device(xq), dhq = to_device(hq);
  const size_t n_flow = static_cast<size_t>(gemv_flow_counters(n_ff));
  DeviceBuffer flow = to_device(std::vector<unsigned>(n_flow, 0u));
  DeviceBuffer glu_count = to_device(std::vector<unsigned>(static_cast<size_t>(n_ff / 32), 0u));
  DeviceBuffer dgu(static_cast<size_t>(2 * n_ff) * 4), dh(static_cast<size_t>(n_ff) * 4),
      dq(static_cast<size_t>(act_q8_bytes(n_ff, 1)));
  GemvArgs a;
  a.type = GgmlType::NVFP4, a.w = gu_w.w.as<uint8_t>(), a.tiled = true, a.row_bytes = gu_w.rb;
  a.k = n_embd, a.rows = 2 * n_ff, a.xq = dxq.get(), a.n_tok = 1, a.y = dgu.as<float>(), a.ldy = 2 * n_ff;
  a.glu_xq = dq.get(), a.glu_h = dh.as<float>(), a.glu_count = glu_count.as<unsigned>();
  a.flow_count = flow.as<unsigned>();
  const std::vector<float> resid = random_row(n_embd, rng);
  auto down = [&](bool with_flow) {
    DeviceBuffer dx = to_device(resid);
    GemvArgs d;
    d.type = GgmlType::NVFP4, d.w = down_w.w.as<uint8_t>(), d.tiled = true, d.row_bytes = down_w.rb;
    d.k = n_ff, d.rows = n_embd, d.xq = dhq.get(), d.n_tok = 1, d.y = dx.as<float>(), d.ldy = n_embd;
    d.accumulate = true, d.y_early = true;
    if (with_flow) d.flow_count = flow.as<unsigned>();
    gemv(d);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    return to_host<float>(dx, static_cast<size_t>(n_embd));
  };
  const std::vector<float> want = down(false);
  int64_t f0 = gemv_flow_launches();
  EXPECT_EQ(down(true), want) << "a consumer without its producer";
  EXPECT_EQ(gemv_flow_launches(), f0) << "a consumer without its producer took the flow";
  gemv(a);  // armed ...
  f0 = gemv_flow_launches();
  EXPECT_EQ(down(false), want) << "a plain call after an armed producer";  // ... and disarmed
  EXPECT_EQ(gemv_flow_launches(), f0);
  std::vector<unsigned> cnt = to_host<unsigned>(flow, n_flow);
  for (size_t i = 0; i < cnt.size(); ++i) ASSERT_EQ(cnt[i], 0u) << "flow counter " << i << " left armed";
  EXPECT_EQ(down(true), want) << "a consumer after the disarming call";
  EXPECT_EQ(gemv_flow_launches(), f0);
}

}  // namespace
}  // namespace ft::cuda
