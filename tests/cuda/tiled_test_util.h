// Helpers of the tiled NVFP4 GEMV tests (gemv_tiled_test.cpp, gemv_lanes_test.cpp): a random Q8 activation block
// and one gate|up + SwiGLU call with its three outputs read back.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/glu.h"

namespace ft::cuda::tiled_test {

// n_tok Q8 activation rows of k random values spread over e^-2..e^2 in magnitude.
inline std::vector<uint8_t> quantised_x(int64_t k, int64_t n_tok, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<uint8_t> xq(act_q8_bytes(k, n_tok));
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
    quantize_act_q8_row_ref(x.data(), k, xq.data() + t * act_q8_row_bytes(k));
  }
  return xq;
}

// A gate|up product (2 n_ff rows) and its SwiGLU: y, the SwiGLU rows h and their Q8 bytes.
struct GluOut {
  std::vector<float> y, h;
  std::vector<uint8_t> q;
};
// One token's call a (weights, k, rows = 2 n_ff, xq, scales, rounding set by the caller) into fresh buffers
// (NaN / 0xA5 where nothing wrote): with the SwiGLU tail in the launch (fused, `count`: its n_ff / 32 tickets,
// zero) or by swiglu_q8 after it.
inline GluOut run_glu(GemvArgs a, int64_t n_ff, bool fused, unsigned* count) {
  const int64_t qbytes = act_q8_bytes(n_ff, 1);
  DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(2 * n_ff), std::nanf("")));
  DeviceBuffer dh = to_device(std::vector<float>(static_cast<size_t>(n_ff), std::nanf("")));
  DeviceBuffer dq = to_device(std::vector<uint8_t>(static_cast<size_t>(qbytes), 0xA5));
  a.n_tok = 1;
  a.y = dy.as<float>();
  a.ldy = 2 * n_ff;
  if (fused) a.glu_xq = dq.get(), a.glu_h = dh.as<float>(), a.glu_count = count;
  gemv(a);
  if (!fused) swiglu_q8(dy.as<float>(), 2 * n_ff, n_ff, 1, dh.as<float>(), n_ff, a.round, dq.get(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return {to_host<float>(dy, static_cast<size_t>(2 * n_ff)), to_host<float>(dh, static_cast<size_t>(n_ff)),
          to_host<uint8_t>(dq, static_cast<size_t>(qbytes))};
}

}  // namespace ft::cuda::tiled_test
