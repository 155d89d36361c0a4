// GPU RMSNorm (src/cuda/norm.h) against engine::rmsnorm, bit for bit: row lengths that do
// and do not allow float4 access, 1..17 rows, padded strides, with and without a weight,
// every activation rounding; and the fused residual add against add_rows + rmsnorm.
#include "cuda/norm.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/threadpool.h"
#include "cuda/act_q8.h"
#include "engine/norm.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

TEST(CudaOpsNorm, RmsnormMatchesCpu) {
  FT_OPS_REQUIRE_GPU();
  ThreadPool pool(1);
  const float eps = 1e-6f;
  for (const RoundCase& rc : kRounds)
    for (int64_t n : {1, 7, 64, 130, 2048, 4096})
      for (int64_t n_tok : {1, 3, 17})
        for (bool with_w : {true, false})
          for (int64_t pad : {0, 4, 1}) {
            SCOPED_TRACE(std::string(rc.name) + " n " + std::to_string(n) + " n_tok " + std::to_string(n_tok) +
                         " w " + std::to_string(with_w) + " pad " + std::to_string(pad));
            const int64_t ld = n + pad;
            const auto x = randn(static_cast<size_t>(n_tok * ld), static_cast<uint64_t>(n * 31 + n_tok), 3.0f);
            const auto w = randn(static_cast<size_t>(n), static_cast<uint64_t>(n), 1.0f);
            std::vector<float> want(x.size(), poison());
            engine::Exec ex{&pool, rc.cpu};
            engine::rmsnorm(ex, x.data(), ld, with_w ? w.data() : nullptr, n, eps, n_tok, want.data(), ld);
            DeviceBuffer dx = to_device(x), dw = to_device(w), dy = to_device(std::vector<float>(x.size(), poison()));
            rmsnorm(dx.as<float>(), ld, with_w ? dw.as<float>() : nullptr, n, eps, n_tok, dy.as<float>(), ld, rc.gpu,
                    nullptr);
            FT_CUDA_CHECK(cudaDeviceSynchronize());
            const Diff d = compare(to_host<float>(dy, x.size()), want, 0);
            ASSERT_EQ(d.bad, 0) << d.first_bad;
          }
}

TEST(CudaOpsNorm, InPlace) {
  FT_OPS_REQUIRE_GPU();
  ThreadPool pool(1);
  const int64_t n = 4096, n_tok = 2;
  const auto x = randn(static_cast<size_t>(n * n_tok), 5, 2.0f), w = randn(static_cast<size_t>(n), 6);
  std::vector<float> want(x.size());
  engine::rmsnorm(engine::Exec{&pool, engine::ActType::kBF16}, x.data(), n, w.data(), n, 1e-5f, n_tok, want.data(), n);
  DeviceBuffer dx = to_device(x), dw = to_device(w);
  rmsnorm(dx.as<float>(), n, dw.as<float>(), n, 1e-5f, n_tok, dx.as<float>(), n, Round::kBF16, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const Diff d = compare(to_host<float>(dx, x.size()), want, 0);
  EXPECT_EQ(d.bad, 0) << d.first_bad;
}

TEST(CudaOpsNorm, AddRmsnormMatchesAddRowsThenRmsnorm) {
  FT_OPS_REQUIRE_GPU();
  ThreadPool pool(1);
  for (const RoundCase& rc : kRounds)
    for (int64_t n : {64, 2050, 4096})
      for (int64_t n_tok : {1, 5}) {
        SCOPED_TRACE(std::string(rc.name) + " n " + std::to_string(n) + " n_tok " + std::to_string(n_tok));
        const auto x = randn(static_cast<size_t>(n * n_tok), 11, 2.0f), b = randn(static_cast<size_t>(n * n_tok), 12),
                   w = randn(static_cast<size_t>(n), 13);
        std::vector<float> sum(x.size()), want(x.size());
        for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + b[i];
        engine::rmsnorm(engine::Exec{&pool, rc.cpu}, sum.data(), n, w.data(), n, 1e-6f, n_tok, want.data(), n);
        DeviceBuffer dx = to_device(x), db = to_device(b), dw = to_device(w), dy(x.size() * 4);
        add_rmsnorm(dx.as<float>(), n, db.as<float>(), n, dw.as<float>(), n, 1e-6f, n_tok, dy.as<float>(), n, rc.gpu,
                    nullptr);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        const Diff dxs = compare(to_host<float>(dx, x.size()), sum, 0);
        EXPECT_EQ(dxs.bad, 0) << "residual: " << dxs.first_bad;
        const Diff dys = compare(to_host<float>(dy, x.size()), want, 0);
        EXPECT_EQ(dys.bad, 0) << "norm: " << dys.first_bad;
      }
}

// The register-resident decode kernel against the general one, bit for bit: y, the written-
// back residual (add) and the Q8 copy, over row lengths below, at and past its limits
// (8192 + 32 falls back), with and without weights, every rounding.
TEST(CudaOpsNorm, RegisterKernelEqualsGeneral) {
  FT_OPS_REQUIRE_GPU();
  for (const RoundCase& rc : kRounds)
    for (int64_t n : {32, 96, 1024, 2048, 2080, 4096, 5120, 8192, 8224})
      for (int64_t n_tok : {1, 3})
        for (int mode = 0; mode < 4; ++mode) {  // bit 0: add, bit 1: weights
          SCOPED_TRACE(std::string(rc.name) + " n " + std::to_string(n) + " n_tok " + std::to_string(n_tok) +
                       " mode " + std::to_string(mode));
          const bool add = mode & 1, weighted = mode & 2;
          const auto x = randn(static_cast<size_t>(n * n_tok), static_cast<uint64_t>(n + mode), 3.0f);
          const auto b = randn(x.size(), 77, 1.0f), w = randn(static_cast<size_t>(n), 78, 1.0f);
          const int64_t xq_bytes = act_q8_bytes(n, n_tok);
          std::vector<std::vector<float>> ys, xs;
          std::vector<std::vector<uint8_t>> qs;
          for (bool reg : {false, true}) {
            rmsnorm_set_register_path(reg);
            DeviceBuffer dx = to_device(x), db = to_device(b), dw = to_device(w),
                         dy = to_device(std::vector<float>(x.size(), poison())),
                         dq = to_device(std::vector<uint8_t>(static_cast<size_t>(xq_bytes), 0x5A));
            const float* wp = weighted ? dw.as<float>() : nullptr;
            if (add)
              add_rmsnorm(dx.as<float>(), n, db.as<float>(), n, wp, n, 1e-6f, n_tok, dy.as<float>(), n, rc.gpu,
                          nullptr);
            else
              rmsnorm_q8(dx.as<float>(), n, wp, n, 1e-6f, n_tok, dy.as<float>(), n, rc.gpu, dq.get(), nullptr);
            FT_CUDA_CHECK(cudaDeviceSynchronize());
            ys.push_back(to_host<float>(dy, x.size()));
            xs.push_back(to_host<float>(dx, x.size()));
            qs.push_back(to_host<uint8_t>(dq, static_cast<size_t>(xq_bytes)));
          }
          rmsnorm_set_register_path(true);
          EXPECT_EQ(compare(ys[1], ys[0], 0).bad, 0);
          EXPECT_EQ(compare(xs[1], xs[0], 0).bad, 0);
          EXPECT_EQ(qs[1], qs[0]);
          if (!add) {
            EXPECT_NE(qs[1], std::vector<uint8_t>(static_cast<size_t>(xq_bytes), 0x5A));
          }
        }
}

}  // namespace
}  // namespace ft::cuda
