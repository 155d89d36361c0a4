// Linear: y = x @ W^T (* s) (+ b) for a projection made of one or more weight tensors whose
// outputs are concatenated (fused Q|K|V, gate|up).
//
// On the CPU the parts stay where they are in the mapping (zero-copy): one parallel loop
// runs over the concatenated output rows and each row range is computed from its own part
// with that part's scalar `.scale` in the fp32 epilogue, so a fused projection costs one
// thread-pool round trip instead of three. row_scales() gives the equivalent one-fp32-per-
// output-row vector (1 for parts without a scale) for a backend that concatenates the
// weights physically (only possible when the parts share a type).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/exec.h"
#include "model/tensor.h"

namespace ft::engine {

struct LinearPart {
  model::Tensor w;               // {k, rows}
  float scale = 1.0f;            // NVFP4 second-level scale
  const float* bias = nullptr;   // {rows} fp32, added after the scale
  int64_t row0 = 0;              // first output row of this part
  int64_t rows() const { return w.ne[1]; }
};

class Linear {
 public:
  Linear() = default;
  // Appends a part (its rows follow the previous parts'). All parts share k.
  void add(const model::ScaledTensor& w, const model::Tensor& bias = {});
  void add(const model::Tensor& w, float scale, const model::Tensor& bias = {});

  bool empty() const { return parts_.empty(); }
  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  const std::vector<LinearPart>& parts() const { return parts_; }
  bool same_type() const;              // all parts have one weight type
  std::vector<float> row_scales() const;  // one fp32 scale per output row

 private:
  std::vector<LinearPart> parts_;
  int64_t rows_ = 0;
  int64_t k_ = 0;
};

// Y[t][0..rows) = x[t] @ W^T for t < n_tok; X rows ldx apart, Y rows ldy apart.
// Results are rounded to the activation dtype after scale and bias.
void linear(const Exec& ex, const Linear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
            int64_t ldy);

// Single-threaded reference of the same (matmul_ref, scale, bias, rounding): the twin of linear().
void linear_ref(ActType act, const Linear& l, const float* x, int64_t ldx, int64_t n_tok, float* y,
                int64_t ldy);

}  // namespace ft::engine
