// GPU argmax and sampler (src/cuda/sample.h) against engine::argmax and engine::Sampler:
// argmax over vocab sizes and exact ties (first index wins); sampling over many seeds and
// parameter sets (the default chain, top-k off with top-p, pure temperature over the whole
// vocabulary, top-k 1, min-p only, greedy, repetition penalty over a multi-step history,
// tied logits), the GPU given the draw r the CPU sampler makes with the same seed. Tokens
// must be identical.
#include "cuda/sample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "ops_test_util.h"

namespace ft::cuda {
namespace {

using namespace ops_test;

// With scratch (the split kernel where n_vocab % 4 == 0 and rows are aligned: 151936, 262144,
// 4100 without padding) twice on the same scratch, which every call must leave zeroed; row 4 of
// the split sizes mixes -0 / +0 ties and NaNs (lost to everything but at index 0: the CPU's).
TEST(CudaOpsSample, ArgmaxMatchesCpuWithTies) {
  FT_OPS_REQUIRE_GPU();
  std::mt19937 rng(5);
  DeviceBuffer scratch(argmax_scratch_bytes(5));
  FT_CUDA_CHECK(cudaMemset(scratch.get(), 0, scratch.bytes()));
  for (int64_t n_vocab : {1, 3, 1000, 4100, 32003, 151936, 262144})
    for (int64_t pad : {0, 1})
      for (int mode = 0; mode < 3; ++mode) {  // no scratch, scratch, scratch again
      const int64_t n_rows = 5, ld = n_vocab + pad;
      std::vector<float> l(static_cast<size_t>(n_rows * ld));
      std::uniform_int_distribution<int> small(-3, 3);
      for (auto& v : l) v = static_cast<float>(small(rng));  // the max is tied many times
      // Row 1: one late maximum; row 2: all -inf (the CPU answers 0); row 3: random normal.
      for (int64_t i = 0; i < n_vocab; ++i) {
        l[static_cast<size_t>(1 * ld + i)] = 0.0f;
        l[static_cast<size_t>(2 * ld + i)] = -INFINITY;
      }
      l[static_cast<size_t>(1 * ld + n_vocab - 1)] = 1.0f;
      const auto rn = randn(static_cast<size_t>(n_vocab), 9);
      for (int64_t i = 0; i < n_vocab; ++i) l[static_cast<size_t>(3 * ld + i)] = rn[static_cast<size_t>(i)];
      if (n_vocab > 4096) {
        float* r4 = l.data() + 4 * ld;
        for (int64_t i = 0; i < n_vocab; ++i) r4[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : -1.0f;
        r4[n_vocab / 2] = NAN, r4[n_vocab - 1] = NAN;
        if (mode == 2 && pad == 0) r4[0] = NAN;  // the CPU's answer: 0 (the split kernel only)
      }
      DeviceBuffer dl = to_device(l), dout(static_cast<size_t>(n_rows) * 4);
      argmax(dl.as<float>(), ld, n_vocab, n_rows, dout.as<int32_t>(), nullptr, mode > 0 ? scratch.get() : nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = to_host<int32_t>(dout, static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r)
        EXPECT_EQ(got[static_cast<size_t>(r)], engine::argmax(l.data() + r * ld, static_cast<int32_t>(n_vocab)))
            << "n_vocab " << n_vocab << " pad " << pad << " row " << r << " mode " << mode;
    }
  const auto left = to_host<uint8_t>(scratch, scratch.bytes());
  for (uint8_t b : left) ASSERT_EQ(b, 0) << "the split argmax left its scratch dirty";
}

struct SampleCase {
  const char* name;
  engine::SamplerParams p;
  int64_t n_vocab;
  int seeds, steps;
  bool ties;
};

engine::SamplerParams params(float temp, int top_k, float top_p, float min_p, float pen = 1.0f, int last_n = 64) {
  engine::SamplerParams p;
  p.temperature = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.repeat_penalty = pen,
  p.repeat_last_n = last_n;
  return p;
}

void check(const SampleCase& c) {
  SCOPED_TRACE(std::string(c.name) + " n_vocab " + std::to_string(c.n_vocab));
  DeviceBuffer ws(sample_workspace_bytes(c.n_vocab)), dl(static_cast<size_t>(c.n_vocab) * 4), du(8), dout(4),
      dhist(4 * 64);
  int mismatches = 0, steps = 0;
  std::mt19937 lrng(static_cast<unsigned>(c.n_vocab));
  for (int seed = 0; seed < c.seeds; ++seed) {
    engine::SamplerParams p = c.p;
    p.seed = static_cast<uint64_t>(seed) * 7919 + 1;
    engine::Sampler cpu(p);
    std::mt19937_64 twin(p.seed);  // the host draw the GPU is given: the CPU sampler's r
    std::vector<int32_t> history;
    for (int step = 0; step < c.steps; ++step) {
      std::vector<float> l(static_cast<size_t>(c.n_vocab));
      std::normal_distribution<float> nd(0.0f, 2.5f);
      std::uniform_int_distribution<int> small(0, 4);
      for (auto& v : l) v = c.ties ? static_cast<float>(small(lrng)) : nd(lrng);
      // Penalised tokens get large logits so the penalty matters.
      for (int32_t t : history) l[static_cast<size_t>(t)] += 4.0f;
      const int32_t want = cpu.sample(l.data(), static_cast<int32_t>(c.n_vocab));
      const double r = p.temperature > 0.0f ? sample_draw(twin) : 0.0;

      dl.upload(l.data(), l.size() * 4);
      du.upload(&r, 8);
      SampleParams g;
      g.temperature = p.temperature, g.top_k = p.top_k, g.top_p = p.top_p, g.min_p = p.min_p,
      g.repeat_penalty = p.repeat_penalty;
      if (!history.empty()) dhist.upload(history.data(), history.size() * 4);
      g.penalty_tokens = dhist.as<int32_t>();
      g.n_penalty = static_cast<int32_t>(history.size());
      sample(dl.as<float>(), c.n_vocab, g, du.as<double>(), dout.as<int32_t>(), ws.get(), nullptr);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const int32_t got = to_host<int32_t>(dout, 1)[0];
      if (got != want && mismatches++ < 5)
        ADD_FAILURE() << "seed " << seed << " step " << step << ": gpu " << got << " cpu " << want << " r " << r;
      ++steps;

      cpu.accept(want);
      history.push_back(want);
      if (static_cast<int>(history.size()) > p.repeat_last_n) history.erase(history.begin());
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << steps << " draws";
}

TEST(CudaOpsSample, MatchesCpuSamplerOverSeeds) {
  FT_OPS_REQUIRE_GPU();
  const SampleCase cases[] = {
      {"default chain", params(0.8f, 40, 0.95f, 0.05f), 32000, 200, 1, false},
      {"default chain, big vocab", params(0.8f, 40, 0.95f, 0.05f), 151936, 30, 1, false},
      {"top-k off, top-p 0.9", params(1.0f, 0, 0.9f, 0.0f), 32000, 100, 1, false},
      {"pure temperature, whole vocab", params(1.3f, 0, 1.0f, 0.0f), 50000, 100, 1, false},
      {"top-k 1", params(0.7f, 1, 0.95f, 0.05f), 1000, 50, 1, false},
      {"top-k >= vocab, min-p only", params(0.9f, 5000, 1.0f, 0.1f), 1000, 100, 1, false},
      {"greedy", params(0.0f, 40, 0.95f, 0.05f), 32000, 20, 1, false},
      {"greedy with penalty", params(0.0f, 40, 0.95f, 0.05f, 1.5f, 8), 4000, 5, 20, false},
      {"penalty, multi-step", params(0.8f, 40, 0.95f, 0.05f, 1.3f, 16), 4000, 10, 30, false},
      {"tied logits", params(1.0f, 20, 0.8f, 0.02f), 3000, 100, 1, true},
      {"tied logits, whole vocab", params(1.0f, 0, 1.0f, 0.0f), 3000, 100, 1, true},
      {"tiny vocab", params(0.8f, 40, 0.95f, 0.05f), 3, 50, 1, false},
  };
  for (const SampleCase& c : cases) check(c);
}

}  // namespace
}  // namespace ft::cuda
