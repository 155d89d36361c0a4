// The kernels the gemma4 GPU pass adds, against their CPU twins:
//   * geglu / geglu_q8 / gelu_mul (cuda/geglu.h) vs engine::geglu / engine::gelu_mul: bit for
//     bit (the device reads the host's fp16 GELU table), inputs spanning the +-10 cut-offs;
//   * scale_rows / add_scale_rows / softcap / head_rmsnorm (cuda/row_ops.h) vs the loops of
//     model/gemma4_forward.cpp and engine::rmsnorm_heads;
//   * attention_window + kv_store_ring (cuda/attention_window.h) vs engine::attention_ref over
//     an engine::KvCache ring (n_cells = window + n_ubatch - 1), prompts in chunks that wrap the
//     ring, then decode steps (split over key blocks and merged), head dims 64..512, fp32, f16
//     and bf16 caches, full and windowed;
//   * round_trip_act_q8 (cuda/act_q8.h, --dtype auto's prefill inputs on gemma4): the host twin
//     vs quant::round_trip_act(Q8_0) -- what llama.cpp's CPU build multiplies -- and vs the
//     decode GEMV's own xq blocks, bit for bit (no GPU needed); the kernel vs the twin.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "core/threadpool.h"
#include "cuda/act_q8.h"
#include "cuda/attention_window.h"
#include "cuda/check.h"
#include "cuda/geglu.h"
#include "cuda/row_ops.h"
#include "engine/attention.h"
#include "engine/geglu.h"
#include "engine/norm.h"
#include "quant/act_quant.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

void upload_gelu_table() {
  if (gelu_table_ready()) return;
  std::vector<uint16_t> t(65536);
  for (uint32_t i = 0; i < t.size(); ++i) t[i] = f32_to_f16(engine::gelu_tanh_f32(f16_to_f32(static_cast<uint16_t>(i))));
  gelu_table_set(t.data());
}

TEST(Gemma4Ops, GegluMatchesCpu) {
  FT_OPS_REQUIRE_GPU();
  upload_gelu_table();
  ThreadPool pool(1);
  for (const RoundCase& rc : kRounds)
    for (int64_t n_ff : {64, 704, 1030})
      for (int64_t n_tok : {1, 5, 33}) {
        SCOPED_TRACE(std::string(rc.name) + " n_ff " + std::to_string(n_ff) + " n_tok " + std::to_string(n_tok));
        const int64_t ldgu = 2 * n_ff, ldh = n_ff;
        auto gu = randn(static_cast<size_t>(n_tok * ldgu), static_cast<uint64_t>(n_ff * 7 + n_tok), 5.0f);
        gu[0] = -10.0f, gu[1] = 10.0f, gu[2] = -9.999f, gu[3] = 9.999f, gu[4] = -30.0f, gu[5] = 25.0f;
        std::vector<float> want(static_cast<size_t>(n_tok * ldh));
        engine::geglu(engine::Exec{&pool, rc.cpu}, gu.data(), ldgu, n_ff, n_tok, want.data(), ldh);
        DeviceBuffer dgu = to_device(gu), dh = to_device(std::vector<float>(want.size(), poison()));
        geglu(dgu.as<float>(), ldgu, n_ff, n_tok, dh.as<float>(), ldh, rc.gpu, nullptr);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        const Diff d = compare(to_host<float>(dh, want.size()), want, 0);
        EXPECT_EQ(d.bad, 0) << d.first_bad;
        if (n_ff % 32 == 0) {  // the Q8 copy variant writes the same h
          DeviceBuffer xq(static_cast<size_t>(n_tok * 2 * n_ff + 4096));
          DeviceBuffer dh2 = to_device(std::vector<float>(want.size(), poison()));
          geglu_q8(dgu.as<float>(), ldgu, n_ff, n_tok, dh2.as<float>(), ldh, rc.gpu, xq.get(), nullptr);
          FT_CUDA_CHECK(cudaDeviceSynchronize());
          EXPECT_EQ(compare(to_host<float>(dh2, want.size()), want, 0).bad, 0);
        }
      }
}

TEST(Gemma4Ops, GeluMulMatchesCpu) {
  FT_OPS_REQUIRE_GPU();
  upload_gelu_table();
  ThreadPool pool(1);
  for (const RoundCase& rc : kRounds) {
    const int64_t n = 48, n_tok = 7, ldx = 50, ldm = 4 * 48;
    auto x = randn(static_cast<size_t>(n_tok * ldx), 3, 4.0f);
    const auto mm = randn(static_cast<size_t>(n_tok * ldm), 4, 1.0f);
    std::vector<float> want = x;
    engine::gelu_mul(engine::Exec{&pool, rc.cpu}, want.data(), ldx, mm.data() + 48, ldm, n, n_tok);
    DeviceBuffer dx = to_device(x), dm = to_device(mm);
    gelu_mul(dx.as<float>(), ldx, dm.as<float>() + 48, ldm, n, n_tok, rc.gpu, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const Diff d = compare(to_host<float>(dx, want.size()), want, 0);
    EXPECT_EQ(d.bad, 0) << rc.name << ": " << d.first_bad;
  }
}

TEST(Gemma4Ops, RowOpsMatchCpuLoops) {
  FT_OPS_REQUIRE_GPU();
  ThreadPool pool(1);
  const int64_t n = 160, n_tok = 6, ld = 170;
  const auto x0 = randn(static_cast<size_t>(n_tok * ld), 11, 3.0f);
  const auto w = randn(static_cast<size_t>(n), 12, 1.0f);
  const auto y = randn(static_cast<size_t>(n_tok * ld), 13, 2.0f);
  for (const RoundCase& rc : kRounds) {
    SCOPED_TRACE(rc.name);
    const float a = 1.0f / std::sqrt(2816.0f);
    // scale_rows with and without a weight vector.
    for (const bool with_w : {true, false}) {
      std::vector<float> want = x0;
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < n; ++i) {
          float& v = want[t * ld + i];
          v = engine::round_act(rc.cpu, with_w ? v * a * w[i] : v * a);
        }
      DeviceBuffer dx = to_device(x0), dw = to_device(w);
      scale_rows(dx.as<float>(), ld, n, n_tok, a, with_w ? dw.as<float>() : nullptr, rc.gpu, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(compare(to_host<float>(dx, want.size()), want, 0).bad, 0) << "scale_rows w " << with_w;
    }
    {
      std::vector<float> want = x0;
      const float mix = 1.0f / std::sqrt(2.0f);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < n; ++i) want[t * ld + i] = engine::round_act(rc.cpu, (want[t * ld + i] + y[t * ld + i]) * mix);
      DeviceBuffer dx = to_device(x0), dy = to_device(y);
      add_scale_rows(dx.as<float>(), ld, dy.as<float>(), ld, n, n_tok, mix, rc.gpu, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(compare(to_host<float>(dx, want.size()), want, 0).bad, 0) << "add_scale_rows";
    }
    {
      // Value norm: 3 heads of 64 per token, out of place and in place.
      const int64_t nh = 3, hd = 64, lds = 200;
      std::vector<float> want = x0;
      want.resize(static_cast<size_t>(n_tok * lds));
      std::vector<float> src = want;
      engine::rmsnorm_heads(engine::Exec{&pool, rc.cpu}, want.data(), lds, n_tok, nh, hd, nullptr, 1e-6f);
      DeviceBuffer ds = to_device(src), dd = to_device(std::vector<float>(src.size(), 0.0f));
      head_rmsnorm(ds.as<float>(), lds, dd.as<float>(), lds, n_tok, nh, hd, 1e-6f, rc.gpu, nullptr);
      head_rmsnorm(ds.as<float>(), lds, ds.as<float>(), lds, n_tok, nh, hd, 1e-6f, rc.gpu, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = to_host<float>(dd, src.size()), got2 = to_host<float>(ds, src.size());
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < nh * hd; ++i) {
          ASSERT_EQ(bits(got[t * lds + i]), bits(want[t * lds + i])) << "head_rmsnorm t " << t << " i " << i;
          ASSERT_EQ(bits(got2[t * lds + i]), bits(want[t * lds + i])) << "in place, t " << t << " i " << i;
        }
    }
  }
  // Softcap: tanh in double rounded once vs glibc's tanhf (not correctly rounded), then the
  // product by the cap. Measured on the H200: 3015 of 4096 bit-exact, 80 two ulp off, none
  // further: allow 2 ulp and ask for 70% exact.
  std::vector<float> lg = randn(4096, 21, 40.0f), want = lg;
  for (float& v : want) v = std::tanh(v * (1.0f / 30.0f)) * 30.0f;
  DeviceBuffer dl = to_device(lg);
  softcap(dl.as<float>(), 1024, 1024, 4, 30.0f, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const Diff d = compare(to_host<float>(dl, lg.size()), want, 2);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
  EXPECT_GE(d.exact, 2867) << "softcap: too few bit-exact values";
}

struct AttnCase {
  int64_t hd, nh, nkv, window;
  KvType kv;
};

TEST(Gemma4Ops, WindowAttentionMatchesCpuRing) {
  FT_OPS_REQUIRE_GPU();
  const int64_t n_ctx = 300, U = 64;
  for (const AttnCase c : {AttnCase{64, 4, 2, 8, KvType::kF32}, AttnCase{128, 4, 1, 0, KvType::kF32},
                           AttnCase{256, 2, 2, 5, KvType::kF16}, AttnCase{512, 4, 2, 0, KvType::kF16},
                           AttnCase{512, 8, 2, 3, KvType::kBF16}}) {
    SCOPED_TRACE("hd " + std::to_string(c.hd) + " window " + std::to_string(c.window));
    const engine::ActType act = c.kv == KvType::kF32 ? engine::ActType::kF32
                                : c.kv == KvType::kF16 ? engine::ActType::kF16
                                                       : engine::ActType::kBF16;
    const int64_t kv_dim = c.nkv * c.hd, q_dim = c.nh * c.hd;
    const int64_t cells = c.window > 0 ? c.window + U - 1 : n_ctx;
    engine::KvCache kv(act, n_ctx, {kv_dim}, {cells});
    const size_t es = c.kv == KvType::kF32 ? 4 : 2;
    DeviceBuffer dk(static_cast<size_t>(cells * kv_dim) * es), dv(static_cast<size_t>(cells * kv_dim) * es);
    DeviceBuffer dpos(sizeof(int32_t));
    const engine::AttnShape shape{c.nh, c.nkv, c.hd, c.hd, 1.0f, c.window};
    int64_t pos = 0;
    float worst = 0.0f;
    // Decode calls (<= 8 tokens) split the keys over blocks of 64 (up to 5 here) and merge.
    DeviceBuffer ws(attention_window_workspace_bytes(c.nh, c.hd));
    for (const int64_t n : {13, 16, 64, 64, 1, 1, 3, 1, 8, 1}) {
      // q rows carry q | k | v like the forward pass's qkv buffer (ld apart).
      const int64_t ld = q_dim + 2 * kv_dim;
      const auto qkv = randn(static_cast<size_t>(n * ld), static_cast<uint64_t>(pos * 31 + c.hd), 1.0f);
      kv.store(0, pos, n, qkv.data() + q_dim, ld, qkv.data() + q_dim + kv_dim, ld);
      std::vector<float> want(static_cast<size_t>(n * q_dim));
      engine::attention_ref(shape, kv, 0, qkv.data(), ld, n, pos, want.data(), q_dim, act);
      const int32_t p32 = static_cast<int32_t>(pos);
      FT_CUDA_CHECK(cudaMemcpy(dpos.get(), &p32, sizeof p32, cudaMemcpyHostToDevice));
      DeviceBuffer dq = to_device(qkv), dout = to_device(std::vector<float>(want.size(), poison()));
      kv_store_ring(c.kv, dk.get(), dv.get(), kv_dim, dq.as<float>() + q_dim, ld, dq.as<float>() + q_dim + kv_dim, ld, n,
                    dpos.as<int32_t>(), cells, nullptr);
      WindowAttnArgs a;
      a.n_head = c.nh;
      a.n_head_kv = c.nkv;
      a.head_dim = c.hd;
      a.q = dq.as<float>();
      a.ldq = ld;
      a.n_tok = n;
      a.d_pos = dpos.as<int32_t>();
      a.window = c.window;
      a.n_cells = cells;
      a.kv_type = c.kv;
      a.k_cache = dk.get();
      a.v_cache = dv.get();
      a.out = dout.as<float>();
      a.ldo = q_dim;
      a.round = c.kv == KvType::kF32 ? Round::kNone : (c.kv == KvType::kF16 ? Round::kF16 : Round::kBF16);
      a.ws = ws.as<float>();
      attention_window(a, nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = to_host<float>(dout, want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const float d = std::fabs(got[i] - want[i]);
        ASSERT_TRUE(std::isfinite(got[i])) << "pos " << pos << " i " << i;
        worst = std::max(worst, d / (1.0f + std::fabs(want[i])));
      }
      pos += n;
    }
    // fp32: summation order only; 16-bit outputs: one unit of the output type.
    EXPECT_LE(worst, c.kv == KvType::kF32 ? 1e-5f : (c.kv == KvType::kF16 ? 2e-3f : 1.6e-2f));
    std::printf("GEMMA4-ATTN hd %ld window %ld: max rel diff %.3g\n", static_cast<long>(c.hd),
                static_cast<long>(c.window), worst);
  }
}

TEST(Gemma4Ops, WindowAttentionRejectsBadShapes) {
  FT_OPS_REQUIRE_GPU();
  WindowAttnArgs a;
  a.n_head = 4;
  a.n_head_kv = 3;
  a.head_dim = 64;
  a.n_tok = 1;
  a.n_cells = 8;
  EXPECT_THROW(attention_window(a, nullptr), std::exception);
  a.n_head_kv = 2;
  a.head_dim = 96;
  EXPECT_THROW(attention_window(a, nullptr), std::exception);
}

// Rows with the Q8 rounding's edge cases: an all-zero block, a block of one non-zero value,
// exact .5 ties of x * 127 / amax, tiny and huge magnitudes, negative maxima.
std::vector<float> q8_edge_rows(int64_t k, int64_t n_tok) {
  std::vector<float> x = randn(static_cast<size_t>(k * n_tok), static_cast<uint64_t>(k + 3 * n_tok), 3.0f);
  // Edge blocks at the start of the buffer (rows run on into each other), only as far as it
  // reaches: k 32 with one token is a single block (writing the second overran the vector).
  const size_t n = x.size();
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.0f;
  if (n >= 64)
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = i == 7 ? -2.5f : 0.0f;
  if (k >= 128) {
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = (i - 16) * 0.5f;  // amax 8: x*127/8 hits .5 steps
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(96 + i)] = (i % 3 - 1) * 1e-30f * (i + 1);
  }
  if (k >= 160) x[128] = 6.0e4f;
  return x;
}

TEST(Gemma4Ops, Q8RoundTripTwinIsCpuQ8_0) {
  // Host only: the twin is what llama.cpp's CPU build (quant::round_trip_act) multiplies and
  // what the decode GEMV's xq encodes.
  for (int64_t k : {32, 256, 704}) {
    const auto x = q8_edge_rows(k, 3);
    for (int64_t t = 0; t < 3; ++t) {
      const float* xt = x.data() + t * k;
      std::vector<float> got(static_cast<size_t>(k)), cpu(static_cast<size_t>(k));
      round_trip_act_q8_row_ref(xt, k, got.data());
      quant::round_trip_act(GgmlType::Q8_0, xt, cpu.data(), k);
      std::vector<uint8_t> row(static_cast<size_t>(act_q8_row_bytes(k)));
      quantize_act_q8_row_ref(xt, k, row.data());
      const auto* sc = reinterpret_cast<const ActQ8Scale*>(row.data() + k);
      for (int64_t i = 0; i < k; ++i) {
        ASSERT_EQ(bits(got[i]), bits(cpu[i])) << "k " << k << " t " << t << " i " << i << ": " << got[i] << " vs "
                                              << cpu[i];
        const float from_xq = sc[i / 32].d * static_cast<float>(static_cast<int8_t>(row[static_cast<size_t>(i)]));
        ASSERT_EQ(bits(got[i]), bits(from_xq)) << "xq block, i " << i;
      }
    }
  }
  std::vector<float> y(32);
  std::vector<float> zero(32, 0.0f);
  round_trip_act_q8_row_ref(zero.data(), 32, y.data());
  for (float v : y) EXPECT_EQ(bits(v), 0u);
}

TEST(Gemma4Ops, Q8RoundTripKernelMatchesTwin) {
  FT_OPS_REQUIRE_GPU();
  for (int64_t k : {32, 256, 704})
    for (int64_t n_tok : {1, 9, 40}) {
      SCOPED_TRACE("k " + std::to_string(k) + " n_tok " + std::to_string(n_tok));
      const int64_t ld = k + 32;  // rows apart by more than k: the pad must stay untouched
      std::vector<float> x(static_cast<size_t>(ld * n_tok), 7.0f);
      const auto v = q8_edge_rows(k, n_tok);
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(t * ld + i)] = v[static_cast<size_t>(t * k + i)];
      std::vector<float> want = x;
      for (int64_t t = 0; t < n_tok; ++t) round_trip_act_q8_row_ref(x.data() + t * ld, k, want.data() + t * ld);
      DeviceBuffer dx = to_device(x), dy = to_device(std::vector<float>(x.size(), 7.0f));
      round_trip_act_q8(dx.as<float>(), ld, k, n_tok, dy.as<float>(), ld, nullptr);  // out of place
      round_trip_act_q8(dx.as<float>(), ld, k, n_tok, dx.as<float>(), ld, nullptr);  // in place
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(compare(to_host<float>(dy, want.size()), want, 0).bad, 0);
      EXPECT_EQ(compare(to_host<float>(dx, want.size()), want, 0).bad, 0);
    }
  EXPECT_THROW(round_trip_act_q8(nullptr, 48, 48, 1, nullptr, 48, nullptr), std::exception);
}

}  // namespace
}  // namespace ft::cuda
