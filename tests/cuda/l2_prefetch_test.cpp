// L2 prefetch (cuda/l2_prefetch.h): the chunk plan tiles exactly the 16-byte aligned part of
// each range (host, no GPU); FT_L2_PREFETCH parses; the prefetch kernels run on any range and
// on bad expert ids without a fault; and prefetching never changes a bit -- dense NVFP4 GEMVs
// (slab and tensor-core kernels) and whole decode steps of tiny llama / qwen3moe NVFP4 models
// with every part on against all off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/l2_prefetch.cuh"
#include "cuda/l2_prefetch.h"
#include "session_test_util.h"

namespace ft::cuda {
namespace {

constexpr unsigned kAll = kL2Self | kL2Ahead | kL2Experts | kL2ExpertsGate | kL2ExpertsInGemv;
// The experts by a kernel of their own (kAll has the gate GEMV prefetch them instead).
constexpr unsigned kAllKernel = kAll & ~kL2ExpertsInGemv;

// Restores FT_L2_PREFETCH's parts when a test ends, however it ends.
struct PartsGuard {
  ~PartsGuard() { l2_prefetch_set_parts(-1); }
};

TEST(L2PrefetchPlan, ChunksTileTheAlignedRanges) {
  // Fake addresses: the plan only does arithmetic on them.
  const uint64_t base = uint64_t{1} << 40;
  struct R {
    uint64_t off;
    int64_t bytes;
  };
  const std::vector<std::vector<R>> lists = {
      {{0, 16}},
      {{3, 100}, {1000, 5}, {4096, kL2Chunk * 3 + 48}},
      {{8, kL2Chunk}, {0, 0}, {17, kL2Chunk * 2 + 31}, {1 << 30, 15}},
      {{0, kL2Chunk * 40 + 7}, {5, 11}, {64, 1}, {1 << 20, kL2Chunk}, {1 << 29, 4096}},  // 5th dropped
  };
  for (const auto& list : lists) {
    std::vector<L2Range> r;
    for (const R& x : list) r.push_back({reinterpret_cast<const void*>(base + x.off), x.bytes});
    const L2Plan p = l2_plan(r.data(), static_cast<int>(r.size()));
    // The expected aligned spans, in order, empty ones dropped, at most kL2MaxRanges.
    std::vector<std::pair<uint64_t, uint64_t>> want;
    for (size_t i = 0; i < list.size() && want.size() < kL2MaxRanges; ++i) {
      const uint64_t a = base + list[i].off, b = (a + 15) & ~uint64_t{15};
      const uint64_t e = (a + static_cast<uint64_t>(list[i].bytes)) & ~uint64_t{15};
      if (list[i].bytes > 0 && e > b) want.push_back({b, e});
    }
    ASSERT_EQ(p.n, static_cast<int>(want.size()));
    size_t span = 0;
    uint64_t next = want.empty() ? 0 : want[0].first;
    int64_t c = 0;
    uint64_t a = 0;
    uint32_t n = 0;
    for (; l2_chunk(p, c, a, n); ++c) {
      ASSERT_LT(span, want.size()) << "chunk " << c << " past the last range";
      EXPECT_EQ(a, next) << "chunk " << c;
      EXPECT_EQ(a % 16, 0u);
      EXPECT_EQ(n % 16, 0u);
      EXPECT_GT(n, 0u);
      EXPECT_LE(static_cast<int64_t>(n), kL2Chunk);
      next = a + n;
      ASSERT_LE(next, want[span].second) << "chunk " << c << " runs past its range";
      if (next == want[span].second && ++span < want.size()) next = want[span].first;
    }
    EXPECT_EQ(span, want.size()) << "ranges left uncovered";
    EXPECT_EQ(c, p.first[p.n]);
  }
}

TEST(L2PrefetchPlan, ParsesTheSwitch) {
  EXPECT_EQ(l2_prefetch_parse("0"), 0u);
  EXPECT_EQ(l2_prefetch_parse(nullptr), 0u);  // off by default (H200 run 12: slower)
  EXPECT_EQ(l2_prefetch_parse(""), 0u);
  EXPECT_EQ(l2_prefetch_parse("1"), kL2Self | kL2Ahead | kL2Experts);
  EXPECT_EQ(l2_prefetch_parse("s"), kL2Self);
  EXPECT_EQ(l2_prefetch_parse("sa"), kL2Self | kL2Ahead);
  EXPECT_EQ(l2_prefetch_parse("e"), kL2Experts);
  EXPECT_EQ(l2_prefetch_parse("g"), kL2Experts | kL2ExpertsGate);
  EXPECT_EQ(l2_prefetch_parse("saeg"), kAllKernel);
  EXPECT_EQ(l2_prefetch_parse("i"), kL2ExpertsInGemv);
  EXPECT_EQ(l2_prefetch_parse("saegi"), kAll);
  EXPECT_EQ(l2_prefetch_parse("A"), kL2Ahead | kL2AheadWide);
  EXPECT_THROW(l2_prefetch_parse("sx"), Error);
}

// Skips unless the device has the bulk prefetch (sm_90+): below it every part is off and the
// comparisons below would compare a path with itself.
#define FT_REQUIRE_L2_PREFETCH()                                                 \
  do {                                                                           \
    if (!has_device()) GTEST_SKIP() << "no CUDA device present";                \
    l2_prefetch_set_parts(static_cast<int>(kAll));                              \
    if (l2_prefetch_parts() == 0) GTEST_SKIP() << "no bulk L2 prefetch (sm_90+)"; \
  } while (0)

TEST(L2Prefetch, KernelsTakeAnyRangeAndBadIds) {
  PartsGuard guard;
  FT_REQUIRE_L2_PREFETCH();
  DeviceBuffer buf(3 << 20);
  const auto* b = static_cast<const uint8_t*>(buf.get());
  const L2Range r[] = {{b + 1, 100}, {b + 4096, 1 << 20}, {b + (2 << 20) + 7, (1 << 20) - 7}, {b, 0}};
  l2_prefetch(r, 4, nullptr);
  l2_prefetch(r + 3, 1, nullptr);  // nothing to do: no launch
  // Experts: 4 of 1 MB + 16 bytes of padding, ids with -1 and past the end (skipped).
  const int64_t eb = (1 << 18) + 16;
  const std::vector<int32_t> ids = {0, 3, -1, 4, 2, 1 << 20, 3, 1};
  DeviceBuffer d_ids(ids.size() * 4);
  d_ids.upload(ids.data(), ids.size() * 4);
  const L2ExpertSpan sp[] = {{b, eb, eb - 16}, {b + 4 * eb, eb, 1000}, {b + 1, eb, 33}};
  l2_prefetch_experts(sp, 3, d_ids.as<int32_t>(), static_cast<int>(ids.size()), 4, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// y of one dense NVFP4 GEMV (q8 path) with the given parts.
std::vector<float> dense_y(const DeviceBuffer& w, int64_t rb, int64_t rows, int64_t k, const DeviceBuffer& xq,
                           int64_t n_tok, unsigned parts) {
  l2_prefetch_set_parts(static_cast<int>(parts));
  DeviceBuffer y(static_cast<size_t>(rows * n_tok) * 4);
  FT_CUDA_CHECK(cudaMemset(y.get(), 0xFF, y.bytes()));
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  a.w = w.as<uint8_t>();
  a.row_bytes = rb;
  a.k = k;
  a.rows = rows;
  a.x = nullptr;
  a.ldx = k;
  a.n_tok = n_tok;
  a.y = y.as<float>();
  a.ldy = rows;
  a.xq = xq.get();
  a.round = Round::kBF16;
  gemv(a, nullptr);
  std::vector<float> out(static_cast<size_t>(rows * n_tok));
  y.download(out.data(), out.size() * 4);
  return out;
}

TEST(L2Prefetch, DenseGemvBitsUnchanged) {
  PartsGuard guard;
  FT_REQUIRE_L2_PREFETCH();
  std::mt19937 rng(2026);
  struct Shape {
    int64_t rows, k, n_tok;
  };
  // 4230 x 2048: the tensor-core kernel (plan: 264+ CTAs); the others the slab kernel (R 4,
  // R 2 with several slabs per row and a partial last one, several tokens).
  for (const Shape sh : {Shape{4230, 2048, 1}, Shape{1037, 4096, 1}, Shape{301, 14336, 1}, Shape{500, 2304, 3}}) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.k) + " tokens " + std::to_string(sh.n_tok));
    const int64_t rb = row_bytes(GgmlType::NVFP4, sh.k);
    std::vector<uint8_t> hw;
    for (int64_t r = 0; r < sh.rows; ++r) {
      const std::vector<uint8_t> row = quant::testing::random_row(GgmlType::NVFP4, sh.k, rng);
      hw.insert(hw.end(), row.begin(), row.end());
    }
    DeviceBuffer w(hw.size());
    w.upload(hw.data(), hw.size());
    std::vector<float> hx(static_cast<size_t>(sh.k * sh.n_tok));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : hx) v = u(rng);
    DeviceBuffer x(hx.size() * 4), xq(act_q8_bytes(sh.k, sh.n_tok));
    x.upload(hx.data(), hx.size() * 4);
    quantize_act_q8(x.as<float>(), sh.k, sh.k, sh.n_tok, xq.get(), nullptr);
    const int64_t mma_before = gemv_nvfp4_mma_launches();
    const std::vector<float> off = dense_y(w, rb, sh.rows, sh.k, xq, sh.n_tok, 0);
    const std::vector<float> on = dense_y(w, rb, sh.rows, sh.k, xq, sh.n_tok, kAll);
    if (sh.rows == 4230) {
      EXPECT_EQ(gemv_nvfp4_mma_launches(), mma_before + 2) << "the tensor-core kernel did not run";
    }
    ASSERT_EQ(std::memcmp(off.data(), on.data(), off.size() * 4), 0) << "prefetch changed the output";
    int finite = 0;
    for (float v : on) finite += std::isfinite(v) ? 1 : 0;
    EXPECT_EQ(finite, static_cast<int>(on.size())) << "outputs left unwritten";
  }
}

// A grouped NVFP4 GEMV (the slab kernel: k 2048 = 32 blocks, the Qwen3-30B-A3B expert gate
// shape) with GemvArgs::l2_next spans against none: the same bits.
TEST(L2Prefetch, GroupedGemvNextSpansBitsUnchanged) {
  PartsGuard guard;
  FT_REQUIRE_L2_PREFETCH();
  std::mt19937 rng(77);
  const int64_t k = 2048, rows = 70, n_expert = 5, n_tok = 3, n_used = 2, n_slots = n_tok * n_used;
  const int64_t rb = row_bytes(GgmlType::NVFP4, k), eb = rb * rows;
  std::vector<uint8_t> hw;
  for (int64_t r = 0; r < rows * n_expert; ++r) {
    const std::vector<uint8_t> row = quant::testing::random_row(GgmlType::NVFP4, k, rng);
    hw.insert(hw.end(), row.begin(), row.end());
  }
  DeviceBuffer w(hw.size()), other(3 * hw.size());
  w.upload(hw.data(), hw.size());
  std::vector<float> hx(static_cast<size_t>(k * n_tok));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : hx) v = u(rng);
  DeviceBuffer x(hx.size() * 4), xq(act_q8_bytes(k, n_tok));
  x.upload(hx.data(), hx.size() * 4);
  quantize_act_q8(x.as<float>(), k, k, n_tok, xq.get(), nullptr);
  const std::vector<int32_t> ids = {4, 0, 2, 4, 1, 3};
  DeviceBuffer d_ids(ids.size() * 4);
  d_ids.upload(ids.data(), ids.size() * 4);
  auto run = [&](bool next) {
    DeviceBuffer y(static_cast<size_t>(rows * n_slots) * 4);
    FT_CUDA_CHECK(cudaMemset(y.get(), 0xFF, y.bytes()));
    GemvArgs a;
    a.type = GgmlType::NVFP4;
    a.w = w.as<uint8_t>();
    a.row_bytes = rb;
    a.k = k;
    a.rows = rows;
    a.ldx = k;
    a.n_tok = n_slots;
    a.y = y.as<float>();
    a.ldy = rows;
    a.ids = d_ids.as<int32_t>();
    a.expert_bytes = eb;
    a.x_div = n_used;
    a.xq = xq.get();
    if (next) {  // spans of odd sizes and offsets, as long as the experts
      a.l2_next[0] = L2ExpertSpan{other.as<uint8_t>() + 3, eb, eb - 3};
      a.l2_next[1] = L2ExpertSpan{other.as<uint8_t>() + 2 * hw.size(), eb / 2, eb / 2 - 100};
    }
    gemv(a, nullptr);
    std::vector<float> out(static_cast<size_t>(rows * n_slots));
    y.download(out.data(), out.size() * 4);
    return out;
  };
  const std::vector<float> off = run(false), on = run(true);
  ASSERT_EQ(std::memcmp(off.data(), on.data(), off.size() * 4), 0) << "l2_next changed the output";
  for (float v : on) ASSERT_TRUE(std::isfinite(v)) << "outputs left unwritten";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Decode steps of whole models, every part on (the experts by the gate GEMV, then by their own
// kernel) against all off: the logits of each step bit for bit (CUDA graphs on, as ft runs; the
// decode graph is captured under the parts of its session).
TEST(L2Prefetch, DecodeLogitsBitwiseOnOff) {
  PartsGuard guard;
  FT_REQUIRE_L2_PREFETCH();
  using namespace ft::gpu_test;
  using testgen::Arch;
  using testgen::Role;
  const std::vector<Case> cases = {
      {"llama_nvfp4", with(all(base(Arch::kLlama, 31), GgmlType::BF16), {Role::kAttn, Role::kMlp}, GgmlType::NVFP4)},
      {"qwen3moe_nvfp4",
       with(all(base(Arch::kQwen3Moe, 32), GgmlType::BF16), {Role::kAttn, Role::kExperts}, GgmlType::NVFP4)},
  };
  const fs::path dir = test_dir("ft-l2-prefetch-");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const TestModel tm = write_model(c.spec, dir, c.name);
    const int64_t V = tm.m->hp.n_vocab;
    const std::vector<int32_t> prompt = make_prompt(12, tm.gen.n_vocab);
    auto run = [&](unsigned parts) {
      l2_prefetch_set_parts(static_cast<int>(parts));
      gpu::GpuSessionOptions go;
      go.n_ctx = 64;
      go.dtype = "auto";
      gpu::GpuSession g(*tm.m, go);
      std::vector<float> all_logits;
      const float* l = g.eval(prompt.data(), 4);
      for (int i = 4; i < 12; ++i) {
        l = g.eval(&prompt[static_cast<size_t>(i)], 1);
        all_logits.insert(all_logits.end(), l, l + V);
      }
      return all_logits;
    };
    const std::vector<float> off = run(0), on = run(kAll), on_kernel = run(kAllKernel);
    ASSERT_EQ(off.size(), on.size());
    ASSERT_EQ(off.size(), on_kernel.size());
    EXPECT_EQ(std::memcmp(off.data(), on.data(), off.size() * 4), 0) << "prefetch changed the decode logits";
    EXPECT_EQ(std::memcmp(off.data(), on_kernel.data(), off.size() * 4), 0)
        << "prefetch (experts by their own kernel) changed the decode logits";
    std::error_code ec;
    fs::remove(tm.path, ec);
  }
}

}  // namespace
}  // namespace ft::cuda
