// The Q8 tails of rmsnorm_q8 and swiglu_q8 (cuda/q8_tail.cuh) write exactly the bytes that
// quantize_act_q8 writes from the same outputs, and the outputs themselves equal the plain
// kernels' (the tail only reads them).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/act_q8.h"
#include "cuda/glu.h"
#include "cuda/norm.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

std::vector<uint8_t> bytes_of(const DeviceBuffer& b, size_t n) {
  std::vector<uint8_t> v(n);
  FT_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n, cudaMemcpyDeviceToHost));
  return v;
}

TEST(CudaQ8Tail, RmsnormQ8EqualsRmsnormThenQuantize) {
  FT_OPS_REQUIRE_GPU();
  for (const RoundCase& rc : kRounds)
    for (int64_t n : {32, 2048, 4096 + 32})
      for (int64_t n_tok : {1, 3, 8}) {
        SCOPED_TRACE(std::string(rc.name) + " n " + std::to_string(n) + " n_tok " + std::to_string(n_tok));
        const auto x = randn(static_cast<size_t>(n * n_tok), static_cast<uint64_t>(n + n_tok), 3.0f);
        const auto w = randn(static_cast<size_t>(n), 7);
        DeviceBuffer dx = to_device(x), dw = to_device(w);
        DeviceBuffer y1 = to_device(std::vector<float>(x.size(), poison()));
        DeviceBuffer y2 = to_device(std::vector<float>(x.size(), poison()));
        const size_t qb = act_q8_bytes(n, n_tok);
        DeviceBuffer q1(qb), q2(qb);
        FT_CUDA_CHECK(cudaMemset(q1.get(), 0xAB, qb));
        FT_CUDA_CHECK(cudaMemset(q2.get(), 0xAB, qb));
        rmsnorm(dx.as<float>(), n, dw.as<float>(), n, 1e-6f, n_tok, y1.as<float>(), n, rc.gpu, nullptr);
        quantize_act_q8(y1.as<float>(), n, n, n_tok, q1.get(), nullptr);
        rmsnorm_q8(dx.as<float>(), n, dw.as<float>(), n, 1e-6f, n_tok, y2.as<float>(), n, rc.gpu, q2.get(), nullptr);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        const auto a = to_host<float>(y1, x.size()), b = to_host<float>(y2, x.size());
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "normed rows differ";
        ASSERT_EQ(bytes_of(q1, qb), bytes_of(q2, qb)) << "Q8 bytes differ";
      }
}

TEST(CudaQ8Tail, SwigluQ8EqualsSwigluThenQuantize) {
  FT_OPS_REQUIRE_GPU();
  for (const RoundCase& rc : kRounds)
    for (int64_t n_ff : {32, 768, 1024 + 96, 14336})
      for (int64_t n_tok : {1, 8}) {
        SCOPED_TRACE(std::string(rc.name) + " n_ff " + std::to_string(n_ff) + " n_tok " + std::to_string(n_tok));
        const auto gu = randn(static_cast<size_t>(2 * n_ff * n_tok), static_cast<uint64_t>(n_ff), 4.0f);
        DeviceBuffer dgu = to_device(gu);
        DeviceBuffer h1 = to_device(std::vector<float>(static_cast<size_t>(n_ff * n_tok), poison()));
        DeviceBuffer h2 = to_device(std::vector<float>(static_cast<size_t>(n_ff * n_tok), poison()));
        const size_t qb = act_q8_bytes(n_ff, n_tok);
        DeviceBuffer q1(qb), q2(qb);
        FT_CUDA_CHECK(cudaMemset(q1.get(), 0xAB, qb));
        FT_CUDA_CHECK(cudaMemset(q2.get(), 0xAB, qb));
        swiglu(dgu.as<float>(), 2 * n_ff, n_ff, n_tok, h1.as<float>(), n_ff, rc.gpu, nullptr);
        quantize_act_q8(h1.as<float>(), n_ff, n_ff, n_tok, q1.get(), nullptr);
        swiglu_q8(dgu.as<float>(), 2 * n_ff, n_ff, n_tok, h2.as<float>(), n_ff, rc.gpu, q2.get(), nullptr);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        const auto a = to_host<float>(h1, static_cast<size_t>(n_ff * n_tok));
        const auto b = to_host<float>(h2, static_cast<size_t>(n_ff * n_tok));
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "GLU rows differ";
        ASSERT_EQ(bytes_of(q1, qb), bytes_of(q2, qb)) << "Q8 bytes differ";
      }
}

}  // namespace
}  // namespace ft::cuda
