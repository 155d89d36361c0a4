// The CUDA kernels' copies of the CPU engine's ggml-rounded exp and silu (src/cuda/
// ops_math.cuh exp_v / silu, host-callable) against engine::exp_v / engine::silu
// (engine/vec_math.h), bit for bit, over the whole useful input range, the over- and
// underflow branches and special values. Runs without a GPU: both sides are IEEE
// operations in the same order, so the device results follow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/ops_math.cuh"
#include "engine/vec_math.h"

namespace ft {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> inputs() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 87.0f, 88.7f, 89.0f, -87.0f, -103.9f, -104.0f, -150.0f,
                          126.5f, -126.5f, 133.0f, -140.0f, 200.0f, -200.0f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(), 1e-30f, -1e-30f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-8.0f, 8.0f);
  for (int i = 0; i < 300000; ++i) v.push_back(wide(rng));
  for (int i = 0; i < 300000; ++i) v.push_back(narrow(rng));
  return v;
}

TEST(VecMathCudaTwin, ExpAndSiluBitIdentical) {
  int64_t bad_exp = 0, bad_silu = 0;
  for (const float x : inputs()) {
    const float e_cpu = engine::exp_v(x), e_gpu = cuda::ops::exp_v(x);
    if (bits(e_cpu) != bits(e_gpu) && !(std::isnan(e_cpu) && std::isnan(e_gpu)) && bad_exp++ < 5)
      ADD_FAILURE() << "exp_v(" << x << "): cpu " << e_cpu << " cuda twin " << e_gpu;
    const float s_cpu = engine::silu(x), s_gpu = cuda::ops::silu(x);
    if (bits(s_cpu) != bits(s_gpu) && !(std::isnan(s_cpu) && std::isnan(s_gpu)) && bad_silu++ < 5)
      ADD_FAILURE() << "silu(" << x << "): cpu " << s_cpu << " cuda twin " << s_gpu;
  }
  EXPECT_EQ(bad_exp, 0);
  EXPECT_EQ(bad_silu, 0);
}

}  // namespace
}  // namespace ft
