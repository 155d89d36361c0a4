// The persistent NVFP4 mma GEMV (cuda/gemv_mma_persist.cu) against gemv_mma.cu's kernel forced
// at the same warps (its fold): every output bit for bit (memcmp), for every instance, over
// shapes with one tile, partial last tiles, more tiles than one resident wave (several tiles
// per group), the plan's routed shapes; and against the scalar twin gemv_q8_ref within the
// fp32-order bound the other GEMV tests use. Outputs are poisoned first; rows past the end must
// stay poisoned.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "compare_util.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "quant/dequant.h"

namespace ft::cuda {
namespace {

using compare_test::is_poison;
using compare_test::poison;

struct Problem {
  int64_t k = 0, rows = 0, rb = 0;
  std::vector<uint8_t> w, xq;
  std::vector<float> row_scale;
  DeviceBuffer dw, dxq, ds;
};

Problem make_problem(int64_t k, int64_t rows, std::mt19937& rng) {
  Problem pr;
  pr.k = k, pr.rows = rows, pr.rb = row_bytes(GgmlType::NVFP4, k);
  pr.w = quant::testing::random_rows(GgmlType::NVFP4, rows, k, rng);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
  pr.xq.resize(act_q8_bytes(k, 1));
  quantize_act_q8_row_ref(x.data(), k, pr.xq.data());
  pr.row_scale.resize(static_cast<size_t>(rows));
  for (auto& v : pr.row_scale) v = 0.5f + unit(rng) * 0.25f;
  pr.dw = to_device(pr.w), pr.dxq = to_device(pr.xq), pr.ds = to_device(pr.row_scale);
  return pr;
}

// One launch; y has rows + 5 entries, poisoned but for `init` when accumulating.
std::vector<float> run(const Problem& pr, bool row_scale, Round round, bool accumulate, const std::vector<float>& init) {
  DeviceBuffer dy = to_device(init);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.w = pr.dw.as<uint8_t>();
  g.row_bytes = pr.rb;
  g.k = pr.k;
  g.rows = pr.rows;
  g.xq = pr.dxq.get();
  g.n_tok = 1;
  g.y = dy.as<float>();
  g.ldy = pr.rows;
  g.row_scale = row_scale ? pr.ds.as<float>() : nullptr;
  g.scale = row_scale ? 0.75f : 1.0f;
  g.round = round;
  g.accumulate = accumulate;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  return to_host<float>(dy, init.size());
}

struct Inst {
  int fold, groups, stages;
};
const Inst kInstances[] = {{4, 1, 2}, {4, 1, 3}, {4, 2, 2}, {4, 2, 3}, {4, 2, 4}, {4, 4, 2}, {8, 1, 2},
                           {8, 1, 3}, {8, 1, 4}, {8, 1, 6}, {8, 2, 3}, {16, 1, 2}, {16, 1, 3}};

struct Variant {
  bool rs, acc;
  Round round;
  std::vector<float> init;  // y before the launch: poisoned, or a start when accumulating
};
Variant variant_of(const Problem& pr, int variant) {
  Variant v{variant % 2 == 1, variant % 3 == 2, variant % 4 == 3 ? Round::kBF16 : Round::kNone, {}};
  v.init.assign(static_cast<size_t>(pr.rows + 5), poison());
  if (v.acc)
    for (int64_t r = 0; r < pr.rows; ++r) v.init[static_cast<size_t>(r)] = 0.25f * static_cast<float>(r % 7) - 0.5f;
  return v;
}

// gemv_mma.cu's kernel forced at `warps` (the reference of the kernels below).
std::vector<float> run_mma(const Problem& pr, const Variant& v, int warps) {
  gemv_set_nvfp4_override(3, 0, 0);
  gemv_set_nvfp4_mma(warps, 2);
  const int64_t mma0 = gemv_nvfp4_mma_launches();
  auto want = run(pr, v.rs, v.round, v.acc, v.init);
  EXPECT_EQ(gemv_nvfp4_mma_launches(), mma0 + 1) << "the mma kernel did not run";
  gemv_set_nvfp4_override(-1, 0, 0);
  gemv_set_nvfp4_mma(0, 0);
  return want;
}

// Every row written, none past the end; against the mma kernel's want (nullptr: a kernel of
// another fp32 order, none): memcmp; against the scalar twin (twin): the fp32 bound.
void verify(const Problem& pr, const Variant& v, const std::vector<float>& got, const std::vector<float>* want_p,
            bool twin) {
  for (int64_t r = pr.rows; r < pr.rows + 5; ++r) ASSERT_TRUE(is_poison(got[static_cast<size_t>(r)])) << "wrote row " << r;
  for (int64_t r = 0; r < pr.rows; ++r) ASSERT_FALSE(is_poison(got[static_cast<size_t>(r)])) << "row " << r << " not written";
  if (want_p != nullptr && std::memcmp(got.data(), want_p->data(), got.size() * sizeof(float)) != 0) {
    const std::vector<float>& want = *want_p;
    int64_t r = 0;
    while (std::memcmp(&got[static_cast<size_t>(r)], &want[static_cast<size_t>(r)], 4) == 0) ++r;
    FAIL() << "differs from the mma kernel: row " << r << " got " << got[static_cast<size_t>(r)] << " want "
           << want[static_cast<size_t>(r)];
  }
  if (!twin) return;
  const bool rs = v.rs, acc = v.acc;
  const Round round = v.round;
  std::vector<float> ref = v.init;
  gemv_q8_ref(GgmlType::NVFP4, pr.w.data(), pr.rb, pr.k, pr.rows, pr.xq.data(), 1, ref.data(), pr.rows,
              rs ? pr.row_scale.data() : nullptr, rs ? 0.75f : 1.0f, round, acc);
  for (int64_t r = 0; r < pr.rows; ++r) {
    const float g = got[static_cast<size_t>(r)], w = ref[static_cast<size_t>(r)];
    if (g == w) continue;
    double mag = 0;  // sum |w_i x_i| of the row: the fp32 reassociation bound
    const uint8_t* row = pr.w.data() + r * pr.rb;
    std::vector<float> wd(static_cast<size_t>(pr.k));
    quant::dequantize_row_ref(GgmlType::NVFP4, row, wd.data(), pr.k);
    for (int64_t i = 0; i < pr.k; ++i) mag += std::fabs(wd[static_cast<size_t>(i)] * act_q8_value(pr.xq.data(), pr.k, i));
    const double s = rs ? 0.75 * pr.row_scale[static_cast<size_t>(r)] : 1.0;
    const double ulp = round == Round::kBF16 ? 1.0 / 128 : 0.0;
    ASSERT_LE(std::fabs(static_cast<double>(g) - w), 1e-5 * mag * s + ulp * std::fabs(w) + (acc ? 2.4e-7 * std::fabs(w) : 0.0) + 1e-30)
        << "vs twin: row " << r << " got " << g << " want " << w;
  }
}

// Persistent instance vs the mma kernel at warps = fold: memcmp; vs the twin: the fp32 bound.
void check_instance(const Problem& pr, const Inst& in, int variant, bool twin) {
  SCOPED_TRACE("fold " + std::to_string(in.fold) + " groups " + std::to_string(in.groups) + " stages " +
               std::to_string(in.stages) + " k " + std::to_string(pr.k) + " rows " + std::to_string(pr.rows) +
               " variant " + std::to_string(variant));
  const Variant v = variant_of(pr, variant);
  const auto want = run_mma(pr, v, in.fold);
  gemv_set_nvfp4_override(4, 0, 0);
  gemv_set_nvfp4_mma(in.fold, 2);  // the persistent kernel's fold is the mma warps
  gemv_set_nvfp4_persist(in.groups, in.stages);
  const int64_t p0 = gemv_nvfp4_persist_launches();
  const auto got = run(pr, v.rs, v.round, v.acc, v.init);
  gemv_set_nvfp4_override(-1, 0, 0);
  gemv_set_nvfp4_mma(0, 0);
  gemv_set_nvfp4_persist(0, 0);
  ASSERT_EQ(gemv_nvfp4_persist_launches(), p0 + 1) << "the persistent kernel did not run";
  verify(pr, v, got, &want, twin);
}

TEST(CudaGemvPersist, EqualsMmaKernelBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(1313);
  // k: one step, 3 steps (warps without steps at fold 4+), 9 steps, Llama-8B's 16 and 56.
  // rows: one whole tile, odd counts (a partial last tile, read as the last 16 rows).
  struct Shape {
    int64_t k, rows;
  };
  int variant = 0;
  for (const Shape sh : {Shape{256, 16}, Shape{768, 17}, Shape{2304, 45}, Shape{4096, 333}, Shape{14336, 70}}) {
    const Problem pr = make_problem(sh.k, sh.rows, rng);
    for (const Inst& in : kInstances) {
      check_instance(pr, in, variant++, true);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(CudaGemvPersist, ManyTilesPerGroup) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(4242);
  // More tiles than one resident wave of groups on any GPU we run (40001 rows = 2501 tiles, the
  // last of one row; k 256 keeps the CTAs small, so many are resident), and a routed shape.
  const Problem many = make_problem(256, 40001, rng);
  int variant = 0;
  for (const Inst& in : kInstances) {
    check_instance(many, in, variant++, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const Problem routed = make_problem(2048, 4230, rng);
  for (const Inst& in : {Inst{4, 1, 2}, Inst{4, 2, 3}, Inst{8, 1, 3}}) {
    check_instance(routed, in, variant++, true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaGemvPersist, PlanRoutesAndSwitches) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(77);
  // The plan's persistent routes run it (or, where the plan leaves it off, the others).
  const Problem pr = make_problem(2048, 4230, rng);
  const GemvNvfp4Plan pl = gemv_nvfp4_plan(4230, 2048, 1, 1, 1, false);
  const int64_t p0 = gemv_nvfp4_persist_launches(), m0 = gemv_nvfp4_mma_launches(), t0 = gemv_nvfp4_tma_launches();
  std::vector<float> init(static_cast<size_t>(pr.rows + 5), poison());
  (void)run(pr, false, Round::kNone, false, init);
  const bool tma = pl.tma && bulk_copy_supported();
  EXPECT_EQ(gemv_nvfp4_persist_launches(), p0 + (pl.persist ? 1 : 0));
  EXPECT_EQ(gemv_nvfp4_tma_launches(), t0 + (tma ? 1 : 0));
  EXPECT_EQ(gemv_nvfp4_mma_launches(), m0 + (!pl.persist && !tma && pl.kernel == 3 ? 1 : 0));
  // Declined shapes (k % 256 != 0; fewer rows than a tile) fall back to the other kernels when
  // forced, and still write every row.
  gemv_set_nvfp4_override(4, 0, 0);
  struct Shape {
    int64_t k, rows;
  };
  for (const Shape sh : {Shape{320, 33}, Shape{256, 15}}) {
    const Problem odd = make_problem(sh.k, sh.rows, rng);
    const int64_t p1 = gemv_nvfp4_persist_launches();
    const auto y2 = run(odd, false, Round::kNone, false, std::vector<float>(static_cast<size_t>(sh.rows + 5), poison()));
    EXPECT_EQ(gemv_nvfp4_persist_launches(), p1) << "k " << sh.k << " rows " << sh.rows;
    for (int64_t r = 0; r < sh.rows; ++r) EXPECT_FALSE(is_poison(y2[static_cast<size_t>(r)]));
    EXPECT_TRUE(is_poison(y2[static_cast<size_t>(sh.rows)]));
  }
  gemv_set_nvfp4_override(-1, 0, 0);
}

// The warp-fed bulk-copy kernel (gemv_mma_tma.cu) at warps / chunk / stages: its own fp32 order,
// so against the twin within the fp32 bound (no bitwise reference), and the same bits launch
// after launch.
void check_tma(const Problem& pr, int warps, int chunk, int stages, int variant) {
  SCOPED_TRACE("tma warps " + std::to_string(warps) + " chunk " + std::to_string(chunk) + " stages " +
               std::to_string(stages) + " k " + std::to_string(pr.k) + " rows " + std::to_string(pr.rows) +
               " variant " + std::to_string(variant));
  const Variant v = variant_of(pr, variant);
  gemv_set_nvfp4_tma(2, warps, chunk, stages);
  const int64_t t0 = gemv_nvfp4_tma_launches();
  const auto got = run(pr, v.rs, v.round, v.acc, v.init);
  const auto again = run(pr, v.rs, v.round, v.acc, v.init);
  gemv_set_nvfp4_tma(0, 0, 0, 0);
  ASSERT_EQ(gemv_nvfp4_tma_launches(), t0 + 2) << "the tma kernel did not run";
  ASSERT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0) << "not deterministic";
  verify(pr, v, got, nullptr, true);
}

// k of one step (warps without steps) to 56 (partial last chunks), a partial last tile, more
// tiles than one wave, every instance.
TEST(CudaGemvTma, MatchesTwin) {
  FT_REQUIRE_GPU();
  if (!bulk_copy_supported()) GTEST_SKIP() << "bulk copies need sm_90";
  std::mt19937 rng(1301);
  struct Shape {
    int64_t k, rows;
  };
  int variant = 0;
  for (const Shape sh : {Shape{256, 16}, Shape{2048, 77}, Shape{2304, 45}, Shape{4096, 333}, Shape{14336, 70},
                         Shape{4096, 4230}}) {
    const Problem pr = make_problem(sh.k, sh.rows, rng);
    for (int warps : {4, 8})
      for (int chunk : {2, 4, 8})
        for (int stages : {1, 2}) {
          if (warps * chunk * stages == 128) continue;  // 299 KB of chunks: never fits
          check_tma(pr, warps, chunk, stages, variant++);
          if (::testing::Test::HasFatalFailure()) return;
        }
  }
}

TEST(CudaGemvTma, SwitchRoutes) {
  FT_REQUIRE_GPU();
  if (!bulk_copy_supported()) GTEST_SKIP() << "bulk copies need sm_90";
  std::mt19937 rng(98);
  const Problem pr = make_problem(4096, 6144, rng), slab = make_problem(4096, 1024, rng);
  const std::vector<float> init(static_cast<size_t>(6144 + 5), poison());
  // Mode 1 takes the plan's mma launches only, mode 2 also the slab kernel's, -1 none (k 4096:
  // mode 0, the plan, none either; its k 2048 route: PlanRoutesAndSwitches).
  for (int mode : {-1, 0, 1, 2}) {
    gemv_set_nvfp4_tma(mode, 0, 0, 0);
    const int64_t t0 = gemv_nvfp4_tma_launches();
    (void)run(pr, false, Round::kNone, false, init);
    (void)run(slab, false, Round::kNone, false, std::vector<float>(1024 + 5, poison()));
    EXPECT_EQ(gemv_nvfp4_tma_launches(), t0 + (mode <= 0 ? 0 : mode == 1 ? 1 : 2)) << "mode " << mode;
  }
  gemv_set_nvfp4_tma(0, 0, 0, 0);
}

}  // namespace
}  // namespace ft::cuda
