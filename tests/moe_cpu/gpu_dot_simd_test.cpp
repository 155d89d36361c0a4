// Each SIMD family of the exact-mode rows (gpu_dot_avx2.cpp, gpu_dot_avx512.cpp) called
// directly, whatever gpu_dot_isa() picks, against the scalar mirror bit for bit: every plan,
// row counts on and off the row group (8, 16), row lengths with partial units / slabs / last
// float groups, odd scale bytes, all-zero activation blocks, with and without the caller's
// aux. A family the CPU lacks is skipped (AVX-512 needs F/BW/VL/VNNI: the H200 host has it,
// the dev host and CI do not). Also the AVX2 activation quantiser against its scalar twin.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "../engine/test_util.h"
#include "core/cpu_features.h"
#include "moe_cpu/gpu_dot.h"

namespace ft::moe_cpu {
namespace {

using Q8Rows = bool (*)(const GpuDotPlan&, GgmlType, const uint8_t*, int64_t, int64_t, const GpuActQ8&, int64_t,
                        float*);
using FloatRows = bool (*)(GgmlType, const uint8_t*, int64_t, int64_t, const float*, int64_t, float*);

struct Family {
  const char* name;
  bool (*supported)();
  Q8Rows q8;
  FloatRows fl;
};

bool has_avx2() { return isa_supported(Isa::kAvx2); }

const Family kFamilies[] = {
    {"avx2", has_avx2, detail::gpu_dot_q8_rows_avx2, detail::gpu_dot_float_rows_avx2},
    {"avx512", gpu_dot_avx512_supported, detail::gpu_dot_q8_rows_avx512, detail::gpu_dot_float_rows_avx512},
};

class GpuDotSimd : public ::testing::TestWithParam<int> {
 protected:
  const Family& fam() const { return kFamilies[GetParam()]; }
  void SetUp() override {
    if (!fam().supported()) GTEST_SKIP() << "this CPU has no " << fam().name << " (exact-mode rows not run)";
  }
};

TEST_P(GpuDotSimd, Q8RowsMatchScalarMirror) {
  int compared = 0;
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q8_0, GgmlType::MXFP4})
    for (int64_t k : {64, 192, 768, 2048 + 64})
      for (int64_t rows : {1, 13, 16, 37}) {
        std::vector<uint8_t> store;
        const auto w = test::make_weight(t, k, rows, 1, static_cast<uint64_t>(17 + k + rows), store);
        const int64_t rb = w.row_bytes();
        std::vector<uint8_t> wb(w.data, w.data + rows * rb);
        if (t == GgmlType::NVFP4) wb[0] = 0x7F, wb[1] = 0xFF, wb[2] = 0x80, wb[3] = 0x05;
        if (t == GgmlType::Q8_0) wb[2] = 0x80;
        if (t == GgmlType::MXFP4) wb[0] = 0, wb[(rows - 1) * rb] = 1;
        auto x = test::randn(k, static_cast<uint64_t>(18 + rows));
        for (int i = 32; i < 64 && k > 64; ++i) x[i] = 0.0f;
        std::vector<int8_t> qs(k);
        std::vector<float> d(k / 32);
        gpu_quantize_act_q8_ref(x.data(), k, qs.data(), d.data());
        GpuActAux aux;
        gpu_act_aux(t, GpuActQ8{qs.data(), d.data()}, k, aux);
        for (GpuDotPlan p : {GpuDotPlan{GpuDot::kNvfp4Packed, 32}, GpuDotPlan{GpuDot::kNvfp4Slab, 32},
                             GpuDotPlan{GpuDot::kQ8Generic, 4}, GpuDotPlan{GpuDot::kQ8Generic, 8},
                             GpuDotPlan{GpuDot::kQ8Generic, 16}, GpuDotPlan{GpuDot::kQ8Generic, 32}})
          for (bool with_aux : {false, true}) {
            const GpuActQ8 xq{qs.data(), d.data(), with_aux ? &aux : nullptr};
            std::vector<float> got(rows, 12345.0f);
            ASSERT_TRUE(fam().q8(p, t, wb.data(), rb, rows, xq, k, got.data())) << fam().name << " refused";
            for (int64_t r = 0; r < rows; ++r) {
              const float ref = gpu_dot_q8(p, t, wb.data() + r * rb, xq, k);
              ++compared;
              EXPECT_EQ(std::memcmp(&got[r], &ref, 4), 0)
                  << fam().name << " " << type_name(t) << " k " << k << " rows " << rows << " kind "
                  << static_cast<int>(p.kind) << " lanes " << p.lanes << " aux " << with_aux << " row " << r << ": "
                  << got[r] << " vs " << ref;
            }
          }
      }
  EXPECT_GT(compared, 9000);
}

// Every one of the 256 UE4M3 scale bytes (subnormals, 0x7F -> 0, 0xFF -> 480, the sign bit)
// through the SIMD decoders, in every NVFP4 plan.
TEST_P(GpuDotSimd, Nvfp4EveryScaleByte) {
  const int64_t k = 2048 + 64, rows = 19, nb = k / 64;
  std::vector<uint8_t> store;
  const auto w = test::make_weight(GgmlType::NVFP4, k, rows, 1, 77, store);
  const int64_t rb = w.row_bytes();
  std::vector<uint8_t> wb(w.data, w.data + rows * rb);
  int counter = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < nb; ++c)
      for (int s = 0; s < 4; ++s) wb[r * rb + 36 * c + s] = static_cast<uint8_t>(counter++ & 0xFF);
  ASSERT_GE(counter, 256);
  const auto x = test::randn(k, 78);
  std::vector<int8_t> qs(k);
  std::vector<float> d(k / 32);
  gpu_quantize_act_q8_ref(x.data(), k, qs.data(), d.data());
  const GpuActQ8 xq{qs.data(), d.data()};
  for (GpuDotPlan p : {GpuDotPlan{GpuDot::kNvfp4Packed, 32}, GpuDotPlan{GpuDot::kNvfp4Slab, 32},
                       GpuDotPlan{GpuDot::kQ8Generic, 8}}) {
    std::vector<float> got(rows);
    ASSERT_TRUE(fam().q8(p, GgmlType::NVFP4, wb.data(), rb, rows, xq, k, got.data()));
    for (int64_t r = 0; r < rows; ++r) {
      const float ref = gpu_dot_q8(p, GgmlType::NVFP4, wb.data() + r * rb, xq, k);
      EXPECT_EQ(std::memcmp(&got[r], &ref, 4), 0)
          << fam().name << " kind " << static_cast<int>(p.kind) << " row " << r << ": " << got[r] << " vs " << ref;
    }
  }
}

TEST_P(GpuDotSimd, BF16FloatRowsMatchScalarMirror) {
  for (int64_t k : {32, 64, 96, 1024 + 128, 2048, 2048 + 32})
    for (int64_t rows : {1, 11}) {
      std::vector<uint8_t> store;
      const auto w = test::make_weight(GgmlType::BF16, k, rows, 1, static_cast<uint64_t>(23 + k), store);
      auto x = test::randn(k, static_cast<uint64_t>(24 + k));
      x[5] = 1e-30f;
      x[6] = -3e-38f;
      std::vector<float> got(rows, 12345.0f);
      ASSERT_TRUE(fam().fl(GgmlType::BF16, w.data, w.row_bytes(), rows, x.data(), k, got.data()));
      for (int64_t r = 0; r < rows; ++r) {
        const float ref = gpu_dot_float(GgmlType::BF16, w.data + r * w.row_bytes(), x.data(), k);
        EXPECT_EQ(std::memcmp(&got[r], &ref, 4), 0)
            << fam().name << " k " << k << " row " << r << ": " << got[r] << " vs " << ref;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, GpuDotSimd, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(kFamilies[info.param].name); });

// The AVX2 quantiser gives the scalar loop's codes and scales: ties (x * id exactly k + 0.5,
// rounded half to even), a zero block, a block with one value, negative zeros, large values.
TEST(GpuDotSimdQuant, Avx2QuantiserIsTheScalarOne) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const int64_t k = 32 * 40;
  auto x = test::randn(k, 91);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;
  for (int i = 0; i < 32; ++i) x[64 + i] = i == 7 ? -3.0f : -0.0f;
  // amax 127: id = 1, so x * id = x and the halves are ties.
  for (int i = 0; i < 32; ++i) x[96 + i] = i == 0 ? 127.0f : static_cast<float>(i - 16) + 0.5f;
  for (int i = 0; i < 32; ++i) x[128 + i] *= 1e30f;
  std::vector<int8_t> q0(k), q1(k);
  std::vector<float> d0(k / 32), d1(k / 32);
  gpu_quantize_act_q8_ref(x.data(), k, q0.data(), d0.data());
  detail::gpu_quantize_act_q8_avx2(x.data(), k, q1.data(), d1.data());
  EXPECT_EQ(std::memcmp(q0.data(), q1.data(), k), 0);
  EXPECT_EQ(std::memcmp(d0.data(), d1.data(), sizeof(float) * d0.size()), 0);
  // The ties went to even (half away from zero would give -15 and -14).
  EXPECT_EQ(q0[96 + 1], -14);
  EXPECT_EQ(q0[96 + 2], -14);
}

}  // namespace
}  // namespace ft::moe_cpu
