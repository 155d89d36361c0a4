// The q8 route for Q4_1 / Q5_1 weights, whose activations are Q8_1 blocks: ggml's dot
// uses the block's stored s = fp16(d * sum(q)) for the min term,
//   sum_b  (d_w * d_x) * sum_i q_w[i] * q_x[i]  +  m_w * s_x,
// which no rounding of X alone reproduces, so these two rare types run this scalar code
// on every ISA (fast and twin alike).
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/matmul_kernels.h"

namespace ft::quant::detail {
namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Unsigned codes of one 32-element block (element order), its d and m.
void decode_codes(GgmlType t, const uint8_t* b, int q[32], float& d, float& m) {
  d = f16_at(b);
  m = f16_at(b + 2);
  if (t == GgmlType::Q4_1) {
    for (int j = 0; j < 16; ++j) {
      q[j] = b[4 + j] & 0xF;
      q[j + 16] = b[4 + j] >> 4;
    }
    return;
  }
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = (b[8 + j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + 16] = (b[8 + j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}

}  // namespace

void matmul_q8_1(const MatmulArgs& a, int64_t r0, int64_t r1) {
  const int64_t nb = a.k / 32, bytes = a.type == GgmlType::Q4_1 ? 20 : 24;
  std::vector<BlockQ8_1> xq(static_cast<size_t>(nb * a.n_tok));
  for (int64_t t = 0; t < a.n_tok; ++t) quantize_q8_1_ref(a.x + t * a.ldx, xq.data() + t * nb, a.k);
  int q[32];
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < a.n_tok; ++t) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        float d, m;
        decode_codes(a.type, a.w + r * a.row_bytes + b * bytes, q, d, m);
        const BlockQ8_1& y = xq[static_cast<size_t>(t * nb + b)];
        int sumi = 0;
        for (int i = 0; i < 32; ++i) sumi += q[i] * y.qs[i];
        sum += (d * f16_to_f32(y.d)) * static_cast<float>(sumi) + m * f16_to_f32(y.s);
      }
      a.y[t * a.ldy + r] = matmul_finish(a, r, sum);
    }
  }
}

}  // namespace ft::quant::detail
