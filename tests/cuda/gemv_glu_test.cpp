// GemvArgs::glu_* (cuda/gemv.h): the fused gate | up GEMV that also writes the SwiGLU and its Q8
// copy in the same launch gives the bytes of the GEMV followed by cuda::swiglu_q8 -- y, h and the
// Q8 row -- where the tensor-core kernel takes the shape (the tail in its epilogue) and where it
// does not (the fallback launch); twice in a row (the tickets re-arm), and the tickets are left
// at zero. Bad arguments are refused with a message.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "compare_util.h"
#include "core/error.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/gemv_tuning.h"
#include "cuda/glu.h"
#include "quant/matmul.h"

namespace ft::cuda {
namespace {

using compare_test::poison;

struct Out {
  std::vector<float> y, h;
  std::vector<uint8_t> xq;
};

// n_ff gate rows then n_ff up rows of k NVFP4 weights, one token; tail: through glu_*, else the
// GEMV and swiglu_q8. Runs the call `reps` times on the same buffers.
Out run(const DeviceBuffer& dw, int64_t rb, const DeviceBuffer& dxq, int64_t k, int64_t n_ff, Round round, bool tail,
        int reps, DeviceBuffer& ticket) {
  const size_t hq = act_q8_bytes(n_ff, 1);
  DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(2 * n_ff), poison()));
  DeviceBuffer dh = to_device(std::vector<float>(static_cast<size_t>(n_ff), poison()));
  DeviceBuffer dq = to_device(std::vector<uint8_t>(hq, 0xA5));
  for (int rep = 0; rep < reps; ++rep) {
    GemvArgs g;
    g.type = GgmlType::NVFP4;
    g.w = dw.as<uint8_t>();
    g.row_bytes = rb;
    g.k = k;
    g.rows = 2 * n_ff;
    g.xq = dxq.get();
    g.y = dy.as<float>();
    g.ldy = 2 * n_ff;
    g.round = round;
    if (tail) {
      g.glu_h = dh.as<float>();
      g.glu_xq = dq.get();
      g.glu_ticket = ticket.as<unsigned>();
      g.glu_n_ff = n_ff;
      gemv(g);
    } else {
      gemv(g);
      swiglu_q8(dy.as<float>(), 2 * n_ff, n_ff, 1, dh.as<float>(), n_ff, round, dq.get(), nullptr);
    }
  }
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return {to_host<float>(dy, static_cast<size_t>(2 * n_ff)), to_host<float>(dh, static_cast<size_t>(n_ff)),
          to_host<uint8_t>(dq, hq)};
}

TEST(CudaGemvGlu, TailEqualsGemvThenSwiglu) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  struct Shape {
    int64_t n_ff, k;
    bool mma;  // the tensor-core kernel takes it (rows >= kNvfp4MmaMinRows, k > kNvfp4TmaMaxK)
  };
  // Llama-8B's gate | up is 2 x 14336 at k 4096; the fallback: the bulk-copy kernel (k 2048), the
  // slab kernel (few rows).
  const Shape shapes[] = {{2304, 4096, true}, {2112, 8192, true}, {2304, 2048, false}, {96, 512, false},
                          {1024, 256, false}};
  for (const Shape sh : shapes) {
    for (const Round round : {Round::kNone, Round::kBF16}) {
      SCOPED_TRACE("n_ff " + std::to_string(sh.n_ff) + " k " + std::to_string(sh.k) +
                   (round == Round::kNone ? " fp32" : " bf16"));
      const int64_t rb = row_bytes(GgmlType::NVFP4, sh.k), rows = 2 * sh.n_ff;
      std::vector<uint8_t> w(static_cast<size_t>(rb * rows));
      for (int64_t r = 0; r < rows; ++r) {
        const auto row = quant::testing::random_row(GgmlType::NVFP4, sh.k, rng);
        std::copy(row.begin(), row.end(), w.begin() + r * rb);
      }
      std::vector<float> x(static_cast<size_t>(sh.k));
      for (auto& v : x) v = unit(rng);
      std::vector<uint8_t> xq(act_q8_bytes(sh.k, 1));
      quantize_act_q8_row_ref(x.data(), sh.k, xq.data());
      DeviceBuffer dw = to_device(w), dxq = to_device(xq);
      DeviceBuffer ticket = to_device(std::vector<unsigned>(static_cast<size_t>(sh.n_ff / 32), 0u));
      const int64_t mma0 = gemv_nvfp4_mma_launches();
      const Out want = run(dw, rb, dxq, sh.k, sh.n_ff, round, false, 1, ticket);
      const int64_t mma1 = gemv_nvfp4_mma_launches();
      const Out got = run(dw, rb, dxq, sh.k, sh.n_ff, round, true, 2, ticket);
      EXPECT_EQ(mma1 > mma0, sh.mma) << "the shape did not take the kernel the test means";
      EXPECT_EQ(std::memcmp(want.y.data(), got.y.data(), want.y.size() * sizeof(float)), 0) << "gate | up rows";
      EXPECT_EQ(std::memcmp(want.h.data(), got.h.data(), want.h.size() * sizeof(float)), 0) << "SwiGLU";
      EXPECT_EQ(want.xq, got.xq) << "Q8 copy";
      bool varied = false;
      for (int64_t j = 1; j < sh.n_ff; ++j) varied |= want.h[static_cast<size_t>(j)] != want.h[0];
      EXPECT_TRUE(varied) << "a constant SwiGLU proves nothing";
      const auto t = to_host<unsigned>(ticket, static_cast<size_t>(sh.n_ff / 32));
      for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(t[i], 0u) << "ticket " << i << " not re-armed";
    }
  }
}

TEST(CudaGemvGlu, RefusesBadShapes) {
  FT_REQUIRE_GPU();
  DeviceBuffer w(1 << 16), xq(1 << 12), y(1 << 14), h(1 << 12), q(1 << 12), ticket(64);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = w.as<uint8_t>();
  g.k = 256;
  g.row_bytes = row_bytes(GgmlType::NVFP4, 256);
  g.rows = 128;
  g.xq = xq.get();
  g.y = y.as<float>();
  g.ldy = 128;
  g.glu_h = h.as<float>();
  g.glu_xq = q.get();
  g.glu_ticket = ticket.as<unsigned>();
  g.glu_n_ff = 48;  // not a multiple of 32, and rows != 2 * n_ff
  try {
    gemv(g);
    FAIL() << "accepted n_ff 48";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SwiGLU tail"), std::string::npos) << e.what();
  }
  g.glu_n_ff = 64;
  g.n_tok = 2;
  EXPECT_THROW(gemv(g), Error);
}

}  // namespace
}  // namespace ft::cuda
