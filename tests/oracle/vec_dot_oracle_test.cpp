// F32 / F16 / BF16 weights under --dtype auto where llama.cpp takes one dot product per row
// and token (one token, or a matrix whose row count is not a multiple of 4): our matmul
// must give ggml's vec_dot result bit for bit (quant/matmul_vec_dot.cpp), against the
// haswell CPU library's own vec_dot and activation conversion.
#include <dlfcn.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/cpu_features.h"
#include "quant/act_quant.h"
#include "quant/matmul.h"

namespace ft::quant {
namespace {

using TraitsFn = const ggml_type_traits_cpu* (*)(ggml_type);

TraitsFn traits() {
  static TraitsFn fn = []() -> TraitsFn {
    if (!isa_supported(Isa::kAvx2)) return nullptr;
    void* h = dlopen((std::string(FT_LLAMA_LIB_DIR) + "/libggml-cpu-haswell.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return nullptr;
    if (auto init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"))) init();
    return reinterpret_cast<TraitsFn>(dlsym(h, "ggml_get_type_traits_cpu"));
  }();
  return fn;
}

TEST(VecDotOracle, FloatWeightsBitIdenticalWhereGgmlTakesVecDot) {
  if (traits() == nullptr) GTEST_SKIP() << "no AVX2 or no libggml-cpu-haswell.so";
  struct Case {
    int64_t k, rows, n_tok;
  };
  // One token; a batch over 3 rows (not a multiple of 4); k with a tail past the 32-steps.
  const Case cases[] = {{1024, 8, 1}, {1000, 8, 1}, {256, 3, 5}, {72, 3, 2}};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const auto* tr = traits()(static_cast<ggml_type>(static_cast<int>(t)));
    const auto* vt = traits()(tr->vec_dot_type);
    for (const Case& c : cases) {
      std::mt19937 rng(static_cast<unsigned>(7 * c.k + c.rows + static_cast<int>(t)));
      std::vector<uint8_t> w;
      for (int64_t r = 0; r < c.rows; ++r) {
        const auto row = testing::random_row(t, c.k, rng);
        w.insert(w.end(), row.begin(), row.end());
      }
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(c.k * c.n_tok)), y(static_cast<size_t>(c.rows * c.n_tok));
      for (auto& v : x) v = nd(rng);
      MatmulArgs a;
      a.type = t;
      a.w = w.data();
      a.row_bytes = row_bytes(t, c.k);
      a.k = c.k;
      a.x = x.data();
      a.ldx = c.k;
      a.n_tok = c.n_tok;
      a.y = y.data();
      a.ldy = c.rows;
      a.act_quant = ActQuant::kQ8;
      a.n_rows = c.rows;
      matmul(a, 0, c.rows);
      std::vector<uint8_t> xq(static_cast<size_t>(row_bytes(static_cast<GgmlType>(tr->vec_dot_type), c.k)));
      for (int64_t tk = 0; tk < c.n_tok; ++tk) {
        const float* xt = x.data() + tk * c.k;
        if (vt->from_float)
          vt->from_float(xt, xq.data(), c.k);
        else
          std::memcpy(xq.data(), xt, sizeof(float) * c.k);
        for (int64_t r = 0; r < c.rows; ++r) {
          float theirs = 0.0f;
          tr->vec_dot(static_cast<int>(c.k), &theirs, 0, w.data() + r * a.row_bytes, 0, xq.data(), 0, 1);
          EXPECT_EQ(y[tk * c.rows + r], theirs) << type_name(t) << " k " << c.k << " rows " << c.rows << " n_tok "
                                                << c.n_tok << " row " << r << " token " << tk;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ft::quant
