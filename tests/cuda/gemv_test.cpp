// CUDA decode GEMV (src/cuda/gemv.h) against its CPU twins (float path: quant::matmul_ref;
// integer path: gemv_q8_ref, and matmul_ref within the activation-rounding bound): every supported
// type over k (odd block counts, partial 1024-element chunks), rows not a multiple of the
// row tile, 1..8 tokens, scale modes (none, scalar, per-row, both), output roundings,
// aligned and unaligned row strides, forced plans, and the grouped MoE entry with the
// per-expert scale bank. Outputs are poisoned first; padding must stay poisoned.
#include "cuda/gemv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../quant/random_blocks.h"
#include "compare_util.h"
#include "core/error.h"
#include "core/fp16.h"
#include "cuda/act_q8.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_q8_formats.cuh"
#include "cuda/gemv_q8_ref.h"
#include "cuda/gemv_tuning.h"
#include "quant/dequant.h"
#include "quant/matmul.h"

namespace ft::cuda {
namespace {

using compare_test::is_poison;
using compare_test::poison;

struct Case {
  GgmlType type;
  int64_t k, rows, n_tok;
  int scale_mode;  // bit 0 scalar, bit 1 per-row
  quant::Round round;
  int64_t stride_pad;  // extra bytes per row (0: packed)
  bool accumulate = false;
};

std::string describe(const Case& c) {
  return std::string(type_name(c.type)) + " k=" + std::to_string(c.k) + " rows=" + std::to_string(c.rows) +
         " n_tok=" + std::to_string(c.n_tok) + " scale=" + std::to_string(c.scale_mode) +
         " round=" + std::to_string(static_cast<int>(c.round)) + " pad=" + std::to_string(c.stride_pad) +
         " acc=" + std::to_string(c.accumulate);
}

// Tolerance of the CPU fast-vs-ref tests: 1e-5 of sum |w*x| times the scale, plus one unit
// of the output rounding.
double tolerance(const std::vector<float>& wrow, const float* x, int64_t k, float s, quant::Round round, float ref) {
  const double sub = round == quant::Round::kF16 ? std::ldexp(1.0, -24) : 0.0;
  return compare_test::fp32_tolerance(compare_test::dot64(wrow.data(), x, k).s1 * std::fabs(s)) +
         compare_test::round_unit(round) * std::fabs(ref) + sub + 1e-30;
}

GemvRound to_gpu(quant::Round r) {
  return r == quant::Round::kBF16 ? GemvRound::kBF16 : r == quant::Round::kF16 ? GemvRound::kF16 : GemvRound::kNone;
}

void check_dense(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t rb = row_bytes(c.type, c.k) + c.stride_pad;
  std::vector<uint8_t> w(static_cast<size_t>(rb * c.rows), 0xAB);
  for (int64_t r = 0; r < c.rows; ++r) {
    const auto row = quant::testing::random_row(c.type, c.k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  const int64_t ldx = c.k + 4, ldy = c.rows + 3;
  std::vector<float> x(static_cast<size_t>(ldx * c.n_tok));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& v : x) v = unit(rng);
  std::vector<float> row_scale(static_cast<size_t>(c.rows));
  for (auto& v : row_scale) v = 0.5f + unit(rng) * 0.25f;
  const float scale = (c.scale_mode & 1) ? 3.0e-4f : 1.0f;

  quant::MatmulArgs a;
  a.type = c.type;
  a.w = w.data();
  a.row_bytes = rb;
  a.k = c.k;
  a.x = x.data();
  a.ldx = ldx;
  a.n_tok = c.n_tok;
  a.ldy = ldy;
  a.row_scale = (c.scale_mode & 2) ? row_scale.data() : nullptr;
  a.scale = scale;
  a.round = c.round;
  std::vector<float> y_ref(static_cast<size_t>(ldy * c.n_tok), poison());
  a.y = y_ref.data();
  quant::matmul_ref(a, 0, c.rows);

  DeviceBuffer dw = to_device(w), dx = to_device(x), ds = to_device(row_scale);
  std::vector<float> y0(static_cast<size_t>(ldy * kGemvMaxTokens), poison());
  if (c.accumulate)
    for (int64_t t = 0; t < c.n_tok; ++t)
      for (int64_t r = 0; r < c.rows; ++r) y0[static_cast<size_t>(t * ldy + r)] = unit(rng);
  DeviceBuffer dy = to_device(y0);
  GemvArgs g;
  g.type = c.type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = c.k;
  g.rows = c.rows;
  g.x = dx.as<float>();
  g.ldx = ldx;
  g.n_tok = c.n_tok;
  g.y = dy.as<float>();
  g.ldy = ldy;
  g.row_scale = (c.scale_mode & 2) ? ds.as<float>() : nullptr;
  g.scale = scale;
  g.round = to_gpu(c.round);
  g.accumulate = c.accumulate;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, static_cast<size_t>(ldy * kGemvMaxTokens));

  std::vector<float> wrow(static_cast<size_t>(c.k));
  for (int64_t r = 0; r < c.rows; ++r) {
    quant::dequantize_row_ref(c.type, w.data() + r * rb, wrow.data(), c.k);
    const float s = scale * ((c.scale_mode & 2) ? row_scale[static_cast<size_t>(r)] : 1.0f);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      const size_t at = static_cast<size_t>(t * ldy + r);
      const float ref = c.accumulate ? y0[at] + y_ref[at] : y_ref[at], got = y[at];
      ASSERT_FALSE(is_poison(got)) << "row " << r << " token " << t << " not written";
      ASSERT_TRUE(std::isfinite(ref));
      const double add_ulp = c.accumulate ? 2.4e-7 * std::fabs(ref) : 0.0;  // the fp32 add
      ASSERT_LE(std::fabs(static_cast<double>(got) - ref),
                tolerance(wrow, x.data() + t * ldx, c.k, s, c.round, ref) + add_ulp)
          << "row " << r << " token " << t << " got " << got << " want " << ref;
    }
  }
  for (int64_t t = 0; t < kGemvMaxTokens; ++t)
    for (int64_t r = 0; r < ldy; ++r) {
      if (t >= c.n_tok || r >= c.rows) {
        ASSERT_TRUE(is_poison(y[static_cast<size_t>(t * ldy + r)])) << "wrote outside: row " << r << " token " << t;
      }
    }
}

// k values per type: odd block counts, a partial last 1024-element chunk, several chunks.
std::vector<int64_t> k_values(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return {256, 768, 1280, 2304, 4352};
    case GgmlType::NVFP4:
      return {64, 192, 1088, 2240, 4160};
    default:
      return {32, 96, 1056, 2080, 4128};
  }
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,  GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4};

TEST(CudaGemv, MatchesMatmulRefOverTypesShapesTokensScales) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(1234);
  int n = 0;
  for (GgmlType t : kTypes) {
    ASSERT_TRUE(gemv_supported(t));
    for (int64_t k : k_values(t))
      for (int64_t rows : {1, 7, 33, 130})
        for (int64_t n_tok = 1; n_tok <= kGemvMaxTokens; ++n_tok) {
          // Spread scale modes, roundings and strides over the sweep instead of a full product.
          const int scale_mode = n % 4;
          const quant::Round round = (n / 4) % 5 == 3 ? quant::Round::kBF16
                                     : (n / 4) % 5 == 4 ? quant::Round::kF16
                                                        : quant::Round::kNone;
          const int64_t pad = (n % 3 == 0) ? 0 : (n % 3 == 1) ? 16 - row_bytes(t, k) % 16 + 16 : 2;
          check_dense({t, k, rows, n_tok, scale_mode, round, pad, n % 7 == 2}, rng);
          if (::testing::Test::HasFatalFailure()) return;
          ++n;
        }
  }
}

// Every pipeline depth (1..4 chunks in flight per warp) computes the same function.
TEST(CudaGemv, ForcedStagesMatchRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(99);
  for (int stages : {1, 2, 3, 4}) {
    gemv_set_stages_override(stages);
    SCOPED_TRACE("stages " + std::to_string(stages));
    for (GgmlType t : {GgmlType::NVFP4, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::BF16, GgmlType::F32}) {
      const int64_t k = (t == GgmlType::Q4_K || t == GgmlType::Q6_K) ? 5120 : 4160;
      for (int64_t n_tok : {1, 3, 8}) {
        check_dense({t, k, 37, n_tok, 3, quant::Round::kNone, 0}, rng);
        if (::testing::Test::HasFatalFailure()) break;
      }
    }
  }
  gemv_set_stages_override(-1);
}

// Grouped (MoE decode) entry: slot s = token s / n_used, rank s % n_used, expert ids[s].
void check_grouped(GgmlType type, int64_t k, int64_t rows, int64_t n_expert, int n_used, int64_t n_tokens,
                   bool shared_input, int bank_col, bool with_bank, std::mt19937& rng) {
  SCOPED_TRACE(std::string(type_name(type)) + " k=" + std::to_string(k) + " rows=" + std::to_string(rows) +
               " shared_input=" + std::to_string(shared_input) + " bank_col=" + std::to_string(bank_col));
  const int64_t rb = row_bytes(type, k);
  const int64_t eb = rb * rows;
  std::vector<uint8_t> w(static_cast<size_t>(eb * n_expert));
  for (int64_t r = 0; r < rows * n_expert; ++r) {
    const auto row = quant::testing::random_row(type, k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  const int64_t n_slot = n_tokens * n_used;
  std::vector<int32_t> ids(static_cast<size_t>(n_slot));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(n_expert));
    for (int32_t e = 0; e < n_expert; ++e) all[static_cast<size_t>(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < n_used; ++j) ids[static_cast<size_t>(t * n_used + j)] = all[static_cast<size_t>(j)];
  }
  std::vector<float> bank(static_cast<size_t>(n_expert * 4));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int64_t e = 0; e < n_expert; ++e) {
    for (int c = 0; c < 3; ++c) bank[static_cast<size_t>(e * 4 + c)] = 0.25f + 0.5f * (unit(rng) + 1.0f);
    bank[static_cast<size_t>(e * 4 + 3)] = 1.0f;
  }
  const int64_t x_rows = shared_input ? n_tokens : n_slot;
  const int64_t ldx = k + 8, ldy = rows + 1;
  std::vector<float> x(static_cast<size_t>(ldx * x_rows));
  for (auto& v : x) v = unit(rng);

  DeviceBuffer dw = to_device(w), dx = to_device(x), dids = to_device(ids), dbank = to_device(bank);
  DeviceBuffer dy = to_device(std::vector<float>(static_cast<size_t>(ldy * n_slot), poison()));
  GemvArgs g;
  g.type = type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = k;
  g.rows = rows;
  g.x = dx.as<float>();
  g.ldx = ldx;
  g.n_tok = n_slot;
  g.y = dy.as<float>();
  g.ldy = ldy;
  g.ids = dids.as<int32_t>();
  g.expert_bytes = eb;
  g.x_div = shared_input ? n_used : 1;
  g.bank = with_bank ? dbank.as<float>() : nullptr;
  g.bank_col = bank_col;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, static_cast<size_t>(ldy * n_slot));

  std::vector<float> y_ref(static_cast<size_t>(rows)), wrow(static_cast<size_t>(k));
  for (int64_t s = 0; s < n_slot; ++s) {
    const int32_t e = ids[static_cast<size_t>(s)];
    const float* xs = x.data() + (shared_input ? s / n_used : s) * ldx;
    quant::MatmulArgs a;
    a.type = type;
    a.w = w.data() + e * eb;
    a.row_bytes = rb;
    a.k = k;
    a.x = xs;
    a.ldx = ldx;
    a.n_tok = 1;
    a.y = y_ref.data();
    a.ldy = rows;
    a.scale = with_bank ? bank[static_cast<size_t>(e * 4 + bank_col)] : 1.0f;
    quant::matmul_ref(a, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      quant::dequantize_row_ref(type, a.w + r * rb, wrow.data(), k);
      const float got = y[static_cast<size_t>(s * ldy + r)], ref = y_ref[static_cast<size_t>(r)];
      ASSERT_FALSE(is_poison(got)) << "slot " << s << " row " << r << " not written";
      ASSERT_LE(std::fabs(static_cast<double>(got) - ref), tolerance(wrow, xs, k, a.scale, quant::Round::kNone, ref))
          << "slot " << s << " expert " << e << " row " << r << " got " << got << " want " << ref;
    }
    ASSERT_TRUE(is_poison(y[static_cast<size_t>(s * ldy + rows)])) << "slot " << s << " wrote past rows";
  }
}

TEST(CudaGemv, GroupedExpertsWithScaleBankMatchRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::BF16}) {
    const int64_t k = t == GgmlType::Q4_K ? 768 : 1088;
    // gate/up: slots share their token's input; down: one input per slot.
    check_grouped(t, k, 45, 9, 3, 2, true, 0, true, rng);
    check_grouped(t, k, 45, 9, 3, 2, true, 1, true, rng);
    check_grouped(t, k, 70, 9, 3, 3, false, 2, true, rng);
    check_grouped(t, k, 20, 5, 2, 1, false, 0, false, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- integer path (xq) -------------------------------------------------------------------

const GgmlType kQ8Types[] = {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

// Activations in act_q8 layout for n rows of x (ldx apart), made by the host twin.
std::vector<uint8_t> quantize_rows(const std::vector<float>& x, int64_t ldx, int64_t k, int64_t n) {
  std::vector<uint8_t> xq(act_q8_bytes(k, n));
  for (int64_t t = 0; t < n; ++t)
    quantize_act_q8_row_ref(x.data() + t * ldx, k, xq.data() + t * act_q8_row_bytes(k));
  return xq;
}

// sum |w * x_rt| and sum |w| * |x - x_rt| of one row: the fp32-order tolerance against the
// twin and the activation-rounding bound against matmul_ref.
struct RowMag {
  double mag = 0, act_err = 0, mag_fp32 = 0;
};
RowMag row_mag(GgmlType type, const uint8_t* wrow, int64_t k, const float* x, const uint8_t* xq_row) {
  std::vector<float> wd(static_cast<size_t>(k));
  quant::dequantize_row_ref(type, wrow, wd.data(), k);
  RowMag m;
  for (int64_t i = 0; i < k; ++i) {
    const double wv = wd[static_cast<size_t>(i)], xr = act_q8_value(xq_row, k, i);
    m.mag += std::fabs(wv * xr);
    m.act_err += std::fabs(wv) * std::fabs(static_cast<double>(x[i]) - xr);
    m.mag_fp32 += std::fabs(wv * x[i]);
  }
  return m;
}

void check_dense_q8(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE("q8 " + describe(c));
  const int64_t rb = row_bytes(c.type, c.k) + c.stride_pad;
  std::vector<uint8_t> w(static_cast<size_t>(rb * c.rows), 0xAB);
  for (int64_t r = 0; r < c.rows; ++r) {
    const auto row = quant::testing::random_row(c.type, c.k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  const int64_t ldx = c.k + 4, ldy = c.rows + 3;
  std::vector<float> x(static_cast<size_t>(ldx * c.n_tok));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& v : x) v = unit(rng) * std::exp(2.0f * unit(rng));
  const auto xq = quantize_rows(x, ldx, c.k, c.n_tok);
  std::vector<float> row_scale(static_cast<size_t>(c.rows));
  for (auto& v : row_scale) v = 0.5f + unit(rng) * 0.25f;
  const float scale = (c.scale_mode & 1) ? 3.0e-4f : 1.0f;
  const float* rs = (c.scale_mode & 2) ? row_scale.data() : nullptr;

  std::vector<float> y0(static_cast<size_t>(ldy * kGemvMaxTokens), poison());
  if (c.accumulate)
    for (int64_t t = 0; t < c.n_tok; ++t)
      for (int64_t r = 0; r < c.rows; ++r) y0[static_cast<size_t>(t * ldy + r)] = unit(rng);
  std::vector<float> twin = y0;
  gemv_q8_ref(c.type, w.data(), rb, c.k, c.rows, xq.data(), c.n_tok, twin.data(), ldy, rs, scale, to_gpu(c.round),
              c.accumulate);
  // matmul_ref in fp32 on the original activations (the float path's definition).
  std::vector<float> fp32(static_cast<size_t>(ldy * c.n_tok));
  {
    quant::MatmulArgs a;
    a.type = c.type;
    a.w = w.data();
    a.row_bytes = rb;
    a.k = c.k;
    a.x = x.data();
    a.ldx = ldx;
    a.n_tok = c.n_tok;
    a.y = fp32.data();
    a.ldy = ldy;
    a.row_scale = rs;
    a.scale = scale;
    quant::matmul_ref(a, 0, c.rows);
  }

  DeviceBuffer dw = to_device(w), dxq = to_device(xq), ds = to_device(row_scale), dy = to_device(y0);
  GemvArgs g;
  g.type = c.type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = c.k;
  g.rows = c.rows;
  g.x = nullptr;  // ignored by the integer path
  g.xq = dxq.get();
  g.n_tok = c.n_tok;
  g.y = dy.as<float>();
  g.ldy = ldy;
  g.row_scale = (c.scale_mode & 2) ? ds.as<float>() : nullptr;
  g.scale = scale;
  g.round = to_gpu(c.round);
  g.accumulate = c.accumulate;
  gemv(g);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, static_cast<size_t>(ldy * kGemvMaxTokens));

  const double ulp = c.round == quant::Round::kBF16 ? 1.0 / 128 : c.round == quant::Round::kF16 ? 1.0 / 1024 : 0.0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const double s = std::fabs(scale * (rs != nullptr ? rs[r] : 1.0f));
    for (int64_t t = 0; t < c.n_tok; ++t) {
      const size_t at = static_cast<size_t>(t * ldy + r);
      const float got = y[at], want = twin[at];
      ASSERT_FALSE(is_poison(got)) << "row " << r << " token " << t << " not written";
      if (got == want) continue;  // includes both overflowing the f16 rounding to inf
      const RowMag m = row_mag(c.type, w.data() + r * rb, c.k, x.data() + t * ldx,
                               xq.data() + t * act_q8_row_bytes(c.k));
      const double add_ulp = c.accumulate ? 2.4e-7 * std::fabs(want) : 0.0;
      ASSERT_LE(std::fabs(static_cast<double>(got) - want), 1e-5 * m.mag * s + ulp * std::fabs(want) + add_ulp + 1e-30)
          << "vs twin: row " << r << " token " << t << " got " << got << " want " << want;
      if (c.round == quant::Round::kNone && !c.accumulate) {
        // Against exact fp32 math: only the activation rounding (plus fp32 order) separates them.
        const double ref = fp32[at];
        ASSERT_LE(std::fabs(static_cast<double>(got) - ref), (m.act_err + 1e-5 * (m.mag + m.mag_fp32)) * s + 1e-30)
            << "vs matmul_ref: row " << r << " token " << t << " got " << got << " want " << ref;
      }
    }
  }
  for (int64_t t = 0; t < kGemvMaxTokens; ++t)
    for (int64_t r = 0; r < ldy; ++r) {
      if (t >= c.n_tok || r >= c.rows) {
        ASSERT_TRUE(is_poison(y[static_cast<size_t>(t * ldy + r)])) << "wrote outside: row " << r << " token " << t;
      }
    }
}

std::vector<int64_t> q8_k_values(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return {256, 768, 1280, 2304, 8448};
    case GgmlType::NVFP4:
      return {64, 192, 768, 2240, 4160};
    default:
      return {32, 96, 1056, 2080, 4128};
  }
}

TEST(CudaGemvQ8, MatchesTwinAndBoundsMatmulRefOverTypesShapesTokens) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(4321);
  int n = 0;
  for (GgmlType t : kQ8Types) {
    ASSERT_TRUE(gemv_q8_supported(t));
    for (int64_t k : q8_k_values(t))
      for (int64_t rows : {1, 7, 33, 130})
        for (int64_t n_tok = 1; n_tok <= kGemvMaxTokens; ++n_tok) {
          const int scale_mode = n % 4;
          const quant::Round round = (n / 4) % 5 == 3 ? quant::Round::kBF16
                                     : (n / 4) % 5 == 4 ? quant::Round::kF16
                                                        : quant::Round::kNone;
          const int64_t pad = (n % 3 == 0) ? 0 : (n % 3 == 1) ? 16 - row_bytes(t, k) % 16 + 16 : 2;
          check_dense_q8({t, k, rows, n_tok, scale_mode, round, pad, n % 7 == 2}, rng);
          if (::testing::Test::HasFatalFailure()) return;
          ++n;
        }
  }
}

// Every plan (lanes per row, rows per lane, pipeline depth) computes the same function.
// Grouped mode on both paths, with and without the fused combine. Slot s = token s / n_used,
// rank s % n_used; gate/up-like calls share their token's input (x_div = n_used).
void check_grouped_epilogue(GgmlType type, bool q8, bool combine, bool accumulate, bool shared_input,
                            quant::Round round, int64_t k, int64_t rows, int64_t n_expert, int n_used,
                            int64_t n_tokens, std::mt19937& rng) {
  SCOPED_TRACE(std::string(type_name(type)) + (q8 ? " q8" : " float") + " combine=" + std::to_string(combine) +
               " acc=" + std::to_string(accumulate) + " shared=" + std::to_string(shared_input) +
               " round=" + std::to_string(static_cast<int>(round)) + " k=" + std::to_string(k) +
               " rows=" + std::to_string(rows) + " n_used=" + std::to_string(n_used) +
               " tokens=" + std::to_string(n_tokens));
  const int64_t rb = row_bytes(type, k), eb = rb * rows, n_slot = n_tokens * n_used;
  std::vector<uint8_t> w(static_cast<size_t>(eb * n_expert));
  for (int64_t r = 0; r < rows * n_expert; ++r) {
    const auto row = quant::testing::random_row(type, k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  std::vector<int32_t> ids(static_cast<size_t>(n_slot));
  std::vector<float> slot_w(static_cast<size_t>(n_slot));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int32_t> all(static_cast<size_t>(n_expert));
    for (int32_t e = 0; e < n_expert; ++e) all[static_cast<size_t>(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < n_used; ++j) {
      ids[static_cast<size_t>(t * n_used + j)] = all[static_cast<size_t>(j)];
      slot_w[static_cast<size_t>(t * n_used + j)] = 0.05f + 0.5f * (unit(rng) + 1.0f);
    }
  }
  std::vector<float> bank(static_cast<size_t>(n_expert * 4));
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  const int bank_col = 2;
  const int64_t x_rows = shared_input ? n_tokens : n_slot;
  const int64_t ldx = k + 8, out_rows = combine ? n_tokens : n_slot, ldy = rows + 1;
  std::vector<float> x(static_cast<size_t>(ldx * x_rows));
  for (auto& v : x) v = unit(rng);
  const auto xq = quantize_rows(x, ldx, k, x_rows);
  std::vector<float> y0(static_cast<size_t>(ldy * out_rows), poison());
  for (int64_t t = 0; t < out_rows; ++t)
    for (int64_t r = 0; r < rows; ++r)
      if (accumulate) y0[static_cast<size_t>(t * ldy + r)] = unit(rng);

  // Expected: per slot the twin (q8) or matmul_ref (float), rounded, then the CPU combine.
  std::vector<float> want = y0, tol(y0.size(), 0.0f);
  const double ulp = round == quant::Round::kBF16 ? 1.0 / 128 : round == quant::Round::kF16 ? 1.0 / 1024 : 0.0;
  std::vector<float> v(static_cast<size_t>(rows)), comb(static_cast<size_t>(rows));
  std::vector<double> comb_tol(static_cast<size_t>(rows));
  for (int64_t s = 0; s < n_slot; ++s) {
    const int32_t e = ids[static_cast<size_t>(s)];
    const int64_t xr = shared_input ? s / n_used : s;
    const float sc = bank[static_cast<size_t>(e * 4 + bank_col)];
    if (q8) {
      gemv_q8_ref(type, w.data() + e * eb, rb, k, rows, xq.data() + xr * act_q8_row_bytes(k), 1, v.data(), rows,
                  nullptr, sc, to_gpu(round));
    } else {
      quant::MatmulArgs a;
      a.type = type;
      a.w = w.data() + e * eb;
      a.row_bytes = rb;
      a.k = k;
      a.x = x.data() + xr * ldx;
      a.ldx = ldx;
      a.n_tok = 1;
      a.y = v.data();
      a.ldy = rows;
      a.scale = sc;
      a.round = round;
      quant::matmul_ref(a, 0, rows);
    }
    const int j = static_cast<int>(s % n_used);
    const int64_t t = s / n_used;
    const float wj = slot_w[static_cast<size_t>(s)];
    for (int64_t r = 0; r < rows; ++r) {
      const RowMag m = row_mag(type, w.data() + e * eb + r * rb, k, x.data() + xr * ldx,
                               xq.data() + xr * act_q8_row_bytes(k));
      const double dt = 1e-5 * (q8 ? m.mag : m.mag_fp32) * sc + ulp * std::fabs(v[static_cast<size_t>(r)]) + 1e-30;
      if (combine) {
        const float p = v[static_cast<size_t>(r)] * wj;
        comb[static_cast<size_t>(r)] = j == 0 ? p : comb[static_cast<size_t>(r)] + p;
        comb_tol[static_cast<size_t>(r)] = (j == 0 ? 0.0 : comb_tol[static_cast<size_t>(r)]) + dt * wj;
        if (j == n_used - 1) {
          const size_t at = static_cast<size_t>(t * ldy + r);
          float c = comb[static_cast<size_t>(r)];
          if (round == quant::Round::kBF16) c = bf16_to_f32(f32_to_bf16(c));
          if (round == quant::Round::kF16) c = f16_to_f32(f32_to_f16(c));
          want[at] = accumulate ? y0[at] + c : c;
          tol[at] = static_cast<float>(comb_tol[static_cast<size_t>(r)] * 1.01 + ulp * std::fabs(c) +
                                       6e-8 * n_used * std::fabs(c) + (accumulate ? 2.4e-7 * std::fabs(want[at]) : 0.0));
        }
      } else {
        const size_t at = static_cast<size_t>(s * ldy + r);
        want[at] = accumulate ? y0[at] + v[static_cast<size_t>(r)] : v[static_cast<size_t>(r)];
        tol[at] = static_cast<float>(dt + (accumulate ? 2.4e-7 * std::fabs(want[at]) : 0.0));
      }
    }
  }

  DeviceBuffer dw = to_device(w), dx = to_device(x), dxq = to_device(xq), dids = to_device(ids),
               dbank = to_device(bank), dsw = to_device(slot_w), dy = to_device(y0);
  GemvArgs g;
  g.type = type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = k;
  g.rows = rows;
  g.x = dx.as<float>();
  g.ldx = ldx;
  g.xq = q8 ? dxq.get() : nullptr;
  g.n_tok = n_slot;
  g.y = dy.as<float>();
  g.ldy = ldy;
  g.round = to_gpu(round);
  g.ids = dids.as<int32_t>();
  g.expert_bytes = eb;
  g.x_div = shared_input ? n_used : 1;
  g.bank = dbank.as<float>();
  g.bank_col = bank_col;
  g.accumulate = accumulate;
  if (combine) {
    g.slot_w = dsw.as<float>();
    g.n_used = n_used;
  }
  gemv(g);
  // The same launch reading its ids before its PDL wait: the same bits (gemv.h ids_early).
  DeviceBuffer dy2 = to_device(y0);
  GemvArgs g2 = g;
  g2.y = dy2.as<float>();
  g2.ids_early = true;
  g2.y_early = accumulate;
  gemv(g2);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y = to_host<float>(dy, want.size());
  const auto y2 = to_host<float>(dy2, want.size());
  ASSERT_EQ(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)), 0) << "ids_early / y_early changed the bits";
  for (int64_t t = 0; t < out_rows; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const size_t at = static_cast<size_t>(t * ldy + r);
      ASSERT_FALSE(is_poison(y[at])) << "out row " << t << " row " << r << " not written";
      ASSERT_LE(std::fabs(static_cast<double>(y[at]) - want[at]), tol[at])
          << "out row " << t << " row " << r << " got " << y[at] << " want " << want[at];
    }
    ASSERT_TRUE(is_poison(y[static_cast<size_t>(t * ldy + rows)])) << "wrote past rows";
  }
}

TEST(CudaGemvQ8, ForcedPlansMatchTwin) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(98);
  for (int lanes : {4, 8, 16, 32})
    for (int rows : {1, 2, 4})
      for (int stages : {1, 2, 3, 4}) {
        gemv_set_lanes_override(lanes);
        gemv_set_rows_override(rows);
        gemv_set_stages_override(stages);
        SCOPED_TRACE("lanes " + std::to_string(lanes) + " rows " + std::to_string(rows) + " stages " +
                     std::to_string(stages));
        for (GgmlType t : kQ8Types) {
          const int64_t k = (t == GgmlType::Q4_K || t == GgmlType::Q6_K) ? 5120 : t == GgmlType::NVFP4 ? 4160 : 4128;
          for (int64_t n_tok : {1, 3, 8}) {
            check_dense_q8({t, k, 75, n_tok, 3, quant::Round::kNone, (lanes + stages) % 3 == 0 ? 2 : 0}, rng);
            if (::testing::Test::HasFatalFailure()) break;
          }
          // Grouped with combine, and many out rows per warp.
          check_grouped_epilogue(t, true, true, stages % 2 == 0, false, quant::Round::kNone,
                                 t == GgmlType::Q4_K || t == GgmlType::Q6_K ? 768 : 1088, 70, 9, 3, 2, rng);
          if (::testing::Test::HasFatalFailure()) break;
        }
        if (::testing::Test::HasFatalFailure()) break;
      }
  gemv_set_lanes_override(0);
  gemv_set_rows_override(0);
  gemv_set_stages_override(-1);
}

TEST(CudaGemvQ8, GroupedAndCombinedExpertsMatchCpuComposition) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(77);
  for (GgmlType t : {GgmlType::NVFP4, GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
    for (bool q8 : {false, true}) {
      const int64_t k = (t == GgmlType::Q4_K || t == GgmlType::Q6_K) ? 768 : 1088;
      // gate/up: shared input, no combine; down: per-slot input, combine (+ residual add).
      check_grouped_epilogue(t, q8, false, false, true, quant::Round::kNone, k, 45, 9, 3, 2, rng);
      check_grouped_epilogue(t, q8, true, false, false, quant::Round::kNone, k, 70, 9, 3, 3, rng);
      check_grouped_epilogue(t, q8, true, true, false, quant::Round::kNone, k, 70, 9, 4, 2, rng);
      check_grouped_epilogue(t, q8, true, false, false, quant::Round::kBF16, k, 33, 6, 2, 2, rng);
      check_grouped_epilogue(t, q8, false, true, false, quant::Round::kF16, k, 20, 5, 2, 1, rng);
      check_grouped_epilogue(t, q8, true, true, false, quant::Round::kNone, k, 130, 16, 8, 1, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  // The float path's other types take the combine too.
  check_grouped_epilogue(GgmlType::BF16, false, true, true, false, quant::Round::kNone, 1088, 70, 9, 3, 2, rng);
}

// A grouped call with a second tensor (GemvArgs::w_pair: gate and up in one launch where the
// NVFP4 slab kernel takes it, two calls elsewhere) writes the same bytes as two calls.
void check_pair(GgmlType type, bool q8, int64_t k, int64_t rows, int64_t n_expert, int n_used, int64_t n_tokens,
                std::mt19937& rng) {
  SCOPED_TRACE(std::string(type_name(type)) + " q8=" + std::to_string(q8) + " k=" + std::to_string(k) +
               " rows=" + std::to_string(rows) + " slots=" + std::to_string(n_tokens * n_used));
  const int64_t rb = row_bytes(type, k), eb = rb * rows, n_slot = n_tokens * n_used;
  std::vector<uint8_t> w(static_cast<size_t>(2 * eb * n_expert));  // gate experts, then up experts
  for (int64_t r = 0; r < 2 * rows * n_expert; ++r) {
    const auto row = quant::testing::random_row(type, k, rng);
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  std::vector<int32_t> ids(static_cast<size_t>(n_slot));
  for (auto& e : ids) e = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_expert));
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> bank(static_cast<size_t>(n_expert * 4));
  for (auto& v : bank) v = 0.25f + 0.5f * (unit(rng) + 1.0f);
  const int64_t ldx = k + 8, ldy = 2 * rows + 3;
  std::vector<float> x(static_cast<size_t>(ldx * n_tokens));
  for (auto& v : x) v = unit(rng);
  const auto xq = quantize_rows(x, ldx, k, n_tokens);
  std::vector<float> y0(static_cast<size_t>(ldy * n_slot), poison());
  DeviceBuffer dw = to_device(w), dx = to_device(x), dxq = to_device(xq), dids = to_device(ids),
               dbank = to_device(bank), dy1 = to_device(y0), dy2 = to_device(y0);
  GemvArgs g;
  g.type = type;
  g.w = dw.as<uint8_t>();
  g.row_bytes = rb;
  g.k = k;
  g.rows = rows;
  g.x = dx.as<float>();
  g.ldx = ldx;
  g.xq = q8 ? dxq.get() : nullptr;
  g.n_tok = n_slot;
  g.ldy = ldy;
  g.ids = dids.as<int32_t>();
  g.expert_bytes = eb;
  g.x_div = n_used;
  g.bank = dbank.as<float>();
  g.bank_col = 1;
  GemvArgs gate = g, up = g, pair = g;
  gate.y = dy1.as<float>();
  up.w = g.w + eb * n_expert;
  up.y = dy1.as<float>() + rows;
  up.bank_col = 2;
  pair.y = dy2.as<float>();
  pair.w_pair = up.w;
  pair.w_pair_y_off = rows;
  gemv(gate);
  gemv(up);
  gemv(pair);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto y1 = to_host<float>(dy1, y0.size()), y2 = to_host<float>(dy2, y0.size());
  for (int64_t s = 0; s < n_slot; ++s)
    for (int64_t r = 0; r < 2 * rows; ++r)
      ASSERT_FALSE(is_poison(y1[static_cast<size_t>(s * ldy + r)])) << "two calls left slot " << s << " row " << r;
  ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << "pair differs from two calls";
}

TEST(CudaGemvNvfp4, PairEqualsTwoCalls) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t pairs0 = gemv_nvfp4_pair_launches();
  // Qwen3-30B-A3B's expert gate/up (slab kernel, one launch), a partial last row group and
  // several items per warp, a packed-kernel shape (nb < 32: two calls), the float path.
  check_pair(GgmlType::NVFP4, true, 2048, 768, 16, 8, 1, rng);
  check_pair(GgmlType::NVFP4, true, 4096, 45, 9, 3, 5, rng);
  check_pair(GgmlType::NVFP4, true, 2048, 1000, 64, 8, 40, rng);
  const int64_t pairs1 = gemv_nvfp4_pair_launches();
  EXPECT_EQ(pairs1 - pairs0, 3) << "the slab shapes above must take the one-launch pair";
  check_pair(GgmlType::NVFP4, true, 1088, 70, 9, 3, 2, rng);
  check_pair(GgmlType::NVFP4, false, 2048, 64, 9, 3, 2, rng);
  check_pair(GgmlType::Q8_0, true, 2048, 64, 9, 3, 2, rng);
  EXPECT_EQ(gemv_nvfp4_pair_launches(), pairs1) << "packed / float / Q8_0 calls must split";
}

// ---- NVFP4 kernels (gemv_nvfp4.cu) -------------------------------------------------------

// GemvArgs::y_early (an accumulating launch reads y before its PDL wait): the same bits as
// without, on the dense one-token shapes of the slab kernel (several rows per lane, activations
// in shared memory or not, partial row groups, more items than warps) and the mma kernel (which
// ignores it). The grouped combine's early reads: check_grouped_epilogue.
TEST(CudaGemvNvfp4, EarlyResidualReadKeepsTheBits) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  struct Shape {
    int64_t rows, k;
  };
  for (const Shape sh : {Shape{4096, 4096}, Shape{4096, 14336}, Shape{45, 2048}, Shape{1, 512}, Shape{3000, 1024},
                         Shape{6144, 4096}}) {
    SCOPED_TRACE("rows " + std::to_string(sh.rows) + " k " + std::to_string(sh.k));
    const int64_t rb = row_bytes(GgmlType::NVFP4, sh.k);
    std::vector<uint8_t> w(static_cast<size_t>(rb * sh.rows));
    for (int64_t r = 0; r < sh.rows; ++r) {
      const auto row = quant::testing::random_row(GgmlType::NVFP4, sh.k, rng);
      std::copy(row.begin(), row.end(), w.begin() + r * rb);
    }
    std::vector<float> x(static_cast<size_t>(sh.k)), y0(static_cast<size_t>(sh.rows + 3));
    for (auto& v : x) v = unit(rng);
    for (auto& v : y0) v = 4.0f * unit(rng);
    const auto xq = quantize_rows(x, sh.k, sh.k, 1);
    DeviceBuffer dw = to_device(w), dxq = to_device(xq);
    std::vector<float> out[2];
    for (int early = 0; early < 2; ++early) {
      DeviceBuffer dy = to_device(y0);
      GemvArgs g;
      g.type = GgmlType::NVFP4;
      g.w = dw.as<uint8_t>();
      g.row_bytes = rb;
      g.k = sh.k;
      g.rows = sh.rows;
      g.xq = dxq.get();
      g.y = dy.as<float>();
      g.ldy = sh.rows;
      g.accumulate = true;
      g.y_early = early == 1;
      gemv(g);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      out[early] = to_host<float>(dy, y0.size());
    }
    ASSERT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0) << "y_early changed the bits";
    ASSERT_NE(std::memcmp(out[0].data(), y0.data(), static_cast<size_t>(sh.rows) * sizeof(float)), 0) << "nothing added";
  }
}

// Host-side planning, no GPU needed.
TEST(CudaGemvNvfp4, PackedRowsFillTheLanes) {
  EXPECT_EQ(gemv_nvfp4_pack_rows(12, 8, 2048), 1);  // expert down + combine: 96 blocks, 3 per lane
  EXPECT_EQ(gemv_nvfp4_pack_rows(12, 1, 2048), 8);  // expert down: 8 rows = 96 blocks
  EXPECT_EQ(gemv_nvfp4_pack_rows(12, 1, 5), 5);     // never more rows than the matrix has
  EXPECT_EQ(gemv_nvfp4_pack_rows(16, 1, 100), 2);   // 32 blocks: one per lane
  EXPECT_EQ(gemv_nvfp4_pack_rows(20, 8, 100), 0);   // 160 blocks: more than 4 per lane
  EXPECT_EQ(gemv_nvfp4_pack_rows(1, 1, 1000), 32);  // at most 32 pieces
  for (int64_t nb = 1; nb < 32; ++nb)
    for (int n_sub : {1, 2, 3, 8}) {
      const int rb = gemv_nvfp4_pack_rows(nb, n_sub, 4096);
      if (rb == 0) {
        EXPECT_GT(nb * n_sub, 32 * kNvfp4PackBlocksPerLane);
        continue;
      }
      EXPECT_LE(rb * n_sub, 32);
      EXPECT_LE(rb * n_sub * nb, 32 * kNvfp4PackBlocksPerLane);
    }
  const GemvNvfp4Plan down = gemv_nvfp4_plan(2048, 768, 1, 1, 8, true);
  EXPECT_EQ(down.kernel, 2);
  EXPECT_EQ(down.rows, 1);
  EXPECT_EQ(gemv_nvfp4_plan(2048, 768, 1, 8, 1, true).rows, 8);
  const GemvNvfp4Plan dense = gemv_nvfp4_plan(14336, 4096, 1, 1, 1, false);
  // Runs 10-11: dense one-token launches of 264+ CTAs of 16 rows (4224 rows) and k % 256 == 0
  // take the mma kernel (the slab fields stay its fallback); fewer rows (Llama-8B's wo and down:
  // slower than the slab kernel after a dependent kernel, run 11), several tokens, partial
  // steps, grouped: not. The warps / stages rule still sizes forced launches.
  EXPECT_EQ(dense.kernel, 3);
  EXPECT_EQ(dense.mma_warps, 4);
  EXPECT_EQ(dense.mma_stages, 2);
  EXPECT_EQ(gemv_nvfp4_plan(6144, 4096, 1, 1, 1, false).kernel, 3);
  EXPECT_EQ(gemv_nvfp4_plan(4224, 4096, 1, 1, 1, false).kernel, 3);
  EXPECT_EQ(gemv_nvfp4_plan(4223, 4096, 1, 1, 1, false).kernel, 1);
  EXPECT_EQ(gemv_nvfp4_plan(4096, 4096, 1, 1, 1, false).kernel, 1);
  const GemvNvfp4Plan down_mma = gemv_nvfp4_plan(4096, 14336, 1, 1, 1, false);
  EXPECT_EQ(down_mma.kernel, 1);
  EXPECT_EQ(down_mma.mma_warps, 8);
  EXPECT_EQ(down_mma.mma_stages, 3);
  const GemvNvfp4Plan qkv = gemv_nvfp4_plan(5120, 2048, 1, 1, 1, false);
  EXPECT_EQ(qkv.kernel, 3);
  EXPECT_EQ(qkv.mma_warps, 4);
  EXPECT_EQ(qkv.mma_stages, 3);
  EXPECT_TRUE(qkv.tma);     // session 13: k <= 2048 takes the warp-fed bulk-copy form
  EXPECT_FALSE(dense.tma);  // k 4096: the mma kernel
  EXPECT_EQ(gemv_nvfp4_plan(4096, 2048, 1, 1, 1, false).mma_warps, 4);  // 8 steps: 2 per warp
  EXPECT_EQ(gemv_nvfp4_plan(2048, 4096, 1, 1, 1, false).mma_warps, 8);
  EXPECT_EQ(gemv_nvfp4_plan(1024, 4096, 1, 1, 1, false).kernel, 1);
  EXPECT_EQ(gemv_nvfp4_plan(14336, 4096, 2, 1, 1, false).kernel, 1);
  EXPECT_EQ(gemv_nvfp4_plan(4096, 4160, 1, 1, 1, false).kernel, 1);
  EXPECT_NE(gemv_nvfp4_plan(4096, 4096, 1, 8, 1, true).kernel, 3);
  EXPECT_EQ(dense.rows, 4);
  EXPECT_EQ(gemv_nvfp4_plan(4096, 14336, 1, 1, 1, false).rows, 2);
  EXPECT_EQ(gemv_nvfp4_plan(7, 4096, 8, 1, 1, false).rows, 2);  // several tokens: R >= 2
  EXPECT_EQ(gemv_nvfp4_plan(768, 2048, 1, 8, 1, true).kernel, 1);  // 32 blocks: slab
  // Run 8's choices: dense single tokens stage the activations in shared memory; the expert
  // gate of one token (3072 R = 2 items: one wave at 6 blocks per SM) takes R 2 at 6 blocks.
  // Run 9: only rows up to kNvfp4XSmemMaxK elements (4096x14336 reads them from global).
  EXPECT_TRUE(dense.x_smem);
  EXPECT_EQ(dense.minb, 4);
  EXPECT_FALSE(gemv_nvfp4_plan(4096, 14336, 1, 1, 1, false).x_smem);
  EXPECT_TRUE(gemv_nvfp4_plan(4096, kNvfp4XSmemMaxK, 1, 1, 1, false).x_smem);
  EXPECT_FALSE(gemv_nvfp4_plan(4096, kNvfp4XSmemMaxK + 64, 1, 1, 1, false).x_smem);
  EXPECT_FALSE(gemv_nvfp4_plan(14336, 4096, 2, 1, 1, false).x_smem);
  const GemvNvfp4Plan gate = gemv_nvfp4_plan(768, 2048, 1, 8, 1, true);
  EXPECT_EQ(gate.rows, 2);
  EXPECT_EQ(gate.minb, 6);
  EXPECT_FALSE(gate.x_smem);
  const GemvNvfp4Plan gate64 = gemv_nvfp4_plan(768, 2048, 1, 64, 1, true);  // 8 tokens: many waves
  EXPECT_EQ(gate64.rows, 4);
  EXPECT_EQ(gate64.minb, 4);
  EXPECT_EQ(gemv_nvfp4_plan(2048, 768, 1, 1, 8, true).minb, 4);  // packed
}

// Every NVFP4 kernel and plan against the twin over odd shapes: rows not a multiple of R,
// k = 64 x odd (partial slabs, blocks not a multiple of 4: the 4-byte staging), 16-byte and
// 4-byte aligned rows, 1..8 tokens, scales, roundings, accumulate, grouped and combined.
TEST(CudaGemvNvfp4, ForcedKernelsMatchTwin) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(2024);
  struct Force {
    int kernel, rows, x_smem;
  };
  const Force forces[] = {{1, 1, 1}, {1, 1, 2}, {1, 2, 1}, {1, 2, 2}, {1, 4, 1}, {1, 4, 2}, {2, 0, 1}, {-1, 0, 0}};
  int n = 0;
  for (const Force& f : forces) {
    gemv_set_nvfp4_override(f.kernel, f.rows, f.x_smem);
    SCOPED_TRACE("nvfp4 kernel " + std::to_string(f.kernel) + " rows " + std::to_string(f.rows) + " x_smem " +
                 std::to_string(f.x_smem));
    for (int64_t k : {64, 192, 320, 2112, 2304, 4160})
      for (int64_t rows : {1, 5, 33}) {
        const int64_t n_tok = 1 + (n * 3) % kGemvMaxTokens;
        const quant::Round round = n % 5 == 3 ? quant::Round::kBF16 : n % 5 == 4 ? quant::Round::kF16 : quant::Round::kNone;
        const int64_t rb = row_bytes(GgmlType::NVFP4, k);
        const int64_t pad = n % 2 == 0 ? 0 : 16 - rb % 16 + 16;  // packed, or 16-byte aligned rows
        check_dense_q8({GgmlType::NVFP4, k, rows, n_tok, n % 4, round, pad, n % 3 == 1}, rng);
        if (::testing::Test::HasFatalFailure()) break;
        ++n;
      }
    if (::testing::Test::HasFatalFailure()) break;
    // Grouped: slab (k 2112, 2304), and the packed kernel's shapes (k 768: 12 blocks,
    // 320: 5 blocks, 4-byte staging) when the plan or the force picks it.
    for (int64_t k : {768, 320, 2304, 2112}) {
      check_grouped_epilogue(GgmlType::NVFP4, true, false, false, true, quant::Round::kNone, k, 45, 9, 8, 2, rng);
      check_grouped_epilogue(GgmlType::NVFP4, true, true, n % 2 == 0, false, quant::Round::kNone, k, 70, 9, 8, 2, rng);
      check_grouped_epilogue(GgmlType::NVFP4, true, true, true, false, quant::Round::kBF16, k, 33, 6, 3, 3, rng);
      check_grouped_epilogue(GgmlType::NVFP4, true, false, true, false, quant::Round::kF16, k, 20, 5, 2, 1, rng);
      if (::testing::Test::HasFatalFailure()) break;
      ++n;
    }
    if (::testing::Test::HasFatalFailure()) break;
  }
  // The packed kernel forced where the plan would not take it (dense: falls back).
  gemv_set_nvfp4_override(2, 0, 0);
  check_grouped_epilogue(GgmlType::NVFP4, true, true, false, false, quant::Round::kNone, 1088, 40, 9, 2, 2, rng);
  check_dense_q8({GgmlType::NVFP4, 768, 9, 3, 3, quant::Round::kNone, 0}, rng);
  gemv_set_nvfp4_override(-1, 0, 0);
}

// The device's NVFP4 decoders (inline PTX prmt, sm_89+ cvt.e4m3x2 scales) against the host
// emulation that gemv_formats_test checks against the twin's tables: every 16-bit pattern in
// both halves of a word, and every scale byte in every position beside NaN codes.
TEST(CudaGemvNvfp4, DeviceDecodersMatchHost) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(808);
  std::vector<uint32_t> in;
  for (uint32_t v = 0; v < 65536; ++v) {
    in.push_back(v | (static_cast<uint32_t>(rng()) << 16));
    in.push_back((v << 16) | (static_cast<uint32_t>(rng()) & 0xFFFFu));
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (int i = 0; i < 4; ++i)
      for (uint32_t o : {0x3A3A3A3Au, 0x7F7F7F7Fu, 0xFF00FF00u})
        in.push_back((o & ~(0xFFu << (8 * i))) | (b << (8 * i)));
  DeviceBuffer din = to_device(in), dout(in.size() * 32);
  gemv_nvfp4_decode_probe(din.as<uint32_t>(), dout.as<uint32_t>(), static_cast<int>(in.size()));
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = to_host<uint32_t>(dout, in.size() * 8);
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t want[8];
    q8_detail::e2m1x8_pn(in[i], want[0], want[1], want[2], want[3]);
    float sw[4];
    q8_detail::nvfp4_scales(in[i], sw);
    std::memcpy(want + 4, sw, 16);
    for (int j = 0; j < 8; ++j) ASSERT_EQ(out[8 * i + j], want[j]) << "word " << in[i] << " output " << j;
  }
}

// The one-token variants (byte_perm decoder; sign-split decoder at 4 / 5 / 6 / 8 blocks per SM)
// against the twin: dense odd shapes (rows not a multiple of R, k = 64 x odd, k < 2048,
// 16-byte aligned rows: the variants' launches), grouped gate/up and down + combine.
TEST(CudaGemvNvfp4, VariantsMatchTwin) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(4242);
  struct V {
    int decode, minb;
  };
  int n = 0;
  for (const V v : {V{1, 4}, V{2, 4}, V{2, 5}, V{2, 6}, V{2, 8}})
    for (int rows_per_warp : {1, 2, 4}) {
      gemv_set_nvfp4_override(1, rows_per_warp, 1);
      gemv_set_nvfp4_variant(v.decode, v.minb);
      SCOPED_TRACE("decode " + std::to_string(v.decode) + " minb " + std::to_string(v.minb) + " R " +
                   std::to_string(rows_per_warp));
      for (int64_t k : {256, 1280, 2304, 4352})
        for (int64_t rows : {3, 37}) {
          const quant::Round round = n % 4 == 1 ? quant::Round::kBF16 : n % 4 == 2 ? quant::Round::kF16 : quant::Round::kNone;
          const int64_t rb = row_bytes(GgmlType::NVFP4, k);
          check_dense_q8({GgmlType::NVFP4, k, rows, 1, n % 4, round, (16 - rb % 16) % 16 + 16 * (n % 2), n % 3 == 1},
                         rng);
          if (::testing::Test::HasFatalFailure()) break;
          ++n;
        }
      check_grouped_epilogue(GgmlType::NVFP4, true, false, false, true, quant::Round::kNone, 2048, 45, 9, 8, 1, rng);
      check_grouped_epilogue(GgmlType::NVFP4, true, true, true, false, quant::Round::kBF16, 2304, 33, 9, 4, 1, rng);
      // The packed kernel (k 768) takes the variants too.
      gemv_set_nvfp4_override(-1, 0, 0);
      check_grouped_epilogue(GgmlType::NVFP4, true, true, n % 2 == 0, false, quant::Round::kNone, 768, 70, 16, 8, 1, rng);
      check_grouped_epilogue(GgmlType::NVFP4, true, false, false, true, quant::Round::kF16, 768, 40, 9, 3, 2, rng);
      if (::testing::Test::HasFatalFailure()) break;
    }
  gemv_set_nvfp4_override(-1, 0, 0);
  gemv_set_nvfp4_variant(0, 0);
}

// The tensor-core kernel (gemv_mma.cu) against the twin: every warps x stages instance over
// rows not a multiple of its 16 (1, 17, 45), k with fewer steps than warps (256: one step)
// and steps not a multiple of the warps (768, 2304, 4352), packed and padded rows, scales,
// roundings, accumulate; the launch counter shows that it ran. Shapes it does not take (2
// tokens, k % 256 != 0, grouped) go to the other kernels, still equal to the twin.
TEST(CudaGemvNvfp4, MmaMatchesTwin) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(5150);
  struct Mv {
    int w, s;
  };
  int n = 0;
  for (const Mv mv : {Mv{4, 2}, Mv{4, 3}, Mv{4, 4}, Mv{8, 2}, Mv{8, 3}, Mv{8, 4}, Mv{16, 2}}) {
    gemv_set_nvfp4_override(3, 0, 0);
    gemv_set_nvfp4_mma(mv.w, mv.s);
    SCOPED_TRACE("mma warps " + std::to_string(mv.w) + " stages " + std::to_string(mv.s));
    for (int64_t k : {256, 768, 2304, 4352})
      for (int64_t rows : {1, 17, 45}) {
        const quant::Round round = n % 5 == 3 ? quant::Round::kBF16 : n % 5 == 4 ? quant::Round::kF16 : quant::Round::kNone;
        const int64_t before = gemv_nvfp4_mma_launches();
        check_dense_q8({GgmlType::NVFP4, k, rows, 1, n % 4, round, 16 * (n % 3), n % 3 == 1}, rng);
        if (::testing::Test::HasFatalFailure()) break;
        EXPECT_EQ(gemv_nvfp4_mma_launches(), before + 1) << "k " << k << " rows " << rows;
        ++n;
      }
    if (::testing::Test::HasFatalFailure()) break;
  }
  gemv_set_nvfp4_mma(0, 0);
  // A large tile count and k (x_frag of 28 KB), the plan's warps.
  {
    const int64_t before = gemv_nvfp4_mma_launches();
    check_dense_q8({GgmlType::NVFP4, 14336, 70, 1, 3, quant::Round::kNone, 0, false}, rng);
    EXPECT_EQ(gemv_nvfp4_mma_launches(), before + 1);
  }
  gemv_set_nvfp4_override(-1, 0, 0);
  // Routed by the plan (264+ CTAs of 16 rows, H200 run 11): 4230 rows (a partial last tile),
  // k 2048 (4 warps x 2 steps), to the mma kernel, its persistent form (gemv_mma_persist.cu,
  // the same sums) or the warp-fed bulk-copy form (gemv_mma_tma.cu; tests/cuda/gemv_persist_test.cpp);
  // 4096 rows as the plan says.
  {
    auto tc = [] { return gemv_nvfp4_mma_launches() + gemv_nvfp4_persist_launches() + gemv_nvfp4_tma_launches(); };
    const int64_t before = tc();
    check_dense_q8({GgmlType::NVFP4, 2048, 4230, 1, 2, quant::Round::kNone, 0, true}, rng);
    EXPECT_EQ(tc(), before + 1);
    const GemvNvfp4Plan pl = gemv_nvfp4_plan(4096, 2048, 1, 1, 1, false);
    check_dense_q8({GgmlType::NVFP4, 2048, 4096, 1, 2, quant::Round::kNone, 0, false}, rng);
    EXPECT_EQ(tc(), before + 1 + (pl.kernel == 3 || pl.persist || pl.tma ? 1 : 0));
  }
  gemv_set_nvfp4_override(3, 0, 0);
  // Declined shapes fall back.
  const int64_t before = gemv_nvfp4_mma_launches();
  check_dense_q8({GgmlType::NVFP4, 2304, 33, 2, 1, quant::Round::kNone, 0, false}, rng);
  check_dense_q8({GgmlType::NVFP4, 320, 33, 1, 1, quant::Round::kNone, 0, false}, rng);
  check_grouped_epilogue(GgmlType::NVFP4, true, false, false, true, quant::Round::kNone, 2048, 45, 9, 8, 1, rng);
  EXPECT_EQ(gemv_nvfp4_mma_launches(), before);
  gemv_set_nvfp4_override(-1, 0, 0);
}

TEST(CudaGemvQ8, RefusesBadCombine) {
  FT_REQUIRE_GPU();
  DeviceBuffer buf(1 << 16);
  GemvArgs g;
  g.type = GgmlType::NVFP4;
  g.k = 128;
  g.rows = 4;
  g.row_bytes = row_bytes(g.type, g.k);
  g.w = buf.as<uint8_t>();
  g.x = buf.as<float>();
  g.ldx = 128;
  g.y = buf.as<float>();
  g.slot_w = buf.as<float>();
  g.n_used = 2;
  EXPECT_THROW(gemv(g), Error);  // combine without ids
  g.ids = buf.as<int32_t>();
  g.n_tok = 3;
  EXPECT_THROW(gemv(g), Error);  // 3 slots are not whole tokens of 2
}

TEST(CudaGemv, RefusesBadArguments) {
  FT_REQUIRE_GPU();
  GemvArgs g;
  g.type = GgmlType::Q4_0;
  g.k = 64;
  g.rows = 4;
  EXPECT_THROW(gemv(g), Error);
  g.type = GgmlType::NVFP4;
  g.k = 96;  // not a multiple of the 64-element block
  EXPECT_THROW(gemv(g), Error);
  g.k = 128;
  g.n_tok = 9;
  EXPECT_THROW(gemv(g), Error);
}

TEST(CudaCheck, MacroNamesCallAndError) {
  FT_REQUIRE_GPU();
  void* p = nullptr;
  try {
    FT_CUDA_CHECK(cudaMalloc(&p, size_t{1} << 62));
    FAIL() << "cudaMalloc of 4 EiB succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("gemv_test.cpp"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaMalloc(&p, size_t{1} << 62)"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
  }
  cudaGetLastError();
  try {
    FT_CUDA_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << e.what();
  }
  std::printf("device: %s\n", device_summary(0).c_str());
}

// FT_CUDA_CACHE_CONFIG: unset applies nothing, a known value applies (the device takes it), an
// unknown one fails naming the variable and the choices.
TEST(CudaCheck, CacheConfigEnv) {
  FT_REQUIRE_GPU();
  unsetenv("FT_CUDA_CACHE_CONFIG");
  EXPECT_EQ(apply_cache_config_env(), "");
  setenv("FT_CUDA_CACHE_CONFIG", "l1", 1);
  EXPECT_EQ(apply_cache_config_env(), "l1");
  cudaFuncCache c = cudaFuncCachePreferNone;
  FT_CUDA_CHECK(cudaDeviceGetCacheConfig(&c));
  EXPECT_EQ(c, cudaFuncCachePreferL1);
  setenv("FT_CUDA_CACHE_CONFIG", "big", 1);
  try {
    apply_cache_config_env();
    ADD_FAILURE() << "FT_CUDA_CACHE_CONFIG=big was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FT_CUDA_CACHE_CONFIG=big: expected none, shared, l1 or equal"),
              std::string::npos)
        << e.what();
  }
  setenv("FT_CUDA_CACHE_CONFIG", "none", 1);
  EXPECT_EQ(apply_cache_config_env(), "none");
  unsetenv("FT_CUDA_CACHE_CONFIG");
}

TEST(CudaBuffer, RoundTripsAndMoves) {
  FT_REQUIRE_GPU();
  std::vector<int32_t> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7 - 3);
  DeviceBuffer a = to_device(v);
  DeviceBuffer b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(b.bytes(), v.size() * 4);
  EXPECT_EQ(to_host<int32_t>(b, v.size()), v);
}

}  // namespace
}  // namespace ft::cuda
