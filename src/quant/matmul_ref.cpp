// The slow twin: dequantise each row with the reference decoder, then accumulate
// W[r] . X[t] in fp32, element by element in order.
#include <vector>

#include "quant/act_quant.h"
#include "quant/dequant.h"
#include "quant/matmul.h"
#include "quant/matmul_kernels.h"

namespace ft::quant {

void matmul_ref(const MatmulArgs& a, int64_t r0, int64_t r1) {
  if (a.act_quant == ActQuant::kQ8 && act_dot_type(a.type) == GgmlType::Q8_1) return detail::matmul_q8_1(a, r0, r1);
  if (a.act_quant == ActQuant::kQ8 && act_dot_type(a.type) != GgmlType::F32) {
    // The q8 route by definition: the fp32 product with X rounded as ggml rounds it.
    const GgmlType dot = act_dot_type(a.type);
    std::vector<float> xr(static_cast<size_t>(a.n_tok * a.k));
    for (int64_t t = 0; t < a.n_tok; ++t) round_trip_act(dot, a.x + t * a.ldx, xr.data() + t * a.k, a.k);
    MatmulArgs b = a;
    b.x = xr.data();
    b.ldx = a.k;
    b.act_quant = ActQuant::kNone;
    return matmul_ref(b, r0, r1);
  }
  std::vector<float> wrow(static_cast<size_t>(a.k));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row_ref(a.type, a.w + r * a.row_bytes, wrow.data(), a.k);
    for (int64_t t = 0; t < a.n_tok; ++t) {
      const float* x = a.x + t * a.ldx;
      float s = 0.0f;
      for (int64_t e = 0; e < a.k; ++e) s += wrow[static_cast<size_t>(e)] * x[e];
      a.y[t * a.ldy + r] = detail::matmul_finish(a, r, s);
    }
  }
}

}  // namespace ft::quant
