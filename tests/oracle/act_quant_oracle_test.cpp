// Our activation quantisers against the ones llama.cpp's CPU backend really runs here:
// from_float of Q8_0 / Q8_1 / Q8_K in the prebuilt libggml-cpu-haswell.so (the x86 AVX2
// build), loaded with dlopen. Blocks must be byte-identical (ties, zero blocks, subnormal
// fp16 scales included), and so must the packed rows the integer kernels read.
#include <dlfcn.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/act_test_data.h"
#include "../quant/random_blocks.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul.h"

namespace ft::quant {
namespace {

using TraitsFn = const ggml_type_traits_cpu* (*)(ggml_type);

// ggml_get_type_traits_cpu of the haswell variant (null when this CPU cannot run it).
TraitsFn haswell_traits() {
  static TraitsFn fn = []() -> TraitsFn {
    if (!isa_supported(Isa::kAvx2)) return nullptr;
    const std::string path = std::string(FT_LLAMA_LIB_DIR) + "/libggml-cpu-haswell.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return nullptr;
    if (auto init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"))) init();
    return reinterpret_cast<TraitsFn>(dlsym(h, "ggml_get_type_traits_cpu"));
  }();
  return fn;
}

std::vector<uint8_t> ggml_quantize(GgmlType t, const std::vector<float>& x) {
  const auto* tr = haswell_traits()(static_cast<ggml_type>(static_cast<int>(t)));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes(t, n)));
  tr->from_float(x.data(), out.data(), n);
  return out;
}

class ActQuantOracle : public ::testing::Test {
 protected:
  void SetUp() override {
    if (haswell_traits() == nullptr) GTEST_SKIP() << "no AVX2 or no libggml-cpu-haswell.so";
  }
};

TEST_F(ActQuantOracle, Q8_0BitIdentical) {
  std::mt19937 rng(5);
  for (int rep = 0; rep < 20; ++rep) {
    const auto x = testing::act_rows_with_corners(2048, rng);
    const auto theirs = ggml_quantize(GgmlType::Q8_0, x);
    std::vector<BlockQ8_0> ours(x.size() / 32);
    quantize_q8_0_ref(x.data(), ours.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(theirs.size(), ours.size() * sizeof(BlockQ8_0));
    for (size_t b = 0; b < ours.size(); ++b)
      ASSERT_EQ(std::memcmp(&ours[b], theirs.data() + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0)), 0)
          << "rep " << rep << " block " << b;
    // The packed row (what the kernels read) holds the same int8 and the widened d.
    const int64_t k = static_cast<int64_t>(x.size());
    std::vector<uint8_t> packed(static_cast<size_t>(packed_act_bytes(GgmlType::Q8_0, k)));
    pack_act(GgmlType::Q8_0, x.data(), packed.data(), k);
    const PackedActRow v = packed_act_view(GgmlType::Q8_0, packed.data(), k);
    for (size_t b = 0; b < ours.size(); ++b) {
      BlockQ8_0 g;
      std::memcpy(&g, theirs.data() + b * sizeof(BlockQ8_0), sizeof g);
      ASSERT_EQ(std::memcmp(v.qs + 32 * b, g.qs, 32), 0) << "packed block " << b;
      ASSERT_EQ(f32_to_bits(v.d[b]), f32_to_bits(f16_to_f32(g.d))) << "packed d " << b;
    }
  }
}

TEST_F(ActQuantOracle, Q8_1BitIdentical) {
  std::mt19937 rng(6);
  for (int rep = 0; rep < 20; ++rep) {
    const auto x = testing::act_rows_with_corners(2048, rng);
    const auto theirs = ggml_quantize(GgmlType::Q8_1, x);
    std::vector<BlockQ8_1> ours(x.size() / 32);
    quantize_q8_1_ref(x.data(), ours.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(theirs.size(), ours.size() * sizeof(BlockQ8_1));
    for (size_t b = 0; b < ours.size(); ++b)
      ASSERT_EQ(std::memcmp(&ours[b], theirs.data() + b * sizeof(BlockQ8_1), sizeof(BlockQ8_1)), 0)
          << "rep " << rep << " block " << b;
  }
}

TEST_F(ActQuantOracle, Q8_KBitIdentical) {
  std::mt19937 rng(7);
  for (int rep = 0; rep < 20; ++rep) {
    const auto x = testing::act_rows_with_corners(2048, rng);
    const auto theirs = ggml_quantize(GgmlType::Q8_K, x);
    std::vector<BlockQ8_K> ours(x.size() / 256);
    quantize_q8_K_ref(x.data(), ours.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(theirs.size(), ours.size() * sizeof(BlockQ8_K));
    for (size_t b = 0; b < ours.size(); ++b)
      ASSERT_EQ(std::memcmp(&ours[b], theirs.data() + b * sizeof(BlockQ8_K), sizeof(BlockQ8_K)), 0)
          << "rep " << rep << " block " << b;
    const int64_t k = static_cast<int64_t>(x.size());
    std::vector<uint8_t> packed(static_cast<size_t>(packed_act_bytes(GgmlType::Q8_K, k)));
    pack_act(GgmlType::Q8_K, x.data(), packed.data(), k);
    const PackedActRow v = packed_act_view(GgmlType::Q8_K, packed.data(), k);
    for (size_t b = 0; b < ours.size(); ++b) {
      ASSERT_EQ(std::memcmp(v.qs + 256 * b, ours[b].qs, 256), 0);
      ASSERT_EQ(std::memcmp(v.bsums + 16 * b, ours[b].bsums, 32), 0);
      ASSERT_EQ(f32_to_bits(v.d[b]), f32_to_bits(ours[b].d));
    }
  }
}

// F16 / BF16 weights: ggml rounds activations with from_float of F16 / BF16.
TEST_F(ActQuantOracle, HalfRoundingBitIdentical) {
  std::mt19937 rng(8);
  const auto x = testing::act_rows_with_corners(4096, rng);
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    ASSERT_EQ(act_dot_type(t), t);
    const auto theirs = ggml_quantize(t, x);
    std::vector<float> ours(x.size());
    round_trip_act(t, x.data(), ours.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, theirs.data() + 2 * i, 2);
      const float g = t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      ASSERT_EQ(f32_to_bits(ours[i]), f32_to_bits(g)) << type_name(t) << " element " << i;
    }
  }
}

// Our weight-type -> activation-type table is ggml's vec_dot_type.
TEST_F(ActQuantOracle, DotTypesMatchGgml) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::IQ3_XXS, GgmlType::MXFP4, GgmlType::NVFP4}) {
    const auto* tr = haswell_traits()(static_cast<ggml_type>(static_cast<int>(t)));
    EXPECT_EQ(static_cast<int>(act_dot_type(t)), static_cast<int>(tr->vec_dot_type))
        << type_name(t);
  }
}

// Whole q8-route products: matmul(kQ8) against ggml's from_float + vec_dot on the same
// rows, for every type. Only fp32 summation order may differ.
TEST_F(ActQuantOracle, MatmulQ8MatchesGgmlVecDot) {
  for (GgmlType t : testing::first_types()) {
    if (t == GgmlType::F32) continue;
    std::mt19937 rng(40 + static_cast<int>(t));
    const int64_t k = 1024, rows = 16, n_tok = 3;
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = testing::random_row(t, k, rng);
      w.insert(w.end(), row.begin(), row.end());
    }
    const int64_t rb = row_bytes(t, k);
    const auto x = testing::act_rows_with_corners(k * n_tok, rng);
    std::vector<float> y(static_cast<size_t>(rows * n_tok));
    MatmulArgs a;
    a.type = t;
    a.w = w.data();
    a.row_bytes = rb;
    a.k = k;
    a.x = x.data();
    a.ldx = k;
    a.n_tok = n_tok;
    a.y = y.data();
    a.ldy = rows;
    a.act_quant = ActQuant::kQ8;
    matmul(a, 0, rows);
    const auto* tr = haswell_traits()(static_cast<ggml_type>(static_cast<int>(t)));
    const auto* vt = haswell_traits()(tr->vec_dot_type);
    const int64_t qrow = row_bytes(static_cast<GgmlType>(tr->vec_dot_type), k);
    std::vector<uint8_t> xq(static_cast<size_t>(qrow));
    std::vector<float> wrow(static_cast<size_t>(k)), xr(static_cast<size_t>(k));
    for (int64_t tk = 0; tk < n_tok; ++tk) {
      vt->from_float(x.data() + tk * k, xq.data(), k);
      round_trip_act(act_dot_type(t), x.data() + tk * k, xr.data(), k);
      for (int64_t r = 0; r < rows; ++r) {
        float theirs = 0.0f;
        tr->vec_dot(static_cast<int>(k), &theirs, 0, w.data() + r * rb, 0, xq.data(), 0, 1);
        dequantize_row_ref(t, w.data() + r * rb, wrow.data(), k);
        double abs_sum = 0;
        for (int64_t e = 0; e < k; ++e) abs_sum += std::fabs(static_cast<double>(wrow[e]) * xr[e]);
        EXPECT_LE(std::fabs(static_cast<double>(y[tk * rows + r]) - theirs), 2e-6 * abs_sum + 1e-30)
            << type_name(t) << " row " << r << " token " << tk << ": ours " << y[tk * rows + r]
            << ", ggml " << theirs;
      }
    }
  }
}

}  // namespace
}  // namespace ft::quant
