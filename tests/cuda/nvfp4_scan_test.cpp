// The UE4M3 NaN-code scan (cuda/nvfp4_scan.h) against its host twin, in both layouts, with the codes
// planted in scale bytes (found) and in code bytes (ignored); and GemvArgs::scales_clean: the
// tensor-core GEMVs' instances without the codes' fix-up give the checked instances' bits on
// weights without the codes -- every tiled instance kind (plain, accumulating into a residual read
// early, released under a GEMV, the SwiGLU tail) and the bulk-copy kernel on row-major weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/nvfp4_scan.h"
#include "cuda/nvfp4_tiled.h"

namespace ft::cuda {
namespace {

// Random NVFP4 rows (random_rows: NaN codes among the scales at ~1/128 a byte), or with every scale
// byte that is a NaN code (b & 0x7F == 0x7F) replaced by 0x3A.
std::vector<uint8_t> nvfp4_rows(int64_t rows, int64_t k, std::mt19937& rng, bool clean) {
  std::vector<uint8_t> w = quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng);
  if (clean)
    for (size_t b = 0; b < w.size(); b += 36)
      for (size_t i = 0; i < 4; ++i)
        if ((w[b + i] & 0x7Fu) == 0x7Fu) w[b + i] = 0x3A;
  return w;
}

bool scan(const std::vector<uint8_t>& w, int64_t rows, int64_t k, bool tiled) {
  const int64_t rb = k / 64 * 36;
  DeviceBuffer d = to_device(w);
  if (tiled) nvfp4_tile(d.as<uint8_t>(), rows, rb, nullptr);
  return nvfp4_scales_clean(d.as<uint8_t>(), rows, rb, k);
}

TEST(CudaNvfp4Scan, FindsTheNaNCodesInEitherLayout) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(4401);
  int dirty = 0;
  for (const auto& [rows, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 256}, {48, 1024}, {64, 4096}, {32, 2048}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(k));
    const int64_t rb = k / 64 * 36;
    for (int rep = 0; rep < 3; ++rep) {  // random bytes: the twin's answer, whichever it is
      const std::vector<uint8_t> w = nvfp4_rows(rows, k, rng, false);
      const bool want = nvfp4_scales_clean_host(w.data(), rows, rb, k);
      dirty += want ? 0 : 1;
      EXPECT_EQ(scan(w, rows, k, false), want) << "row-major, rep " << rep;
      EXPECT_EQ(scan(w, rows, k, true), want) << "tiled, rep " << rep;
    }
    const std::vector<uint8_t> clean = nvfp4_rows(rows, k, rng, true);
    ASSERT_TRUE(nvfp4_scales_clean_host(clean.data(), rows, rb, k));
    EXPECT_TRUE(scan(clean, rows, k, false));
    EXPECT_TRUE(scan(clean, rows, k, true));
    std::uniform_int_distribution<int64_t> blk(0, rows * (k / 64) - 1);
    for (const uint8_t code : {uint8_t{0x7F}, uint8_t{0xFF}}) {
      const int64_t b = blk(rng), at = (b / (k / 64)) * rb + (b % (k / 64)) * 36;
      for (int i = 0; i < 4; ++i) {  // every scale byte of one block
        std::vector<uint8_t> w = clean;
        w[static_cast<size_t>(at + i)] = code;
        EXPECT_FALSE(scan(w, rows, k, false)) << "scale byte " << i << " = " << int{code};
        EXPECT_FALSE(scan(w, rows, k, true)) << "tiled, scale byte " << i << " = " << int{code};
      }
      std::vector<uint8_t> w = clean;  // a code byte: not a scale
      w[static_cast<size_t>(at + 4 + b % 32)] = code;
      EXPECT_TRUE(scan(w, rows, k, false)) << "a code byte " << int{code};
    }
  }
  EXPECT_GT(dirty, 0) << "no random matrix held a NaN code: the twin comparison tested only clean ones";
  EXPECT_THROW(nvfp4_scales_clean(nullptr, 1, 100, 256), Error) << "rows shorter than k's blocks";
}

std::vector<uint8_t> quantised_x(int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
  std::vector<uint8_t> xq(act_q8_bytes(k, 1));
  quantize_act_q8_row_ref(x.data(), k, xq.data());
  return xq;
}

struct Out {
  std::vector<float> y, h;
  std::vector<uint8_t> q;
};

// One one-token gemv of rows x k clean weights (tiled or row-major), scales_clean as given.
// kind: 0 plain, 1 accumulating into y read early (GemvArgs::y_early), 2 released under a GEMV
// (after_gemv), 3 the SwiGLU tail (rows = 2 n_ff).
Out run(const DeviceBuffer& w, bool tiled, int64_t rows, int64_t k, const DeviceBuffer& dxq, const DeviceBuffer& drs,
        int kind, bool clean) {
  const int64_t n_ff = rows / 2, qbytes = act_q8_bytes(n_ff, 1);
  std::vector<float> init(static_cast<size_t>(rows), std::nanf(""));
  if (kind == 1)
    for (size_t i = 0; i < init.size(); ++i) init[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  DeviceBuffer dy = to_device(init);
  DeviceBuffer dh = to_device(std::vector<float>(static_cast<size_t>(n_ff), std::nanf("")));
  DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qbytes), 0xA5));
  DeviceBuffer dcount = to_device(std::vector<unsigned>(static_cast<size_t>(n_ff / 32 + 1), 0u));
  GemvArgs a;
  a.type = GgmlType::NVFP4;
  a.w = w.as<uint8_t>();
  a.tiled = tiled;
  a.row_bytes = k / 64 * 36;
  a.k = k;
  a.rows = rows;
  a.xq = dxq.get();
  a.n_tok = 1;
  a.y = dy.as<float>();
  a.ldy = rows;
  a.row_scale = drs.as<float>();
  a.scale = 0.75f;
  a.accumulate = a.y_early = kind == 1;
  a.after_gemv = kind == 2;
  if (kind == 3) a.glu_xq = dq.get(), a.glu_h = dh.as<float>(), a.glu_count = dcount.as<unsigned>();
  a.scales_clean = clean;
  gemv(a);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  Out r;
  r.y = to_host<float>(dy, init.size());
  if (kind == 3) r.h = to_host<float>(dh, static_cast<size_t>(n_ff)), r.q = to_host<uint8_t>(dq, static_cast<size_t>(qbytes));
  return r;
}

TEST(CudaNvfp4Scan, CleanLaunchesEqualTheCheckedOnes) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(4402);
  std::uniform_real_distribution<float> unit(0.5f, 1.5f);
  struct Case {
    int64_t rows, k;
    int kind;
  };
  // Llama-8B's qkv (released under the down projection), gate|up with its SwiGLU tail, its down projection
  // into the residual; small shapes of each kind.
  for (const Case c : {Case{6144, 4096, 2}, Case{28672, 4096, 3}, Case{4096, 14336, 1}, Case{4224, 4096, 0},
                       Case{96, 2048, 0}, Case{64, 1024, 1}, Case{192, 512, 3}, Case{32, 256, 2}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.k) + " kind " + std::to_string(c.kind));
    const std::vector<uint8_t> w = nvfp4_rows(c.rows, c.k, rng, true);
    DeviceBuffer dw = to_device(w);
    nvfp4_tile(dw.as<uint8_t>(), c.rows, c.k / 64 * 36, nullptr);
    ASSERT_TRUE(nvfp4_scales_clean(dw.as<uint8_t>(), c.rows, c.k / 64 * 36, c.k));
    const DeviceBuffer dxq = to_device(quantised_x(c.k, rng));
    std::vector<float> rs(static_cast<size_t>(c.rows));
    for (auto& v : rs) v = unit(rng);
    const DeviceBuffer drs = to_device(rs);
    const int64_t m0 = gemv_nvfp4_mma_launches(), c0 = gemv_nvfp4_clean_launches();
    const Out checked = run(dw, true, c.rows, c.k, dxq, drs, c.kind, false);
    EXPECT_EQ(gemv_nvfp4_clean_launches() - c0, 0) << "the checked call took a clean instance";
    const Out fast = run(dw, true, c.rows, c.k, dxq, drs, c.kind, true);
    EXPECT_EQ(gemv_nvfp4_mma_launches() - m0, 2) << "not the tensor-core kernel";
    EXPECT_EQ(gemv_nvfp4_clean_launches() - c0, 1) << "the clean call took a checked instance";
    for (size_t i = 0; i < checked.y.size(); ++i) ASSERT_FALSE(std::isnan(checked.y[i])) << "row " << i << " not written";
    ASSERT_EQ(std::memcmp(fast.y.data(), checked.y.data(), checked.y.size() * sizeof(float)), 0) << "outputs differ";
    ASSERT_EQ(std::memcmp(fast.h.data(), checked.h.data(), checked.h.size() * sizeof(float)), 0) << "SwiGLU rows differ";
    ASSERT_EQ(fast.q, checked.q) << "SwiGLU Q8 bytes differ";
  }
  // The bulk-copy kernel (row-major weights, forced on every one-token shape): Qwen3-30B-A3B's qkv.
  const int64_t rows = 5120, k = 2048;
  const std::vector<uint8_t> w = nvfp4_rows(rows, k, rng, true);
  const DeviceBuffer dw = to_device(w), dxq = to_device(quantised_x(k, rng));
  const DeviceBuffer drs = to_device(std::vector<float>(static_cast<size_t>(rows), 1.25f));
  gemv_set_nvfp4_tma(2, 4, 0, 0);
  const int64_t t0 = gemv_nvfp4_tma_launches(), c0 = gemv_nvfp4_clean_launches();
  const Out checked = run(dw, false, rows, k, dxq, drs, 0, false), fast = run(dw, false, rows, k, dxq, drs, 0, true);
  gemv_set_nvfp4_tma(0, 0, 0, 0);
  EXPECT_EQ(gemv_nvfp4_tma_launches() - t0, 2) << "not the bulk-copy kernel";
  EXPECT_EQ(gemv_nvfp4_clean_launches() - c0, 1) << "the clean call took a checked instance, or the checked a clean";
  ASSERT_EQ(std::memcmp(fast.y.data(), checked.y.data(), checked.y.size() * sizeof(float)), 0) << "bulk-copy outputs differ";
}

// A planted NaN code keeps its meaning on the checked path a caller that did not scan gets: the same
// output as the scale byte 0x00 (both decode to 0).
TEST(CudaNvfp4Scan, UnscannedWeightsKeepTheCodesMeaning) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(4403);
  const int64_t rows = 64, k = 1024, rb = k / 64 * 36;
  std::vector<uint8_t> w = nvfp4_rows(rows, k, rng, true), z = w;
  w[static_cast<size_t>(5 * rb + 3 * 36 + 1)] = 0x7F;
  z[static_cast<size_t>(5 * rb + 3 * 36 + 1)] = 0x00;
  DeviceBuffer dw = to_device(w), dz = to_device(z);
  nvfp4_tile(dw.as<uint8_t>(), rows, rb, nullptr);
  nvfp4_tile(dz.as<uint8_t>(), rows, rb, nullptr);
  const DeviceBuffer dxq = to_device(quantised_x(k, rng));
  const DeviceBuffer drs = to_device(std::vector<float>(static_cast<size_t>(rows), 1.0f));
  const Out a = run(dw, true, rows, k, dxq, drs, 0, false), b = run(dz, true, rows, k, dxq, drs, 0, false);
  ASSERT_FALSE(std::isnan(a.y[5])) << "the NaN code leaked into row 5";
  ASSERT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace ft::cuda
