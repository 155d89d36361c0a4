// Compare-and-report helpers of the matrix-product GPU tests against their CPU twins
// (gemv_test.cpp, gemm_split_test.cpp): the no-device skip, the poison value, the float64
// product with its error scales, the fp32-order tolerance and a tally of outputs beyond it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops_test_util.h"
#include "quant/matmul.h"

#define FT_REQUIRE_GPU() FT_OPS_REQUIRE_GPU()

namespace ft::cuda::compare_test {

using ops_test::kPoison;  // a NaN no kernel computes
using ops_test::poison;

inline bool is_poison(float v) { return ops_test::bits(v) == kPoison; }

// The float64 product of one weight row and one activation row, with its error scales
// S1 = sum |w x| and S2 = sqrt(sum (w x)^2).
struct Dot {
  double v = 0, s1 = 0, s2 = 0;
};
inline Dot dot64(const float* w, const float* x, int64_t k) {
  Dot d;
  double sq = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double p = static_cast<double>(w[i]) * x[i];
    d.v += p;
    d.s1 += std::fabs(p);
    sq += p * p;
  }
  d.s2 = std::sqrt(sq);
  return d;
}

// The fp32 level: exact products, fp32 sums in another order than the twin's, as a share
// of S1 (already scaled by |s|).
inline double fp32_tolerance(double s1) { return 1e-5 * s1; }

// One unit in the last place of an output rounded to bf16 / f16, relative to the value.
inline double round_unit(quant::Round r) {
  return r == quant::Round::kBF16 ? 1.0 / 128 : r == quant::Round::kF16 ? 1.0 / 1024 : 0.0;
}

// Outcome of one run against the twin: outputs beyond the tolerance, and the worst ratio.
struct Outcome {
  int64_t n = 0, bad = 0;
  double worst = 0;  // max |err| / tol
  std::string first_bad;
};

inline void tally(Outcome& o, double got, double want, double tol, const std::string& where) {
  ++o.n;
  const double err = std::fabs(got - want);
  o.worst = std::max(o.worst, err / tol);
  if (!(err <= tol)) {  // NaN counts as bad
    if (o.bad == 0) o.first_bad = where + " got " + std::to_string(got) + " want " + std::to_string(want);
    ++o.bad;
  }
}

}  // namespace ft::cuda::compare_test
