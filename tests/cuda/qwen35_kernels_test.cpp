// The qwen35 kernels (src/cuda/conv1d.h, deltanet.h, gates.h) against their CPU twins:
//   * conv1d + SiLU over a prompt split into batches (rolling state) = engine::conv1d_causal_silu,
//     and *d_pos == 0 resets a poisoned state;
//   * the whole Gated DeltaNet token mixing on the GPU (conv1d -> deltanet_recurrent ->
//     rmsnorm of the d-wide head rows -> gate_mul silu) = engine::deltanet, outputs and final
//     state, for the tiny test shape, Qwen3.6's (H_k 16, H_v 32, d 128) and a 1,100-token
//     prompt in one call;
//   * the same token mixing with prompts through the chunked form (deltanet_chunked, as the
//     forward runs prompts of >= 64 tokens) = engine::deltanet, 1,100 and 130 tokens, for
//     every chunked kind the device runs (plain, cluster, small);
//   * the chunked form against the recurrence on the GPU, every kind: 1,100 tokens (Qwen3.6's
//     shape and d 64) from a non-zero entry state, outputs, final state and the decode step
//     after it; tails of 1..63 tokens, 3 key heads, and a new sequence over a poisoned state;
//     the cluster and small kinds bit-identical to the plain one;
//   * (no device needed) the small kind fits the 99 KiB of RTX 30/40/50 at every d, and
//     deltanet_chunked_pick gives plain on sm_90's 227 KiB, small below;
//   * split_q_gate, gate_mul (sigmoid, silu) and scale_by_sigmoid = the host loops of
//     model/qwen35_blocks.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/threadpool.h"
#include "cuda/conv1d.h"
#include "cuda/deltanet.h"
#include "cuda/gates.h"
#include "cuda/norm.h"
#include "engine/conv1d.h"
#include "engine/deltanet.h"
#include "engine/vec_math.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

DeviceBuffer device_int(int32_t v) { return to_device(std::vector<int32_t>{v}); }

TEST(CudaQwen35, Conv1dMatchesCpuAcrossBatches) {
  FT_OPS_REQUIRE_GPU();
  ThreadPool pool(1);
  const engine::Exec ex{&pool, engine::ActType::kF32};
  for (int64_t k : {4, 3, 1}) {
    const int64_t n_ch = 300, ldx = 310, n_tok = 70;
    SCOPED_TRACE("k " + std::to_string(k));
    const auto x = randn(static_cast<size_t>(n_tok * ldx), 5 + k, 2.0f);
    const auto w = randn(static_cast<size_t>(n_ch * k), 7 + k, 0.5f);
    std::vector<float> st_cpu(static_cast<size_t>(n_ch * (k - 1)), 0.0f), want(static_cast<size_t>(n_tok * n_ch));
    // The GPU state starts poisoned: the first call is at position 0 and must ignore it.
    DeviceBuffer dx = to_device(x), dw = to_device(w), dy(want.size() * 4),
                 dst = to_device(std::vector<float>(std::max<size_t>(st_cpu.size(), 1), poison()));
    int64_t t0 = 0;
    for (int64_t nb : {1, 5, 64}) {
      engine::conv1d_causal_silu(ex, x.data() + t0 * ldx, ldx, nb, n_ch, w.data(), k, st_cpu.data(),
                                 want.data() + t0 * n_ch, n_ch);
      DeviceBuffer pos = device_int(static_cast<int32_t>(t0));
      conv1d_causal_silu(dx.as<float>() + t0 * ldx, ldx, nb, n_ch, dw.as<float>(), k, dst.as<float>(),
                         dy.as<float>() + t0 * n_ch, n_ch, pos.as<int32_t>(), nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      t0 += nb;
    }
    const Diff d = compare(to_host<float>(dy, want.size()), want, 1);
    EXPECT_EQ(d.bad, 0) << d.first_bad;
    // Same products and sums in the same order, silu as engine::silu: bit-identical.
    EXPECT_EQ(d.near, 0);
    if (k > 1) {
      const Diff ds = compare(to_host<float>(dst, st_cpu.size()), st_cpu, 0);
      EXPECT_EQ(ds.bad, 0) << "state " << ds.first_bad;
    }
  }
}

struct Shape {
  int64_t hk, hv, d;
};

// Random layer inputs and weights of one Gated DeltaNet layer.
struct GdnCase {
  engine::DeltaNetShape s;
  std::vector<float> in, conv_w, dt_bias, a, norm;
  GdnCase(const Shape& sh, int64_t n_tok, uint64_t seed) {
    s.n_k_heads = sh.hk;
    s.n_v_heads = sh.hv;
    s.d_head = sh.d;
    s.d_conv = 4;
    s.eps = 1e-6f;
    in = randn(static_cast<size_t>(n_tok * s.in_dim()), seed, 1.0f);
    conv_w = randn(static_cast<size_t>(s.conv_dim() * s.d_conv), seed + 1, 0.5f);
    dt_bias = randn(static_cast<size_t>(s.n_v_heads), seed + 2, 1.0f);
    a = randn(static_cast<size_t>(s.n_v_heads), seed + 3, 1.0f);
    for (float& v : a) v = -std::exp(v);  // -exp(A_log)
    norm = randn(static_cast<size_t>(s.d_head), seed + 4, 0.2f);
    for (float& v : norm) v += 1.0f;
  }
};

DeltaNetChunkedKind form_kind(int form) {
  return form == 2 ? DeltaNetChunkedKind::kCluster : form == 3 ? DeltaNetChunkedKind::kSmall : DeltaNetChunkedKind::kPlain;
}

// The GPU token mixing of n_tok tokens at position pos0 (the forward's sequence of launches).
// form 1 / 2 / 3: batches of >= kDeltaNetChunk tokens through deltanet_chunked, plain /
// cluster / small kernel (the forward's choice); 0: the recurrence throughout.
void gpu_gdn(const GdnCase& c, const DeviceBuffer& din, int64_t t0, int64_t n_tok, const DeviceBuffer& dw,
             DeviceBuffer& conv, DeviceBuffer& ssm, DeviceBuffer& dy, DeviceBuffer& dout, Round r, int form) {
  const engine::DeltaNetShape& s = c.s;
  const int64_t in_dim = s.in_dim(), conv_dim = s.conv_dim(), value_dim = s.value_dim();
  const float* in = din.as<float>() + t0 * in_dim;
  float* out = dout.as<float>() + t0 * value_dim;
  DeviceBuffer pos = device_int(static_cast<int32_t>(t0));
  const float* w = dw.as<float>();  // conv_w | dt_bias | a | norm
  const float* dt_bias = w + conv_dim * s.d_conv;
  conv1d_causal_silu(in, in_dim, n_tok, conv_dim, w, s.d_conv, conv.as<float>(), dy.as<float>(), conv_dim,
                     pos.as<int32_t>(), nullptr);
  DeltaNetArgs a;
  a.n_k_heads = s.n_k_heads;
  a.n_v_heads = s.n_v_heads;
  a.d = s.d_head;
  a.eps = s.eps;
  a.y = dy.as<float>();
  a.ldy = conv_dim;
  a.beta = in + conv_dim + value_dim;
  a.alpha = a.beta + s.n_v_heads;
  a.ldg = in_dim;
  a.dt_bias = dt_bias;
  a.a = dt_bias + s.n_v_heads;
  a.state = ssm.as<float>();
  a.out = out;
  a.ldo = value_dim;
  a.n_tok = n_tok;
  a.d_pos = pos.as<int32_t>();
  DeviceBuffer gb(static_cast<size_t>(n_tok * s.n_v_heads * 3) * sizeof(float));
  const auto kind = form_kind(form);
  if (form != 0 && n_tok >= kDeltaNetChunk) {
    ASSERT_TRUE(deltanet_chunked_supported(a, kind));
    deltanet_chunked(a, gb.as<float>(), nullptr, kind);
  } else {
    deltanet_recurrent(a, gb.as<float>(), nullptr);
  }
  rmsnorm(out, s.d_head, a.a + s.n_v_heads, s.d_head, s.eps, n_tok * s.n_v_heads, out, s.d_head, Round::kNone,
          nullptr);
  gate_mul(out, value_dim, in + conv_dim, in_dim, n_tok, value_dim, GateAct::kSilu, r, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
}

// Largest |got - want| relative to the largest |want|.
double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double m = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
    ref = std::max(ref, std::fabs(static_cast<double>(want[i])));
  }
  return ref > 0 ? m / ref : m;
}

void check_gdn(const Shape& sh, const std::vector<int64_t>& batches, const RoundCase& rc, double tol,
               int form = 0) {
  int64_t n_tok = 0;
  for (int64_t b : batches) n_tok += b;
  const GdnCase c(sh, n_tok, static_cast<uint64_t>(sh.d * 31 + sh.hv + n_tok));
  const engine::DeltaNetShape& s = c.s;
  ThreadPool pool(2);
  const engine::Exec ex{&pool, rc.cpu};
  std::vector<float> conv_cpu(static_cast<size_t>(s.conv_dim() * (s.d_conv - 1)), 0.0f);
  std::vector<float> ssm_cpu(static_cast<size_t>(s.n_v_heads * s.d_head * s.d_head), 0.0f);
  std::vector<float> want(static_cast<size_t>(n_tok * s.value_dim())), ycpu(static_cast<size_t>(n_tok * s.conv_dim()));
  const engine::DeltaNetWeights w{c.conv_w.data(), c.dt_bias.data(), c.a.data(), c.norm.data()};
  std::vector<float> wall = c.conv_w;
  wall.insert(wall.end(), c.dt_bias.begin(), c.dt_bias.end());
  wall.insert(wall.end(), c.a.begin(), c.a.end());
  wall.insert(wall.end(), c.norm.begin(), c.norm.end());
  DeviceBuffer din = to_device(c.in), dw = to_device(wall), dy(ycpu.size() * 4), dout(want.size() * 4);
  DeviceBuffer conv = to_device(std::vector<float>(conv_cpu.size(), poison()));
  DeviceBuffer ssm = to_device(std::vector<float>(ssm_cpu.size(), poison()));
  int64_t t0 = 0;
  for (int64_t nb : batches) {
    engine::deltanet(ex, s, w, conv_cpu.data(), ssm_cpu.data(), c.in.data() + t0 * s.in_dim(), s.in_dim(), nb,
                     want.data() + t0 * s.value_dim(), s.value_dim(), ycpu.data());
    gpu_gdn(c, din, t0, nb, dw, conv, ssm, dy, dout, rc.gpu, form);
    t0 += nb;
  }
  const auto got = to_host<float>(dout, want.size());
  const double e_out = rel_err(got, want);
  const double e_ssm = rel_err(to_host<float>(ssm, ssm_cpu.size()), ssm_cpu);
  const Diff d = compare_rounded(got, want, rc.gpu, 0);
  std::printf("QWEN35-GDN%s hk %lld hv %lld d %lld tokens %lld %s: out rel err %.3g (%lld of %lld bit-exact), "
              "state rel err %.3g\n",
              form == 0 ? "" : form == 1 ? "-CHUNKED" : form == 2 ? "-CHUNKED-CLUSTER" : "-CHUNKED-SMALL",
              static_cast<long long>(sh.hk), static_cast<long long>(sh.hv),
              static_cast<long long>(sh.d), static_cast<long long>(n_tok), rc.name, e_out, static_cast<long long>(d.exact),
              static_cast<long long>(want.size()), e_ssm);
  EXPECT_LE(e_out, tol);
  // The dot products over d sum in another order than the CPU's dot_f32 (a few ulp); a
  // wrong head mapping, decay or norm is off by O(1).
  EXPECT_LE(e_ssm, 1e-4);
}

TEST(CudaQwen35, DeltaNetMatchesCpuTiny) {
  FT_OPS_REQUIRE_GPU();
  // H_v = 2 H_k: value head j reads key head j mod H_k.
  check_gdn({2, 4, 32}, {1, 3, 60, 1, 2}, kRounds[0], 1e-4);
  check_gdn({1, 2, 16}, {7, 1}, kRounds[0], 1e-4);
  check_gdn({3, 6, 64}, {9, 1}, kRounds[0], 1e-4);
  check_gdn({2, 4, 32}, {5, 1}, kRounds[1], 1e-2);  // bf16 outputs: one bf16 unit
}

TEST(CudaQwen35, DeltaNetMatchesCpuQwen36Shape) {
  FT_OPS_REQUIRE_GPU();
  check_gdn({16, 32, 128}, {70, 1, 1}, kRounds[0], 1e-4);
}

TEST(CudaQwen35, DeltaNetLongPromptOneCall) {
  FT_OPS_REQUIRE_GPU();
  check_gdn({2, 4, 64}, {1100, 1}, kRounds[0], 1e-4);
}

// Prompts through the chunked form (a 1,100-token prompt, then a 130-token batch after a
// decode step) against the CPU engine's recurrence.
TEST(CudaQwen35, DeltaNetChunkedMatchesCpu) {
  FT_OPS_REQUIRE_GPU();
  check_gdn({2, 4, 64}, {1100, 1}, kRounds[0], 1e-4, 1);
  check_gdn({16, 32, 128}, {70, 1, 130, 1}, kRounds[0], 1e-4, 1);
  check_gdn({2, 4, 32}, {64, 2, 100}, kRounds[1], 1e-2, 1);  // bf16 outputs
  // The small kind (89 KiB of shared memory: every GPU from sm_80 on, the H200 included).
  check_gdn({2, 4, 64}, {1100, 1}, kRounds[0], 1e-4, 3);
  check_gdn({16, 32, 128}, {70, 1, 130, 1}, kRounds[0], 1e-4, 3);
  check_gdn({2, 4, 32}, {64, 2, 100}, kRounds[1], 1e-2, 3);
  check_gdn({1, 2, 16}, {65, 1}, kRounds[0], 1e-4, 3);
  DeltaNetArgs probe;
  probe.d = 128;
  probe.ldy = 4;
  DeviceBuffer aligned(16);
  probe.y = aligned.as<float>();
  if (!deltanet_chunked_supported(probe, DeltaNetChunkedKind::kCluster)) GTEST_SKIP() << "no cluster kernel here";
  check_gdn({16, 32, 128}, {70, 1, 130, 1}, kRounds[0], 1e-4, 2);
  check_gdn({2, 4, 64}, {1100, 1}, kRounds[0], 1e-4, 2);
}

// The chunked form against the recurrence on the GPU, from the same normalised inputs and a
// non-zero entry state: outputs and final state over 1,100 tokens (17 full chunks and a
// 12-token tail), then a decode step from each state.
// fresh: a new sequence (*d_pos == 0) over a poisoned entry state, which both forms must ignore.
void check_chunked(const Shape& sh, int64_t n_tok, bool fresh = false) {
  GdnCase c(sh, n_tok + 1, static_cast<uint64_t>(sh.d + n_tok));
  const engine::DeltaNetShape& s = c.s;
  ThreadPool pool(2);
  const engine::Exec ex{&pool, engine::ActType::kF32};
  // y rows after conv + silu (the CPU's), the input of both forms.
  std::vector<float> conv(static_cast<size_t>(s.conv_dim() * (s.d_conv - 1)), 0.0f);
  std::vector<float> y(static_cast<size_t>((n_tok + 1) * s.conv_dim()));
  engine::conv1d_causal_silu(ex, c.in.data(), s.in_dim(), n_tok + 1, s.conv_dim(), c.conv_w.data(), s.d_conv,
                             conv.data(), y.data(), s.conv_dim());
  std::vector<float> gates(c.dt_bias);
  gates.insert(gates.end(), c.a.begin(), c.a.end());
  DeviceBuffer din = to_device(c.in), dg = to_device(gates);
  const auto s0 = fresh ? std::vector<float>(static_cast<size_t>(s.n_v_heads * s.d_head * s.d_head), poison())
                        : randn(static_cast<size_t>(s.n_v_heads * s.d_head * s.d_head), 77, 0.05f);
  // form 0: the recurrence, 1: the plain chunked kernel, 2: the cluster kernel (sm_90), 3: the
  // small kernel; the kinds the device cannot run stay empty (the device's default must run).
  std::vector<float> outs[4], states[4], steps[4];
  for (int form = 0; form < 4; ++form) {
    DeviceBuffer dy = to_device(y), dst = to_device(s0), dout(static_cast<size_t>((n_tok + 1) * s.value_dim()) * 4);
    DeviceBuffer gb(static_cast<size_t>((n_tok + 1) * s.n_v_heads * 3) * 4), pos = device_int(fresh ? 0 : 5);
    DeltaNetArgs a;
    a.n_k_heads = s.n_k_heads;
    a.n_v_heads = s.n_v_heads;
    a.d = s.d_head;
    a.eps = s.eps;
    a.y = dy.as<float>();
    a.ldy = s.conv_dim();
    a.beta = din.as<float>() + s.conv_dim() + s.value_dim();
    a.alpha = a.beta + s.n_v_heads;
    a.ldg = s.in_dim();
    a.dt_bias = dg.as<float>();
    a.a = dg.as<float>() + s.n_v_heads;
    a.state = dst.as<float>();
    a.out = dout.as<float>();
    a.ldo = s.value_dim();
    a.n_tok = n_tok;
    a.d_pos = pos.as<int32_t>();  // 5: not a new sequence, the entry state counts
    const auto kind = form_kind(form);
    if (form != 0 && !deltanet_chunked_supported(a, kind)) {
      ASSERT_NE(kind, deltanet_chunked_default(s.d_head)) << "the device's own chunked kind must run";
      continue;
    }
    if (form == 0)
      deltanet_recurrent(a, gb.as<float>(), nullptr);
    else
      deltanet_chunked(a, gb.as<float>(), nullptr, kind);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    outs[form] = to_host<float>(dout, static_cast<size_t>(n_tok * s.value_dim()));
    states[form] = to_host<float>(dst, s0.size());
    // One decode step (the recurrence) from the state each form left.
    a.y += n_tok * a.ldy;
    a.beta += n_tok * a.ldg;
    a.alpha += n_tok * a.ldg;
    a.out += n_tok * a.ldo;
    a.n_tok = 1;
    DeviceBuffer pos1 = device_int(static_cast<int32_t>(n_tok + 5));
    a.d_pos = pos1.as<int32_t>();
    deltanet_recurrent(a, gb.as<float>(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto all = to_host<float>(dout, static_cast<size_t>((n_tok + 1) * s.value_dim()));
    steps[form].assign(all.begin() + n_tok * s.value_dim(), all.end());
  }
  static const char* const kNames[4] = {"", "", "-CLUSTER", "-SMALL"};
  int ran = 0;
  for (int form = 1; form < 4; ++form) {
    if (outs[form].empty()) continue;
    ++ran;
    SCOPED_TRACE(std::string("kind") + kNames[form]);
    const double e_out = rel_err(outs[form], outs[0]), e_st = rel_err(states[form], states[0]);
    const double e_step = rel_err(steps[form], steps[0]);
    std::printf("QWEN35-CHUNKED%s d %lld hk %lld hv %lld tokens %lld%s: chunked vs recurrent rel err out %.3g, "
                "state %.3g, next decode step %.3g\n",
                kNames[form], static_cast<long long>(sh.d), static_cast<long long>(sh.hk),
                static_cast<long long>(sh.hv), static_cast<long long>(n_tok), fresh ? " (new sequence)" : "", e_out,
                e_st, e_step);
    EXPECT_LE(e_out, 1e-4);
    EXPECT_LE(e_st, 1e-4);
    EXPECT_LE(e_step, 1e-4);
    // The cluster kernel shares the k.k / q.k products instead of recomputing them, the small
    // one stages K and Q in slices: both do the plain kernel's operations in its order, same bits.
    if (form >= 2 && !outs[1].empty()) {
      std::printf("QWEN35-CHUNKED%s d %lld: %s the plain kernel\n", kNames[form], static_cast<long long>(sh.d),
                  outs[form] == outs[1] && states[form] == states[1] ? "bit-identical to" : "DIFFERS from");
      EXPECT_EQ(outs[form], outs[1]);
      EXPECT_EQ(states[form], states[1]);
    }
  }
  EXPECT_GE(ran, 1);
}

TEST(CudaQwen35, ChunkedEqualsRecurrenceLongPrompt) {
  FT_OPS_REQUIRE_GPU();
  check_chunked({2, 4, 64}, 1100);
  check_chunked({16, 32, 128}, 1100);
  check_chunked({1, 2, 16}, 70);
  check_chunked({2, 4, 32}, 64);
  check_chunked({2, 4, 32}, 3);
  check_chunked({3, 6, 64}, 127);   // 3 key heads (value head j reads key head j mod 3), a 63-token tail
  check_chunked({2, 4, 128}, 65);   // a 1-token tail
  check_chunked({16, 32, 128}, 200, /*fresh=*/true);
}

// Host-side, no device needed: the small kind exists for the GPUs whose opt-in shared memory
// per block is 99 KiB (sm_86/89/120: 101,376 bytes) or 163 KiB (sm_80: 166,912), where the plain
// kind does not fit at d 128; sm_90 (232,448) keeps the plain kind.
TEST(CudaQwen35, ChunkedKindFitsTheDevice) {
  constexpr int64_t kRtx = 101376, kA100 = 166912, kH200 = 232448;
  for (int64_t d : {16, 32, 64, 128}) {
    SCOPED_TRACE("d " + std::to_string(d));
    EXPECT_LE(deltanet_chunked_smem_bytes(d, DeltaNetChunkedKind::kSmall), static_cast<size_t>(kRtx));
    EXPECT_LE(deltanet_chunked_smem_bytes(d, DeltaNetChunkedKind::kPlain), static_cast<size_t>(kH200));
    EXPECT_EQ(deltanet_chunked_pick(kH200, d), DeltaNetChunkedKind::kPlain);
    // Whichever kind is picked fits the device it is picked for.
    for (int64_t optin : {kRtx, kA100, kH200})
      EXPECT_LE(deltanet_chunked_smem_bytes(d, deltanet_chunked_pick(optin, d)), static_cast<size_t>(optin));
  }
  EXPECT_GT(deltanet_chunked_smem_bytes(128, DeltaNetChunkedKind::kPlain), static_cast<size_t>(kA100));
  EXPECT_EQ(deltanet_chunked_pick(kRtx, 128), DeltaNetChunkedKind::kSmall);
  EXPECT_EQ(deltanet_chunked_pick(kRtx, 64), DeltaNetChunkedKind::kSmall);
  EXPECT_EQ(deltanet_chunked_pick(kA100, 128), DeltaNetChunkedKind::kSmall);
  EXPECT_EQ(deltanet_chunked_pick(kA100, 64), DeltaNetChunkedKind::kPlain);
  std::printf("QWEN35-CHUNKED shared memory per block at d 128: plain %zu, small %zu bytes\n",
              deltanet_chunked_smem_bytes(128, DeltaNetChunkedKind::kPlain),
              deltanet_chunked_smem_bytes(128, DeltaNetChunkedKind::kSmall));
}

float sigmoid_ref(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(CudaQwen35, Gates) {
  FT_OPS_REQUIRE_GPU();
  const int64_t n_tok = 5, nh = 3, hd = 16, kv = 40, ldr = 2 * nh * hd + kv + 3, ldq = nh * hd + kv, ldg = nh * hd;
  const auto raw = randn(static_cast<size_t>(n_tok * ldr), 3, 4.0f);
  DeviceBuffer draw = to_device(raw), dq(n_tok * ldq * 4), dg(n_tok * ldg * 4);
  split_q_gate(draw.as<float>(), ldr, n_tok, nh, hd, kv, dq.as<float>(), ldq, dg.as<float>(), ldg, nullptr);
  const auto q = to_host<float>(dq, static_cast<size_t>(n_tok * ldq));
  const auto g = to_host<float>(dg, static_cast<size_t>(n_tok * ldg));
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* row = raw.data() + t * ldr;
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t e = 0; e < hd; ++e) {
        ASSERT_EQ(q[t * ldq + h * hd + e], row[2 * h * hd + e]);
        ASSERT_EQ(g[t * ldg + h * hd + e], row[(2 * h + 1) * hd + e]);
      }
    for (int64_t c = 0; c < kv; ++c) ASSERT_EQ(q[t * ldq + nh * hd + c], row[2 * nh * hd + c]);
  }
  for (const RoundCase& rc : kRounds)
    for (GateAct act : {GateAct::kSigmoid, GateAct::kSilu}) {
      SCOPED_TRACE(std::string(rc.name) + (act == GateAct::kSilu ? " silu" : " sigmoid"));
      const int64_t cols = 700, ld = 710;
      const auto o = randn(static_cast<size_t>(n_tok * ld), 9, 2.0f), gg = randn(static_cast<size_t>(n_tok * ld), 10, 5.0f);
      std::vector<float> want = o;
      for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t c = 0; c < cols; ++c) {
          const float gv = gg[t * ld + c];
          const float av = act == GateAct::kSilu ? engine::silu(gv) : sigmoid_ref(gv);
          want[t * ld + c] = engine::round_act(rc.cpu, o[t * ld + c] * av);
        }
      DeviceBuffer d_o = to_device(o), d_g = to_device(gg);
      gate_mul(d_o.as<float>(), ld, d_g.as<float>(), ld, n_tok, cols, act, rc.gpu, nullptr);
      // exp in double vs glibc's expf: a 1-ulp sigmoid, then the product (2 ulp at most).
      const Diff d = compare_rounded(to_host<float>(d_o, o.size()), want, rc.gpu, 2);
      EXPECT_EQ(d.bad, 0) << d.first_bad;
      EXPECT_LE(d.near * 100, d.exact + d.near);
    }
  const int64_t cols = 300;
  const auto x = randn(static_cast<size_t>(n_tok * cols), 11, 1.0f), lg = randn(static_cast<size_t>(n_tok), 12, 3.0f);
  std::vector<float> want(x.size());
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t c = 0; c < cols; ++c) want[t * cols + c] = x[t * cols + c] * sigmoid_ref(lg[t]);
  DeviceBuffer dx = to_device(x), dl = to_device(lg), dyy(x.size() * 4);
  scale_by_sigmoid(dx.as<float>(), cols, dl.as<float>(), n_tok, cols, dyy.as<float>(), cols, Round::kNone, nullptr);
  const Diff d = compare(to_host<float>(dyy, x.size()), want, 2);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
}

}  // namespace
}  // namespace ft::cuda
