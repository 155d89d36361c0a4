// Helpers shared by the engine tests: deterministic random data and NVFP4 tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/tensor.h"
#include "quant/quantize.h"

namespace ft::test {

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A weight tensor {k, rows, n_mat} of type t quantised from random values; the bytes live
// in `store` (kept alive by the caller).
inline model::Tensor make_weight(GgmlType t, int64_t k, int64_t rows, int64_t n_mat, uint64_t seed,
                                 std::vector<uint8_t>& store, float scale = 1.0f) {
  const auto f = randn(static_cast<size_t>(k * rows * n_mat), seed, scale);
  store = quant::quantize_rows_ref(t, f.data(), rows * n_mat, k);
  model::Tensor w;
  w.data = store.data();
  w.type = t;
  w.n_dims = n_mat > 1 ? 3 : 2;
  w.ne[0] = k;
  w.ne[1] = rows;
  w.ne[2] = n_mat;
  w.name = "test";
  return w;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}
inline float max_abs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace ft::test
