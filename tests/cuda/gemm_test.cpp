// CUDA prefill GEMM (src/cuda/gemm.h) against its CPU twin quant::matmul_ref: every weight
// type x operand precision x dense route (dequant + cuBLAS, fused tensor-core kernel) over
// scale modes, output roundings and accumulate, rows that are no multiple of a tile and
// token counts 1, 3, 17, 300; workspace-bound row/token chunking; moe_sort against a stable
// host sort; the grouped MoE GEMM (gate/up through `order`, down in sorted order) against
// per-slot matmul_ref, with experts that get no tokens. Outputs are poisoned first; what
// must not be written must stay poisoned.
//
// Tolerances. With S1 = sum_k |w x| and S2 = sqrt(sum_k (w x)^2), scaled by |s| (the
// combined scale of the output):
//   kF32   2e-5 S1: exact products, fp32 sums in another order (k <= 2304 here);
//   kBF16  min(8e-3 S1, 0.03 S2): W and X each rounded to bf16 (relative error <= 2^-9, so
//          <= 2^-8 per product: the worst case 2^-8 S1), and the rounding errors are random,
//          so the sum's error grows like S2: a CPU emulation of the operand rounding over
//          40,000 random rows of every type stays below 0.33 of 0.03 S2. S2 keeps the test
//          sharp: one wrongly decoded weight (an error of one typical |w x|, S2 / sqrt(k))
//          exceeds it;
//   kF16   min(2e-3 S1, 0.0075 S2) on the same grounds with 2^-11 per operand (the emulation
//          stays below 0.18), plus 1e-7 S1 for f16 subnormals;
// plus one unit in the last place of the rounded output (bf16 2^-7, f16 2^-10 relative).
#include "cuda/gemm.h"
#include "cuda/gemm_tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "core/error.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/dequant.h"
#include "cuda/device.h"
#include "quant/dequant.h"
#include "quant/matmul.h"

namespace ft::cuda {
namespace {

#define FT_REQUIRE_GPU()                                        \
  do {                                                          \
    if (!has_device()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

constexpr uint32_t kPoison = 0x7FC0BEEFu;

bool is_poison(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b == kPoison;
}
float poison() {
  float v;
  std::memcpy(&v, &kPoison, 4);
  return v;
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,  GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4};

const char* prec_name(GemmPrec p) { return p == GemmPrec::kF32 ? "f32" : p == GemmPrec::kBF16 ? "bf16" : "f16"; }

quant::Round to_cpu(Round r) {
  return r == Round::kBF16 ? quant::Round::kBF16 : r == Round::kF16 ? quant::Round::kF16 : quant::Round::kNone;
}

struct ErrScale {
  double s1 = 0, s2 = 0;  // sum |w x|, sqrt(sum (w x)^2)
};

ErrScale err_scale(const float* w, const float* x, int64_t k, double s) {
  ErrScale e;
  double sq = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double t = static_cast<double>(w[i]) * x[i];
    e.s1 += std::fabs(t);
    sq += t * t;
  }
  e.s1 *= std::fabs(s);
  e.s2 = std::sqrt(sq) * std::fabs(s);
  return e;
}

double tolerance(GemmPrec p, Round round, const ErrScale& e, float ref, float y0) {
  double t = 0;
  switch (p) {
    case GemmPrec::kF32:
    case GemmPrec::kBF16x2:  // split precisions: gemm_split_test.cpp holds them to tighter bounds
    case GemmPrec::kBF16x3: t = 2e-5 * e.s1; break;
    case GemmPrec::kBF16: t = std::min(8e-3 * e.s1, 0.03 * e.s2); break;
    case GemmPrec::kF16: t = std::min(2e-3 * e.s1, 0.0075 * e.s2) + 1e-7 * e.s1; break;
  }
  // One unit in the last place of the rounded result (values straddling a rounding midpoint).
  const double ulp = round == Round::kBF16 ? 1.0 / 128 : round == Round::kF16 ? 1.0 / 1024 : 0.0;
  return t + ulp * std::fabs(static_cast<double>(ref)) + (round == Round::kF16 ? std::ldexp(1.0, -24) : 0.0) +
         2e-7 * std::fabs(static_cast<double>(y0)) + 1e-30;
}

// k per type: a few blocks, not a multiple of the 64-element tiles where the type allows.
int64_t k_for(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q6_K: return 768;
    case GgmlType::NVFP4: return 320;
    default: return 352;
  }
}

struct Weights {
  int64_t k, rows, rb;
  std::vector<uint8_t> raw;
  std::vector<float> deq;  // rows x k, for the tolerance
};

Weights random_weights(GgmlType t, int64_t k, int64_t rows, std::mt19937& rng) {
  Weights w{k, rows, row_bytes(t, k), {}, {}};
  w.raw.resize(static_cast<size_t>(w.rb * rows));
  w.deq.resize(static_cast<size_t>(k * rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = quant::testing::random_row(t, k, rng);
    std::copy(row.begin(), row.end(), w.raw.begin() + r * w.rb);
    quant::dequantize_row_ref(t, row.data(), w.deq.data() + r * k, k);
  }
  return w;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = unit(rng);
  return v;
}

struct DenseCase {
  GgmlType type;
  GemmPrec prec;
  GemmRoute route;
  int64_t rows, n_tok;
  int scale_mode;  // bit 0 scalar, bit 1 per-row
  Round round;
  bool accumulate;
};

std::string describe(const DenseCase& c) {
  return std::string(type_name(c.type)) + " prec=" + prec_name(c.prec) +
         " route=" + (c.route == GemmRoute::kFused ? "fused" : c.route == GemmRoute::kAuto ? "auto" : "cublas") + " rows=" + std::to_string(c.rows) +
         " n_tok=" + std::to_string(c.n_tok) + " scale=" + std::to_string(c.scale_mode) +
         " round=" + std::to_string(static_cast<int>(c.round)) + " acc=" + std::to_string(c.accumulate);
}

void check_dense(Gemm& gemm, const DenseCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t k = k_for(c.type);
  const Weights w = random_weights(c.type, k, c.rows, rng);
  const int64_t ldx = k + 4, ldy = c.rows + 5;
  const auto x = random_floats(static_cast<size_t>(ldx * c.n_tok), rng);
  std::vector<float> row_scale(static_cast<size_t>(c.rows));
  for (auto& v : row_scale) v = 0.5f + 0.25f * std::uniform_real_distribution<float>(-1, 1)(rng);
  const float scale = (c.scale_mode & 1) ? 3.0e-3f : 1.0f;
  // Accumulate: y starts with values; otherwise poison (must be overwritten). Padding columns
  // are poison either way.
  std::vector<float> y0(static_cast<size_t>(ldy * c.n_tok), poison());
  if (c.accumulate) {
    const auto v = random_floats(y0.size(), rng);
    for (int64_t t = 0; t < c.n_tok; ++t)
      for (int64_t r = 0; r < c.rows; ++r) y0[static_cast<size_t>(t * ldy + r)] = v[static_cast<size_t>(t * ldy + r)];
  }

  quant::MatmulArgs a;
  a.type = c.type;
  a.w = w.raw.data();
  a.row_bytes = w.rb;
  a.k = k;
  a.x = x.data();
  a.ldx = ldx;
  a.n_tok = c.n_tok;
  std::vector<float> y_ref(y0.size(), poison());
  a.y = y_ref.data();
  a.ldy = ldy;
  a.row_scale = (c.scale_mode & 2) ? row_scale.data() : nullptr;
  a.scale = scale;
  a.round = to_cpu(c.round);
  quant::matmul_ref(a, 0, c.rows);

  DeviceBuffer dw = to_device(w.raw), dx = to_device(x), ds = to_device(row_scale), dy = to_device(y0);
  GemmArgs g;
  g.type = c.type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = w.rb;
  g.k = k;
  g.rows = c.rows;
  g.x = dx.as<float>();
  g.ldx = ldx;
  g.n_tok = c.n_tok;
  g.y = dy.as<float>();
  g.ldy = ldy;
  g.row_scale = (c.scale_mode & 2) ? ds.as<float>() : nullptr;
  g.scale = scale;
  g.round = c.round;
  g.accumulate = c.accumulate;
  g.prec = c.prec;
  gemm.set_route(c.route);
  gemm.run(g, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, y0.size());

  for (int64_t t = 0; t < c.n_tok; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (r >= c.rows) {
        ASSERT_TRUE(is_poison(y[i])) << "wrote padding: row " << r << " token " << t;
        continue;
      }
      const float s = scale * ((c.scale_mode & 2) ? row_scale[static_cast<size_t>(r)] : 1.0f);
      const float want = c.accumulate ? y_ref[i] + y0[i] : y_ref[i];
      ASSERT_FALSE(is_poison(y[i])) << "row " << r << " token " << t << " not written";
      const double tol = tolerance(c.prec, c.round, err_scale(w.deq.data() + r * k, x.data() + t * ldx, k, s),
                                   y_ref[i], c.accumulate ? y0[i] : 0.0f);
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - want), tol)
          << "row " << r << " token " << t << " got " << y[i] << " want " << want;
    }
  }
}

TEST(CudaGemm, DenseMatchesMatmulRefOverTypesPrecsRoutes) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2024);
  Gemm gemm(2304, 512);
  struct Shape {
    int64_t rows, n_tok;
    int scale_mode;
    Round round;
    bool accumulate;
  };
  const Shape shapes[] = {{200, 17, 3, Round::kBF16, false},
                          {77, 1, 0, Round::kNone, false},
                          {130, 300, 1, Round::kF16, true},
                          {64, 3, 2, Round::kNone, true},
                          {129, 65, 3, Round::kNone, false}};
  for (GgmlType t : kTypes) {
    ASSERT_TRUE(gemm_supported(t));
    for (GemmPrec p : {GemmPrec::kF32, GemmPrec::kBF16, GemmPrec::kF16})
      for (GemmRoute route : {GemmRoute::kCublas, GemmRoute::kFused, GemmRoute::kAuto})
        for (const Shape& s : shapes) {
          check_dense(gemm, {t, p, route, s.rows, s.n_tok, s.scale_mode, s.round, s.accumulate}, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
  }
}

// A workspace that holds few rows: the weights go in several row chunks and the tokens in
// several token chunks, with accumulate (the scratch Y path).
TEST(CudaGemm, SmallWorkspaceChunksRowsAndTokens) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(5);
  Gemm gemm(352, 16, size_t{1} << 20);  // 256 KiB cuBLAS + 768 KiB: ~700 rows of k = 352 bf16
  EXPECT_EQ(gemm.workspace_bytes(), size_t{1} << 20);
  for (GemmPrec p : {GemmPrec::kBF16, GemmPrec::kF32}) {
    for (bool acc : {false, true}) {
      check_dense(gemm, {GgmlType::Q8_0, p, GemmRoute::kCublas, 1500, 40, 3, Round::kNone, acc}, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(CudaGemm, RefusesBadShapes) {
  FT_REQUIRE_GPU();
  Gemm gemm(256, 8);
  DeviceBuffer buf(1 << 16);
  GemmArgs g;
  g.type = GgmlType::Q4_K;
  g.w = buf.as<uint8_t>();
  g.k = 96;  // not a multiple of the Q4_K block
  g.row_bytes = 144;
  g.rows = 4;
  g.x = buf.as<float>();
  g.ldx = 96;
  g.n_tok = 2;
  g.y = buf.as<float>();
  g.ldy = 4;
  EXPECT_THROW(gemm.run(g, nullptr), Error);
  g.type = GgmlType::Q4_0;  // no GPU decoder
  g.k = 64;
  EXPECT_THROW(gemm.run(g, nullptr), Error);
}

// ---- dequant_rows -------------------------------------------------------------------------

TEST(CudaGemm, DequantRowsMatchesDequantizeRowRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(77);
  for (GgmlType t : kTypes) {
    SCOPED_TRACE(std::string(type_name(t)));
    const int64_t k = k_for(t), rows = 37, ld = k + 8;
    const Weights w = random_weights(t, k, rows, rng);
    DeviceBuffer dw = to_device(w.raw), d32(static_cast<size_t>(rows * ld * 4)), d16(static_cast<size_t>(rows * ld * 2));
    dequant_rows(t, dw.as<uint8_t>(), w.rb, k, rows, d32.get(), ld, DequantOut::kF32, nullptr);
    dequant_rows(t, dw.as<uint8_t>(), w.rb, k, rows, d16.get(), ld, DequantOut::kBF16, nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto f = to_host<float>(d32, static_cast<size_t>(rows * ld));
    const auto h = to_host<uint16_t>(d16, static_cast<size_t>(rows * ld));
    for (int64_t r = 0; r < rows; ++r) {
      // Q4_K: the device may fuse d*q - m into one FMA, one rounding less, which after
      // cancellation is an error relative to |m| (<= the row's largest |w|), not to |w|.
      float row_max = 0.0f;
      for (int64_t e = 0; e < k; ++e) row_max = std::max(row_max, std::fabs(w.deq[static_cast<size_t>(r * k + e)]));
      const float fma_slack = t == GgmlType::Q4_K ? 1e-6f * row_max : 0.0f;
      for (int64_t e = 0; e < k; ++e) {
        const float want = w.deq[static_cast<size_t>(r * k + e)];
        const float got = f[static_cast<size_t>(r * ld + e)];
        ASSERT_LE(std::fabs(got - want), 1e-6f * std::fabs(want) + fma_slack + 1e-30f) << "row " << r << " elem " << e;
        const uint32_t bits = static_cast<uint32_t>(h[static_cast<size_t>(r * ld + e)]) << 16;
        float b;
        std::memcpy(&b, &bits, 4);
        ASSERT_LE(std::fabs(b - want), std::fabs(want) / 256 + fma_slack + 1e-30f) << "bf16 row " << r << " elem " << e;
      }
    }
  }
}

// ---- moe_sort ---------------------------------------------------------------------------

// Host twin: stable counting sort by expert; ids outside [0, n_expert) are left out.
void moe_sort_host(const std::vector<int32_t>& ids, int64_t n_expert, std::vector<int32_t>& order,
                   std::vector<int32_t>& offsets) {
  offsets.assign(static_cast<size_t>(n_expert + 1), 0);
  for (int32_t e : ids)
    if (e >= 0 && e < n_expert) ++offsets[static_cast<size_t>(e + 1)];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  order.clear();
  for (int64_t e = 0; e < n_expert; ++e)
    for (size_t s = 0; s < ids.size(); ++s)
      if (ids[s] == e) order.push_back(static_cast<int32_t>(s));
}

struct Sorted {
  std::vector<int32_t> order, offsets;
  DeviceBuffer d_order, d_offsets;
};

Sorted sort_on_device(const std::vector<int32_t>& ids, int64_t n_expert) {
  const int64_t n = static_cast<int64_t>(ids.size());
  DeviceBuffer d_ids = to_device(ids);
  Sorted s;
  s.d_order = to_device(std::vector<int32_t>(std::max<size_t>(ids.size(), 1), -7));
  s.d_offsets = DeviceBuffer(static_cast<size_t>(n_expert + 1) * 4);
  DeviceBuffer ws(std::max<size_t>(moe_sort_workspace_bytes(n, n_expert), 1));
  moe_sort(d_ids.as<int32_t>(), n, n_expert, s.d_order.as<int32_t>(), s.d_offsets.as<int32_t>(), ws.get(), nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  s.order = to_host<int32_t>(s.d_order, ids.size());
  s.offsets = to_host<int32_t>(s.d_offsets, static_cast<size_t>(n_expert + 1));
  return s;
}

TEST(CudaMoeSort, MatchesStableHostSort) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(31);
  for (int64_t n_expert : {1, 8, 128, 300}) {
    for (int64_t n_slots : {0, 1, 7, 255, 256, 257, 3000, 4096}) {
      SCOPED_TRACE("n_expert " + std::to_string(n_expert) + " n_slots " + std::to_string(n_slots));
      std::vector<int32_t> ids(static_cast<size_t>(n_slots));
      // A skewed draw: a third of the experts get nothing, a few get many.
      for (auto& e : ids) {
        const int64_t v = static_cast<int64_t>(rng() % static_cast<unsigned>(n_expert));
        e = static_cast<int32_t>(rng() % 3 == 0 ? v % std::max<int64_t>(1, n_expert / 8) : (v / 3) * 3 % n_expert);
      }
      std::vector<int32_t> order, offsets;
      moe_sort_host(ids, n_expert, order, offsets);
      const Sorted s = sort_on_device(ids, n_expert);
      ASSERT_EQ(s.offsets, offsets);
      ASSERT_EQ(s.order, order);
    }
  }
}

TEST(CudaMoeSort, LeavesOutOfRangeIdsOut) {
  FT_REQUIRE_GPU();
  const std::vector<int32_t> ids = {2, -1, 0, 5, 2, 9, 1, 0};
  std::vector<int32_t> order, offsets;
  moe_sort_host(ids, 4, order, offsets);
  const Sorted s = sort_on_device(ids, 4);
  ASSERT_EQ(s.offsets, offsets);
  ASSERT_EQ(offsets.back(), 5);
  for (size_t j = 0; j < 5; ++j) EXPECT_EQ(s.order[j], order[j]) << j;
  for (size_t j = 5; j < ids.size(); ++j) EXPECT_EQ(s.order[j], -7) << "tail written at " << j;
}

// ---- grouped GEMM -----------------------------------------------------------------------

struct GroupedCase {
  GgmlType type;
  GemmPrec prec;
  int64_t n_expert, n_tok, n_used, rows;
  bool gate_up;  // X per token through order (x_div = n_used); else X in sorted order
  bool bank, row_scale, accumulate;
  Round round;
};

void check_grouped(Gemm& gemm, const GroupedCase& c, std::mt19937& rng) {
  SCOPED_TRACE(std::string(type_name(c.type)) + " prec=" + prec_name(c.prec) + " experts=" +
               std::to_string(c.n_expert) + " n_tok=" + std::to_string(c.n_tok) + " used=" +
               std::to_string(c.n_used) + " rows=" + std::to_string(c.rows) + " gate_up=" +
               std::to_string(c.gate_up) + " acc=" + std::to_string(c.accumulate));
  const int64_t k = k_for(c.type), n_slots = c.n_tok * c.n_used;
  // Expert ids: distinct per token, experts 1 and n_expert - 1 never chosen (no tokens).
  std::vector<int32_t> ids(static_cast<size_t>(n_slots));
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < c.n_expert; ++e)
    if (c.n_expert < 4 || (e != 1 && e != c.n_expert - 1)) pool.push_back(e);
  for (int64_t t = 0; t < c.n_tok; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int64_t u = 0; u < c.n_used; ++u) ids[static_cast<size_t>(t * c.n_used + u)] = pool[static_cast<size_t>(u)];
  }
  const Sorted s = sort_on_device(ids, c.n_expert);

  // Weights of all experts, one after another (expert_bytes a little more than the rows).
  const int64_t rb = row_bytes(c.type, k);
  const int64_t expert_bytes = (rb * c.rows + 64 + 15) / 16 * 16;
  std::vector<uint8_t> w(static_cast<size_t>(expert_bytes * c.n_expert), 0xCD);
  std::vector<Weights> ew;
  for (int64_t e = 0; e < c.n_expert; ++e) {
    ew.push_back(random_weights(c.type, k, c.rows, rng));
    std::copy(ew.back().raw.begin(), ew.back().raw.end(), w.begin() + e * expert_bytes);
  }
  const int64_t x_rows = c.gate_up ? c.n_tok : n_slots;
  const int64_t ldx = k + 8, ldy = c.rows + 3;
  const auto x = random_floats(static_cast<size_t>(ldx * x_rows), rng);
  std::vector<float> bank(static_cast<size_t>(c.n_expert * 4)), rs(static_cast<size_t>(c.rows));
  for (auto& v : bank) v = std::uniform_real_distribution<float>(0.25f, 2.0f)(rng);
  for (auto& v : rs) v = std::uniform_real_distribution<float>(0.5f, 1.5f)(rng);
  const float scale = 0.75f;
  const int bank_col = 2;
  std::vector<float> y0(static_cast<size_t>(ldy * n_slots), poison());
  if (c.accumulate) {
    const auto v = random_floats(y0.size(), rng);
    for (int64_t j = 0; j < n_slots; ++j)
      for (int64_t r = 0; r < c.rows; ++r) y0[static_cast<size_t>(j * ldy + r)] = v[static_cast<size_t>(j * ldy + r)];
  }

  DeviceBuffer dw = to_device(w), dx = to_device(x), db = to_device(bank), drs = to_device(rs), dy = to_device(y0);
  GroupedGemmArgs a;
  a.g.type = c.type;
  a.g.w = dw.as<uint8_t>();
  a.g.row_bytes = rb;
  a.g.k = k;
  a.g.rows = c.rows;
  a.g.x = dx.as<float>();
  a.g.ldx = ldx;
  a.g.n_tok = n_slots;
  a.g.y = dy.as<float>();
  a.g.ldy = ldy;
  a.g.row_scale = c.row_scale ? drs.as<float>() : nullptr;
  a.g.scale = scale;
  a.g.round = c.round;
  a.g.accumulate = c.accumulate;
  a.g.prec = c.prec;
  a.expert_bytes = expert_bytes;
  a.n_expert = c.n_expert;
  a.order = c.gate_up ? s.d_order.as<int32_t>() : nullptr;
  a.offsets = s.d_offsets.as<int32_t>();
  a.x_div = c.gate_up ? c.n_used : 1;
  a.bank = c.bank ? db.as<float>() : nullptr;
  a.bank_col = bank_col;
  gemm_grouped(gemm, a, nullptr);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, y0.size());

  std::vector<float> ref(static_cast<size_t>(c.rows));
  for (int64_t e = 0; e < c.n_expert; ++e) {
    for (int64_t j = s.offsets[static_cast<size_t>(e)]; j < s.offsets[static_cast<size_t>(e + 1)]; ++j) {
      const int64_t slot = s.order[static_cast<size_t>(j)];
      ASSERT_EQ(ids[static_cast<size_t>(slot)], e);
      const float* xr = x.data() + (c.gate_up ? slot / c.n_used : j) * ldx;
      const float se = scale * (c.bank ? bank[static_cast<size_t>(e * 4 + bank_col)] : 1.0f);
      quant::MatmulArgs m;
      m.type = c.type;
      m.w = ew[static_cast<size_t>(e)].raw.data();
      m.row_bytes = rb;
      m.k = k;
      m.x = xr;
      m.ldx = k;
      m.n_tok = 1;
      m.y = ref.data();
      m.ldy = c.rows;
      m.row_scale = c.row_scale ? rs.data() : nullptr;
      m.scale = se;
      m.round = to_cpu(c.round);
      quant::matmul_ref(m, 0, c.rows);
      for (int64_t r = 0; r < c.rows; ++r) {
        const size_t i = static_cast<size_t>(j * ldy + r);
        const float want = c.accumulate ? ref[static_cast<size_t>(r)] + y0[i] : ref[static_cast<size_t>(r)];
        const double sr = std::fabs(se * (c.row_scale ? rs[static_cast<size_t>(r)] : 1.0f));
        const double tol = tolerance(c.prec, c.round, err_scale(ew[static_cast<size_t>(e)].deq.data() + r * k, xr, k, sr),
                                     ref[static_cast<size_t>(r)], c.accumulate ? y0[i] : 0.0f);
        ASSERT_FALSE(is_poison(y[i])) << "position " << j << " row " << r << " not written";
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - want), tol)
            << "expert " << e << " position " << j << " row " << r << " got " << y[i] << " want " << want;
      }
    }
  }
  for (int64_t j = 0; j < n_slots; ++j)
    for (int64_t r = c.rows; r < ldy; ++r) ASSERT_TRUE(is_poison(y[static_cast<size_t>(j * ldy + r)]));
}

TEST(CudaGemmGrouped, MatchesPerSlotMatmulRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(4242);
  Gemm gemm(1024, 512);
  for (GgmlType t : kTypes)
    for (GemmPrec p : {GemmPrec::kBF16, GemmPrec::kF32, GemmPrec::kF16}) {
      // Few slots per expert (token tile 32), then many (token tile 64, several tiles).
      check_grouped(gemm, {t, p, 16, 37, 4, 136, true, true, false, false, Round::kNone}, rng);
      if (::testing::Test::HasFatalFailure()) return;
      check_grouped(gemm, {t, p, 6, 150, 2, 72, false, false, true, true, Round::kBF16}, rng);
      if (::testing::Test::HasFatalFailure()) return;
      check_grouped(gemm, {t, p, 5, 90, 3, 200, true, true, true, false, Round::kF16}, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// Both token tiles of the tensor-core kernel compute the same function, dense and grouped.
TEST(CudaGemmGrouped, ForcedTokenTiles) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(12);
  Gemm gemm(1024, 512);
  for (int bt : {32, 64}) {
    gemm_set_fused_tile_override(bt);
    SCOPED_TRACE("token tile " + std::to_string(bt));
    for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q6_K, GgmlType::BF16}) {
      check_grouped(gemm, {t, GemmPrec::kBF16, 16, 37, 4, 136, true, true, false, false, Round::kNone}, rng);
      if (::testing::Test::HasFatalFailure()) break;
      check_grouped(gemm, {t, GemmPrec::kF16, 6, 150, 2, 72, false, false, true, true, Round::kBF16}, rng);
      if (::testing::Test::HasFatalFailure()) break;
      check_dense(gemm, {t, GemmPrec::kBF16, GemmRoute::kFused, 130, 100, 3, Round::kNone, false}, rng);
      if (::testing::Test::HasFatalFailure()) break;
    }
    if (::testing::Test::HasFatalFailure()) break;
  }
  gemm_set_fused_tile_override(0);
  EXPECT_THROW(gemm_set_fused_tile_override(48), Error);
}

// NVFP4 in the fused kernel: the pair-layout path (default, gemm_tuning.h) and the generic
// decoder, both precisions, both token tiles.
TEST(CudaGemmGrouped, Nvfp4FastAndGenericPaths) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(13);
  Gemm gemm(1024, 512);
  for (bool fast : {true, false}) {
    gemm_set_fused_fp4_fast(fast);
    SCOPED_TRACE(fast ? "fast" : "generic");
    for (int bt : {32, 64}) {
      gemm_set_fused_tile_override(bt);
      for (GemmPrec p : {GemmPrec::kBF16, GemmPrec::kF16}) {
        check_grouped(gemm, {GgmlType::NVFP4, p, 16, 37, 4, 136, true, true, false, false, Round::kNone}, rng);
        if (::testing::Test::HasFatalFailure()) break;
        check_grouped(gemm, {GgmlType::NVFP4, p, 6, 150, 2, 200, false, true, true, true, Round::kBF16}, rng);
        if (::testing::Test::HasFatalFailure()) break;
        check_dense(gemm, {GgmlType::NVFP4, p, GemmRoute::kFused, 129, 77, 3, Round::kNone, true}, rng);
        if (::testing::Test::HasFatalFailure()) break;
      }
      if (::testing::Test::HasFatalFailure()) break;
    }
    if (::testing::Test::HasFatalFailure()) break;
  }
  gemm_set_fused_tile_override(0);
  gemm_set_fused_fp4_fast(kFusedNvfp4PairLayout);
}

TEST(CudaGemmGrouped, OneTokenAndEmptyInput) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(8);
  Gemm gemm(1024, 512);
  check_grouped(gemm, {GgmlType::NVFP4, GemmPrec::kBF16, 128, 1, 8, 130, true, true, true, false, Round::kNone}, rng);
  check_grouped(gemm, {GgmlType::NVFP4, GemmPrec::kBF16, 8, 0, 2, 64, true, true, true, false, Round::kNone}, rng);
}

}  // namespace
}  // namespace ft::cuda
