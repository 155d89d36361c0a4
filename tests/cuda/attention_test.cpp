// CUDA attention (src/cuda/attention.h) against its CPU twin engine::attention_ref, and
// kv_store against engine::KvCache::store (byte for byte).
//
// GPU tests sweep KV types x head dims x GQA ratios x (decode at pos0 = 0, 1, 300, 4000;
// prefill of 1, 17, 200 tokens from 0 and from 100), with padded strides, a cache capacity
// larger than the live length, cache rows past the live length poisoned with NaN (a kernel
// that reads them turns the output into NaN), outputs poisoned first (every element must be
// written, the padding must stay poisoned), and a CUDA graph replayed at several positions.
//
// Tolerance: the reference sums in double; the kernels in fp32 with another order. The output
// is a convex combination of V rows, so its error is bounded by a few fp32 roundings of the
// scores (dot of <= 256 terms: ~1e-6 relative) and of the sums over <= 4100 keys (~1e-5
// relative at worst), times max |v|: 3e-5 * max|v|. The bf16 tensor-core prefill multiplies
// Q split in two bf16 halves, whose residual (<= 2^-16 |q|) moves a score by ~9e-6 (one
// sigma at hd 64/128, scale 2/sqrt(d)) and the output by about as much: 6e-5 * max|v| for the
// bf16 cache (f16 halves leave 2^-22). Rounded outputs (bf16 / f16) may then land one unit of
// the rounding away: + 2^-7 (bf16) or 2^-10 (f16) of |ref| (the spacing just above a power
// of two), + 2^-24 for f16 subnormals. The
// softmax is made peaky (scale 2/sqrt(d)) so that a missing or extra key at short contexts
// (weights ~1e-3 and up) moves the output far beyond that; reading a cache row past the live
// length is caught by the NaN poison.
//
// The tests at the end need no GPU: the decode plan, the argument checks, and both kernels'
// own code on the CPU against attention_ref with the same checks: the SIMT phases thread by
// thread (attn_simt_phases.cuh simt_grid_host, then the combine), the tensor-core kernel's
// lanes in lockstep with models of mma.sync and ldmatrix (attn_mma_lane.cuh mma_grid_host).
#include "cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "cuda/act_q8.h"
#include "cuda/attn_decode_tuning.cuh"
#include "cuda/attn_plan.cuh"
#include "cuda/attn_mma_lane.cuh"
#include "cuda/attn_simt_phases.cuh"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "engine/attention.h"

namespace ft::cuda {
namespace {

#define FT_REQUIRE_GPU()                                        \
  do {                                                          \
    if (!has_device()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

constexpr uint32_t kPoison = 0x7FC0DEADu;  // a NaN no kernel computes

float poison() {
  float v;
  std::memcpy(&v, &kPoison, 4);
  return v;
}
bool is_poison(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b == kPoison;
}

engine::ActType act_of(KvType t) {
  return t == KvType::kF32 ? engine::ActType::kF32 : t == KvType::kBF16 ? engine::ActType::kBF16 : engine::ActType::kF16;
}
Round round_of(KvType t) { return t == KvType::kF32 ? Round::kNone : t == KvType::kBF16 ? Round::kBF16 : Round::kF16; }
const char* name_of(KvType t) { return t == KvType::kF32 ? "f32" : t == KvType::kBF16 ? "bf16" : "f16"; }

enum class Path { kAuto, kDecode, kPrefill, kPrefillSimt };
const char* name_of(Path p) {
  return p == Path::kAuto ? "auto" : p == Path::kDecode ? "decode" : p == Path::kPrefill ? "prefill" : "prefill-simt";
}

struct Case {
  KvType kv;
  int64_t d, n_head, n_head_kv, n_tok, pos0;
  Path path;
  int64_t extra_ctx = 37;  // cache rows beyond the live length (grids are sized from n_ctx)
  // Workspace zeroed once by attention_workspace_init and AttnArgs::ws_zeroed set; otherwise
  // it starts as 0xFF garbage and the decode call must reset its own ticket counters.
  bool zeroed = true;
};

std::string describe(const Case& c) {
  return std::string(name_of(c.kv)) + " d=" + std::to_string(c.d) + " heads=" + std::to_string(c.n_head) + "/" +
         std::to_string(c.n_head_kv) + " n_tok=" + std::to_string(c.n_tok) + " pos0=" + std::to_string(c.pos0) +
         " path=" + name_of(c.path) + " n_ctx=+" + std::to_string(c.extra_ctx) + (c.zeroed ? "" : " ws=garbage");
}

// The test's fixture for one shape: host data, the CPU cache, and the device cache filled
// through kv_store in two calls (rows before pos0, then the query tokens' rows).
struct Fixture {
  Case c;
  int64_t n_ctx, kv_dim, n_kv, ldq, ldo, ldkv;
  std::vector<float> q, k, v;
  engine::KvCache cpu;
  DeviceBuffer dk, dv, dq, dpos;

  Fixture(const Case& cc, std::mt19937& rng)
      : c(cc),
        n_ctx(cc.pos0 + cc.n_tok + cc.extra_ctx),
        kv_dim(cc.n_head_kv * cc.d),
        n_kv(cc.pos0 + cc.n_tok),
        ldq(cc.n_head * cc.d + 8),
        ldo(cc.n_head * cc.d + 16),
        ldkv(cc.n_head_kv * cc.d + 4),
        cpu(act_of(cc.kv), n_ctx, {kv_dim}) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    q.resize(static_cast<size_t>(c.n_tok * ldq));
    k.resize(static_cast<size_t>(n_kv * ldkv));
    v.resize(static_cast<size_t>(n_kv * ldkv));
    for (auto& x : q) x = nd(rng);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    cpu.store(0, 0, n_kv, k.data(), ldkv, v.data(), ldkv);

    const size_t cache_bytes = static_cast<size_t>(n_ctx * kv_dim * cpu.esize());
    // 0xFF bytes are a NaN in f32, bf16 and f16: rows past the live length must never be used.
    std::vector<uint8_t> nan_bytes(cache_bytes, 0xFF);
    dk = to_device(nan_bytes);
    dv = to_device(nan_bytes);
    dq = to_device(q);
    dpos = DeviceBuffer(sizeof(int32_t));
    const DeviceBuffer dkin = to_device(k), dvin = to_device(v);
    for (int part = 0; part < 2; ++part) {
      const int32_t p0 = part == 0 ? 0 : static_cast<int32_t>(c.pos0);
      const int64_t n = part == 0 ? c.pos0 : c.n_tok;
      set_pos(p0);
      kv_store(c.kv, dk.get(), dv.get(), kv_dim, kv_dim, dkin.as<float>() + p0 * ldkv, ldkv,
               dvin.as<float>() + p0 * ldkv, ldkv, n, dpos.as<int32_t>(), nullptr);
    }
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    set_pos(static_cast<int32_t>(c.pos0));
  }

  void set_pos(int32_t p) { dpos.upload(&p, sizeof(p)); }

  AttnArgs args(float* out) const {
    AttnArgs a;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim_k = a.head_dim_v = c.d;
    a.scale = 2.0f / std::sqrt(static_cast<float>(c.d));
    a.q = dq.as<float>();
    a.ldq = ldq;
    a.n_tok = c.n_tok;
    a.d_pos = dpos.as<int32_t>();
    a.n_ctx = n_ctx;
    a.kv_type = c.kv;
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.out = out;
    a.ldo = ldo;
    a.round = round_of(c.kv);
    return a;
  }

  engine::AttnShape shape() const {
    return engine::AttnShape{c.n_head, c.n_head_kv, c.d, c.d, 2.0f / std::sqrt(static_cast<float>(c.d))};
  }
};

// kv_store wrote exactly engine::KvCache::store's bytes for the live rows, nothing after them.
void check_cache(const Fixture& s) {
  const size_t row_bytes = static_cast<size_t>(s.kv_dim * s.cpu.esize());
  std::vector<uint8_t> gk(static_cast<size_t>(s.n_ctx) * row_bytes), gv(gk.size());
  s.dk.download(gk.data(), gk.size());
  s.dv.download(gv.data(), gv.size());
  for (int64_t r = 0; r < s.n_ctx; ++r) {
    const uint8_t* a = gk.data() + r * row_bytes;
    const uint8_t* b = gv.data() + r * row_bytes;
    if (r < s.n_kv) {
      ASSERT_EQ(std::memcmp(a, s.cpu.k_row(0, r), row_bytes), 0) << "K row " << r << " differs from KvCache";
      ASSERT_EQ(std::memcmp(b, s.cpu.v_row(0, r), row_bytes), 0) << "V row " << r << " differs from KvCache";
    } else {
      ASSERT_TRUE(std::all_of(a, a + row_bytes, [](uint8_t x) { return x == 0xFF; })) << "K row " << r << " written";
      ASSERT_TRUE(std::all_of(b, b + row_bytes, [](uint8_t x) { return x == 0xFF; })) << "V row " << r << " written";
    }
  }
}

double tolerance(KvType t, double vmax, double ref) {
  const double ulp = t == KvType::kBF16 ? std::ldexp(1.0, -7) : t == KvType::kF16 ? std::ldexp(1.0, -10) : 0.0;
  const double sub = t == KvType::kF16 ? std::ldexp(1.0, -24) : 0.0;
  const double coef = t == KvType::kBF16 ? 6e-5 : 3e-5;
  return coef * vmax + ulp * std::fabs(ref) + sub;
}

// Runs the chosen path on s (at position pos, n_tok queries) and compares with attention_ref.
void check_attention(Fixture& s, Path path, int64_t pos) {
  const Case& c = s.c;
  const int64_t rows = c.n_tok;
  DeviceBuffer dout = to_device(std::vector<float>(static_cast<size_t>(rows * s.ldo), poison()));
  const size_t ws_bytes = attention_workspace_bytes(c.n_head, c.n_tok, s.n_ctx, c.d);
  DeviceBuffer ws(ws_bytes > 0 ? ws_bytes : 16);
  FT_CUDA_CHECK(cudaMemset(ws.get(), 0xFF, ws.bytes()));
  if (c.zeroed) attention_workspace_init(ws.get(), ws.bytes(), nullptr);
  s.set_pos(static_cast<int32_t>(pos));
  AttnArgs a = s.args(dout.as<float>());
  a.n_tok = c.n_tok;
  a.ws_zeroed = c.zeroed;
  attention_set_prefill_override(path == Path::kPrefillSimt ? 1 : 0);
  if (path == Path::kAuto) attention(a, ws.get(), nullptr);
  if (path == Path::kDecode) attention_decode(a, ws.get(), nullptr);
  if (path == Path::kPrefill || path == Path::kPrefillSimt) attention_prefill(a, nullptr);
  attention_set_prefill_override(0);
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = to_host<float>(dout, static_cast<size_t>(rows * s.ldo));
  if (path == Path::kDecode || (path == Path::kAuto && c.n_tok <= kAttnDecodeMaxTokens)) {
    // A second call on the same workspace (the tickets were left at zero) gives the same bits:
    // the merge order does not depend on which block finishes last.
    DeviceBuffer dout2 = to_device(std::vector<float>(static_cast<size_t>(rows * s.ldo), poison()));
    a.out = dout2.as<float>();
    a.ws_zeroed = true;
    attention_decode(a, ws.get(), nullptr);
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto again = to_host<float>(dout2, static_cast<size_t>(rows * s.ldo));
    ASSERT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)), 0)
        << "a second decode call differs (tickets not reset, or a non-deterministic merge)";
    // The dedicated kernel's keys staged in shared memory before the PDL wait or read in the key
    // loop, and an odd count staged (part of a chunk): the same values in the same order, the
    // same bits.
    for (int64_t stage : {int64_t{0}, int64_t{7}}) {
      attention_set_decode_stage(stage);
      attention_decode(a, ws.get(), nullptr);
      attention_set_decode_stage(-1);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      const auto staged = to_host<float>(dout2, static_cast<size_t>(rows * s.ldo));
      ASSERT_EQ(std::memcmp(got.data(), staged.data(), got.size() * sizeof(float)), 0)
          << "decode with " << stage << " staged keys differs from the default's";
    }
  }

  std::vector<float> ref(static_cast<size_t>(rows * s.ldo), 0.0f);
  engine::attention_ref(s.shape(), s.cpu, 0, s.q.data(), s.ldq, c.n_tok, pos, ref.data(), s.ldo, act_of(c.kv));
  // max |v| over the rows the queries see (as stored).
  double vmax = 0;
  std::vector<float> vrow(static_cast<size_t>(s.kv_dim));
  for (int64_t r = 0; r < pos + c.n_tok; ++r) {
    s.cpu.load_v(0, r, 0, s.kv_dim, vrow.data());
    for (float x : vrow) vmax = std::max(vmax, static_cast<double>(std::fabs(x)));
  }
  const int64_t width = c.n_head * c.d;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < s.ldo; ++i) {
      const float g = got[static_cast<size_t>(t * s.ldo + i)];
      if (i >= width) {
        ASSERT_TRUE(is_poison(g)) << "wrote padding: token " << t << " column " << i;
        continue;
      }
      const float r = ref[static_cast<size_t>(t * s.ldo + i)];
      ASSERT_FALSE(is_poison(g)) << "token " << t << " head " << i / c.d << " column " << i % c.d << " not written";
      ASSERT_TRUE(std::isfinite(g)) << "token " << t << " head " << i / c.d << " column " << i % c.d << " = " << g;
      ASSERT_LE(std::fabs(static_cast<double>(g) - r), tolerance(c.kv, vmax, r))
          << "token " << t << " head " << i / c.d << " column " << i % c.d << " got " << g << " want " << r;
    }
}

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  Fixture s(c, rng);
  check_cache(s);
  if (::testing::Test::HasFatalFailure()) return;
  check_attention(s, c.path, c.pos0);
}

const KvType kKvTypes[] = {KvType::kF32, KvType::kBF16, KvType::kF16};
const int64_t kDims[] = {32, 64, 128, 256};
// (n_head, n_head_kv): MHA, GQA 4 and 8 (Llama-8B, Qwen3-30B-A3B), 6 and 3 (not powers of 2).
const int64_t kHeads[][2] = {{4, 4}, {8, 2}, {16, 2}, {12, 2}, {3, 1}};

TEST(CudaAttention, DecodeMatchesRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(7);
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (const auto& hh : kHeads)
        for (int64_t pos0 : {0, 1, 300, 4000})
          for (int64_t n_tok : {1, 3, 8}) {
            if (pos0 == 4000 && n_tok == 3) continue;  // the long context is the slow part of the reference
            run_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kDecode}, rng);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

TEST(CudaAttention, PrefillMatchesRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(8);
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (const auto& hh : kHeads)
        for (int64_t pos0 : {0, 100})
          for (int64_t n_tok : {1, 17, 200}) {
            if (n_tok == 200 && hh[0] > 8) continue;  // reference time; the ratios are covered below 200
            run_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kPrefill}, rng);
            if (::testing::Test::HasFatalFailure()) return;
            if (t != KvType::kF32) {  // the SIMT kernel also serves 16-bit caches when forced
              run_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kPrefillSimt}, rng);
              if (::testing::Test::HasFatalFailure()) return;
            }
          }
}

// Sets the decode kernel choice for one scope (tests run in one process).
struct DecodeOverride {
  DecodeOverride(int mode, int max_rows = 0, int blocks_per_sm = 0, int keys_per_slot = 0) {
    attention_set_decode_override(mode, max_rows, blocks_per_sm, keys_per_slot);
  }
  ~DecodeOverride() { attention_set_decode_override(0); }
};

// The dedicated decode kernel (the default decode path up to 4 tokens) over head dims x GQA groups 1..16 x
// token counts x cache types x live lengths around the chunk unit and the block's key step
// (1, 63, 64, 65, 300, 4097 and a cache filled to n_ctx), half of them on a garbage workspace.
TEST(CudaAttention, DecodeKernelSweep) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(11);
  DecodeOverride always(2);  // the dedicated kernel also at n_tok 8
  const int64_t groups[][2] = {{2, 2}, {4, 2}, {8, 1}, {16, 1}, {24, 3}, {32, 8}, {32, 4}};
  int n = 0;
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (int64_t live : {1, 63, 64, 65, 300, 4097})
        for (int64_t n_tok : {1, 2, 8}) {
          if (n_tok > live) continue;
          if (live == 4097 && n_tok == 2) continue;  // reference time
          const auto& hh = groups[n++ % 7];
          const bool full = n % 5 == 0;  // live keys fill the cache
          Case c{t, d, hh[0], hh[1], n_tok, live - n_tok, Path::kDecode, full ? 0 : 37};
          c.zeroed = n % 2 == 0;
          run_case(c, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// The tensor-core decode kernel (mode 3): one token, 16-bit caches, head dim 128, GQA groups
// 1..8, live lengths around the 16-key tile, the 64-key chunk and several chunks a split, caches
// filled to n_ctx or not, at the default plan (a least chunk of 256 keys: fewer, longer chunks below
// ~8k keys) and without a least chunk; groups above 8, other head dims and f32 caches fall back (checked too).
TEST(CudaAttention, MmaDecodeMatchesRef) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(21);
  DecodeOverride mma(3);
  const int64_t groups[][2] = {{8, 1}, {32, 4}, {32, 8}, {4, 4}, {6, 2}, {16, 1}};
  int n = 0;
  auto sweep = [&] {
    for (KvType t : {KvType::kF16, KvType::kBF16})
      for (int64_t live : {1, 5, 16, 17, 63, 64, 65, 300, 4097, 9000})
        for (const auto& hh : groups) {
          const bool full = ++n % 3 == 0;
          run_case({t, 128, hh[0], hh[1], 1, live - 1, Path::kDecode, full ? 0 : 37}, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
  };
  for (int64_t min_chunk : {int64_t{-1}, int64_t{0}}) {  // the default (a least chunk of 256 keys), none
    SCOPED_TRACE("least chunk " + std::to_string(min_chunk));
    attention_set_mma_decode(-1, -1, -1, min_chunk);
    sweep();
    attention_set_mma_decode(-1, -1, -1, -1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  run_case({KvType::kF32, 128, 8, 1, 1, 299, Path::kDecode}, rng);  // fallback: f32 cache
  run_case({KvType::kF16, 64, 8, 1, 1, 299, Path::kDecode}, rng);   // fallback: head dim 64
}

// Both plans of MmaDecodeMatchesRef give correct outputs, so that test cannot tell whether a least
// chunk took effect. Here the kernel's own writes count its live chunks: every live chunk of every
// query head writes its 128 partial sums and its (m, l) pair into the workspace and nothing else
// there is written, so on a workspace poisoned with 0xFF words the words written are
// n_head x chunks x 130. At a least chunk of 256 keys (kMmaDecodeMinChunk's default) that is
// ceil(live / 256) chunks; without one the plan cuts shorter chunks at these lengths (128 keys), so more.
TEST(CudaAttention, MmaDecodeLeastChunkTakesEffect) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(23);
  DecodeOverride mma(3);
  for (int64_t live : {300, 1000, 4097}) {
    const Case c{KvType::kF16, 128, 32, 8, 1, live - 1, Path::kDecode, 37};
    SCOPED_TRACE(describe(c));
    Fixture s(c, rng);
    const size_t ws_bytes = attention_workspace_bytes(c.n_head, 1, s.n_ctx, c.d);
    DeviceBuffer ws(ws_bytes);
    DeviceBuffer dout(static_cast<size_t>(s.ldo) * sizeof(float));
    auto written_words = [&](int64_t min_chunk) {
      const std::vector<uint8_t> ff(ws_bytes, 0xFF);
      ws.upload(ff.data(), ff.size());
      AttnArgs a = s.args(dout.as<float>());
      a.ws_zeroed = true;
      attention_set_mma_decode(-1, -1, -1, min_chunk);
      attention_decode(a, ws.get(), nullptr);
      attention_set_mma_decode(-1, -1, -1, -1);
      FT_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint32_t> w(ws_bytes / 4);
      ws.download(w.data(), w.size() * 4);
      return static_cast<int64_t>(std::count_if(w.begin(), w.end(), [](uint32_t x) { return x != 0xFFFFFFFFu; }));
    };
    const int64_t per_chunk = c.n_head * (128 + 2), least = written_words(256), none = written_words(0);
    EXPECT_EQ(least, per_chunk * ((live + 255) / 256)) << "chunks at a least chunk of 256 keys";
    // The default plan is kMmaDecodeMinChunk's, whatever the tuning table sets it to.
    EXPECT_EQ(written_words(-1), written_words(attn_detail::kMmaDecodeMinChunk))
        << "the default plan is not the least chunk of kMmaDecodeMinChunk keys";
    EXPECT_EQ(none % per_chunk, 0) << "the plan without a least chunk wrote part of a chunk";
    EXPECT_GT(none, least) << "the plan without a least chunk cut no shorter chunks than 256 keys";
  }
}

// The tensor-core kernel's K/V ring (attention_set_mma_decode stages 2: a warp's tiles through
// shared memory, the first issued before the PDL wait) against the kernel loading one tile at a time
// into registers (stages 0): the same values reach the same arithmetic, so the same bits -- at live
// lengths inside one tile, around a chunk and over many tiles a warp, the new key in every position
// of its tile, caches filled to n_ctx or not. MmaDecodeMatchesRef checks the default against the reference.
TEST(CudaAttention, MmaDecodeStagesEqualBitwise) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(22);
  DecodeOverride mma(3);
  const int64_t groups[][2] = {{32, 8}, {32, 4}, {6, 2}, {8, 1}};
  int n = 0;
  for (KvType t : {KvType::kF16, KvType::kBF16})
    for (int64_t live : {1, 15, 16, 17, 64, 65, 129, 300, 1000, 4097, 9000}) {
      const auto& hh = groups[n % 4];
      const Case c{t, 128, hh[0], hh[1], 1, live - 1, Path::kDecode, ++n % 3 == 0 ? 0 : 37};
      SCOPED_TRACE(describe(c));
      Fixture s(c, rng);
      const size_t n_out = static_cast<size_t>(s.ldo);
      DeviceBuffer ws(attention_workspace_bytes(c.n_head, 1, s.n_ctx, c.d));
      attention_workspace_init(ws.get(), ws.bytes(), nullptr);
      std::vector<float> first;
      const int plans[][2] = {{0, 1}, {2, 1}, {2, 2}};  // stages, tiles before the wait
      for (const auto& pl : plans) {
        DeviceBuffer dout = to_device(std::vector<float>(n_out, poison()));
        AttnArgs a = s.args(dout.as<float>());
        a.ws_zeroed = true;
        attention_set_mma_decode(pl[0], -1, pl[1]);
        attention_decode(a, ws.get(), nullptr);
        attention_set_mma_decode(-1, -1, -1);
        FT_CUDA_CHECK(cudaDeviceSynchronize());
        auto got = to_host<float>(dout, n_out);
        ASSERT_FALSE(is_poison(got[0])) << "stages " << pl[0] << " wrote no output";
        if (first.empty())
          first = std::move(got);
        else
          ASSERT_EQ(std::memcmp(first.data(), got.data(), n_out * sizeof(float)), 0)
              << "stages " << pl[0] << ", " << pl[1] << " before the wait, differ from stages 0";
      }
    }
}

// Fewer rows per block than the group has (several row blocks per KV head, each with its own
// ticket), small and large grids, and the SIMT split-K path kept behind the override.
TEST(CudaAttention, DecodeOverrides) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(12);
  for (int rows : {1, 2, 4, 8})
    for (int per_sm : {1, 16}) {
      DecodeOverride o(2, rows, per_sm);
      for (int64_t live : {5, 300, 2100}) {
        run_case({KvType::kBF16, 128, 32, 4, 3, live - 3, Path::kDecode}, rng);
        if (::testing::Test::HasFatalFailure()) return;
        run_case({KvType::kF16, 64, 16, 1, 1, live - 1, Path::kDecode, 0}, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  // The keys-per-slot variants the benchmark sweeps (16-bit caches at head dim 128), and the
  // values no kernel is built for refused.
  EXPECT_THROW(attention_set_decode_override(2, 1, 0, 8), std::exception);
  attention_set_decode_override(0);
  for (int rows : {1, 4, 8})
    for (int nk : {2, 4}) {
      DecodeOverride o(2, rows, 0, nk);
      for (int64_t live : {7, 300, 2100}) {
        run_case({nk == 2 ? KvType::kF16 : KvType::kBF16, 128, 32, 4, 2, live - 2, Path::kDecode}, rng);
        if (::testing::Test::HasFatalFailure()) return;
        run_case({KvType::kF16, 128, 32, 4, 1, live - 1, Path::kDecode}, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  DecodeOverride simt(1);
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (int64_t pos0 : {0, 300}) {
        run_case({t, d, 8, 2, 3, pos0, Path::kDecode}, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// attention() picks a path by n_tok; a cache far larger than the live length (many idle
// decode chunks) and a query batch that fills the cache exactly.
TEST(CudaAttention, DispatchAndCapacity) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(9);
  for (KvType t : kKvTypes)
    for (int64_t n_tok : {1, 8, 9, 64}) {
      run_case({t, 128, 32, 8, n_tok, 5, Path::kAuto, 9000}, rng);
      if (::testing::Test::HasFatalFailure()) return;
      run_case({t, 128, 32, 4, n_tok, 700, Path::kAuto, 0}, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// One attention() call captured on its own stream as a CUDA graph, replayed by launch().
struct CapturedAttention {
  cudaStream_t st = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CapturedAttention(const AttnArgs& a, void* ws) {
    FT_CUDA_CHECK(cudaStreamCreate(&st));
    FT_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    attention(a, ws, st);
    FT_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    FT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  }
  ~CapturedAttention() {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(st);
  }
  CapturedAttention(const CapturedAttention&) = delete;
  CapturedAttention& operator=(const CapturedAttention&) = delete;
  void launch() const { FT_CUDA_CHECK(cudaGraphLaunch(exec, st)); }
};

// One query row (one's q) at position pos into s's cache: got within tolerance of attention_ref.
void expect_row_near_ref(const Fixture& s, const Fixture& one, int64_t pos, const std::vector<float>& got) {
  std::vector<float> ref(static_cast<size_t>(one.ldo));
  engine::attention_ref(s.shape(), s.cpu, 0, one.q.data(), one.ldq, 1, pos, ref.data(), one.ldo, act_of(s.c.kv));
  for (int64_t i = 0; i < s.c.n_head * s.c.d; ++i)
    ASSERT_LE(std::fabs(static_cast<double>(got[static_cast<size_t>(i)]) - ref[static_cast<size_t>(i)]),
              tolerance(s.c.kv, 6.0, ref[static_cast<size_t>(i)]))
        << "column " << i;
}

// One captured graph (kv_store + decode attention) replayed at positions read on the device:
// the grid must not depend on the position.
TEST(CudaAttention, GraphReplayFollowsDevicePosition) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(10);
  for (KvType t : kKvTypes) {
    const Case c{t, 128, 16, 2, 1, 0, Path::kAuto, 0};
    SCOPED_TRACE(describe(c));
    const int64_t n_ctx = 2048;
    Fixture s({t, 128, 16, 2, n_ctx, 0, Path::kPrefill, 0}, rng);  // all n_ctx rows live
    Fixture one(c, rng);  // one query row (its q), attending into s's cache
    DeviceBuffer dout = to_device(std::vector<float>(static_cast<size_t>(one.ldo), poison()));
    DeviceBuffer ws(attention_workspace_bytes(c.n_head, 1, n_ctx, c.d));
    AttnArgs a = s.args(dout.as<float>());
    a.q = one.dq.as<float>();
    a.ldq = one.ldq;
    a.n_tok = 1;
    a.ldo = one.ldo;
    // f32: the captured call resets its tickets (a memset node); bf16/f16: a zeroed workspace,
    // so every replay relies on the previous one leaving the tickets at zero.
    if (t != KvType::kF32) {
      attention_workspace_init(ws.get(), ws.bytes(), nullptr);
      a.ws_zeroed = true;
    } else {
      FT_CUDA_CHECK(cudaMemset(ws.get(), 0xFF, ws.bytes()));
    }

    const CapturedAttention g(a, ws.get());
    for (int32_t pos : {0, 63, 64, 65, 700, 2047, 2047, 31, 1000}) {
      SCOPED_TRACE("pos " + std::to_string(pos));
      s.set_pos(pos);
      g.launch();
      FT_CUDA_CHECK(cudaStreamSynchronize(g.st));
      expect_row_near_ref(s, one, pos, to_host<float>(dout, static_cast<size_t>(one.ldo)));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// AttnArgs::max_keys: a graph captured with a bound on the live keys (the session's one-token steps
// below the tensor-core kernel's depth: 255) launches fewer blocks and, replayed at every position
// the bound allows -- one chunk, two chunks, the last key -- gives the bits of the unbounded call.
// A live chunk left out of the grid would never be merged (and would leave its tickets set).
TEST(CudaAttention, KeyBoundTrimsTheDecodeGridNotTheSums) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(14);
  const int64_t n_ctx = 2048, bound = 255;
  for (KvType t : {KvType::kBF16, KvType::kF16}) {
    for (const int64_t* h : {kHeads[1], kHeads[2]}) {
      const Case c{t, 128, h[0], h[1], 1, 0, Path::kAuto, 0};
      SCOPED_TRACE(describe(c));
      Fixture s({t, 128, h[0], h[1], n_ctx, 0, Path::kPrefill, 0}, rng);  // all n_ctx rows live
      Fixture one(c, rng);
      const size_t n_out = static_cast<size_t>(one.ldo);
      DeviceBuffer dref = to_device(std::vector<float>(n_out, poison()));
      DeviceBuffer dout = to_device(std::vector<float>(n_out, poison()));
      DeviceBuffer ws(attention_workspace_bytes(c.n_head, 1, n_ctx, c.d));
      attention_workspace_init(ws.get(), ws.bytes(), nullptr);
      AttnArgs a = s.args(dref.as<float>());
      a.q = one.dq.as<float>();
      a.ldq = one.ldq;
      a.n_tok = 1;
      a.ldo = one.ldo;
      a.ws_zeroed = true;
      AttnArgs b = a;
      b.out = dout.as<float>();
      b.max_keys = bound;

      const CapturedAttention g(b, ws.get());
      const int64_t bounded_blocks = attention_decode_grid_blocks();
      attention(a, ws.get(), g.st);
      FT_CUDA_CHECK(cudaStreamSynchronize(g.st));
      ASSERT_LT(bounded_blocks, attention_decode_grid_blocks()) << "the bound did not shrink the grid";

      for (int32_t pos : {0, 1, 126, 127, 128, 200, 254, 3}) {
        SCOPED_TRACE("pos " + std::to_string(pos));
        s.set_pos(pos);
        g.launch();
        attention(a, ws.get(), g.st);
        FT_CUDA_CHECK(cudaStreamSynchronize(g.st));
        const auto got = to_host<float>(dout, n_out), want = to_host<float>(dref, n_out);
        for (int64_t i = 0; i < c.n_head * c.d; ++i)
          ASSERT_FALSE(is_poison(got[static_cast<size_t>(i)])) << "column " << i << " not written";
        ASSERT_EQ(std::memcmp(got.data(), want.data(), n_out * sizeof(float)), 0)
            << "the bounded grid's output differs from the unbounded call's";
        expect_row_near_ref(s, one, pos, got);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// AttnArgs::out_q8: the decode kernel's Q8 epilogue (single chunk, one merge group, several
// groups; one and several row blocks per KV head) and the paths that quantise after
// themselves (SIMT decode at 8 tokens, prefill) write exactly quantize_act_q8's bytes of the
// output -- also against the host twin -- and the output itself is unchanged.
TEST(CudaAttention, DecodeQ8EpilogueEqualsQuantize) {
  FT_REQUIRE_GPU();
  std::mt19937 rng(13);
  const int64_t heads[][2] = {{8, 2}, {32, 8}, {3, 1}, {16, 2}};
  int n = 0;
  // Mode 3: the tensor-core decode kernel where it applies (1 token, 16-bit caches, head dim 128).
  for (int mode : {0, 3}) {
    for (KvType t : kKvTypes)
      for (int64_t d : kDims)
        for (int64_t live : {1, 300, 4097})
          for (int64_t n_tok : {1, 2, 4, 8, 17}) {
            if (n_tok > live || (live == 4097 && n_tok > 2 && n_tok != 17)) continue;
            if (mode == 3 && (n_tok != 1 || d != 128)) continue;
            const auto& hh = heads[n++ % 4];
            const Case c{t, d, hh[0], hh[1], n_tok, live - n_tok, Path::kAuto};
            SCOPED_TRACE(describe(c) + (n % 3 == 0 ? " rows 1" : "") + " mode " + std::to_string(mode));
            DecodeOverride rows(mode, n % 3 == 0 ? 1 : 0);  // several row blocks per KV head
            Fixture s(c, rng);
            const int64_t k = c.n_head * c.d;
            const size_t out_n = static_cast<size_t>(n_tok * s.ldo), qb = act_q8_bytes(k, n_tok);
            DeviceBuffer o1 = to_device(std::vector<float>(out_n, poison()));
            DeviceBuffer o2 = to_device(std::vector<float>(out_n, poison()));
            DeviceBuffer q1(qb), q2(qb);
            FT_CUDA_CHECK(cudaMemset(q1.get(), 0xAB, qb));
            FT_CUDA_CHECK(cudaMemset(q2.get(), 0xAB, qb));
            DeviceBuffer ws(attention_workspace_bytes(c.n_head, n_tok, s.n_ctx, c.d) + 16);
            attention_workspace_init(ws.get(), ws.bytes(), nullptr);
            AttnArgs a = s.args(o1.as<float>());
            a.ws_zeroed = true;
            attention(a, ws.get(), nullptr);
            quantize_act_q8(o1.as<float>(), s.ldo, k, n_tok, q1.get(), nullptr);
            a.out = o2.as<float>();
            a.out_q8 = q2.get();
            attention(a, ws.get(), nullptr);
            FT_CUDA_CHECK(cudaDeviceSynchronize());
            const auto y1 = to_host<float>(o1, out_n), y2 = to_host<float>(o2, out_n);
            ASSERT_EQ(std::memcmp(y1.data(), y2.data(), out_n * 4), 0) << "the output changed with out_q8";
            std::vector<uint8_t> b1(qb), b2(qb);
            q1.download(b1.data(), qb);
            q2.download(b2.data(), qb);
            for (size_t i = 0; i < qb; ++i) ASSERT_EQ(b1[i], b2[i]) << "Q8 byte " << i << " of " << qb;
            std::vector<uint8_t> host(static_cast<size_t>(act_q8_row_bytes(k)));
            for (int64_t tt = 0; tt < n_tok; ++tt) {
              quantize_act_q8_row_ref(y1.data() + tt * s.ldo, k, host.data());
              const uint8_t* row = b2.data() + tt * act_q8_row_bytes(k);
              ASSERT_EQ(std::memcmp(host.data(), row, static_cast<size_t>(k + k / 4)), 0)
                  << "token " << tt << ": Q8 row differs from the host twin";
            }
          }
  }
}

// ---- no GPU needed below ----

TEST(CudaAttentionPlan, ChunksCoverLiveKeysInWholeUnits) {
  using namespace attn_detail;
  for (int64_t unit : {kChunkUnit, kDecodeUnit})
    for (int64_t splits = 1; splits <= kMaxSplits; splits += (splits < 8 ? 1 : 7))
      for (int64_t n_kv = 1; n_kv <= 40000; n_kv += (n_kv < 300 ? 1 : 97)) {
        const DecodePlan p = decode_plan(n_kv, splits, unit);
        ASSERT_EQ(p.chunk % unit, 0) << n_kv << " " << splits;
        ASSERT_GE(p.n_chunks, 1);
        ASSERT_LE(p.n_chunks, splits) << n_kv << " " << splits;
        ASSERT_LT((p.n_chunks - 1) * p.chunk, n_kv) << "an empty chunk at n_kv " << n_kv;
        ASSERT_GE(p.n_chunks * p.chunk, n_kv) << "keys left out at n_kv " << n_kv;
        // The smallest whole-unit chunk that fits the splits: one unit less would need more.
        if (p.chunk > unit) {
          ASSERT_GT(ceil_div(n_kv, p.chunk - unit), splits);
        }
      }
  // 300 live keys spread over ten blocks per KV head once the grid has the splits.
  EXPECT_EQ(decode_plan(300, 128, kDecodeUnit).n_chunks, 10);
  // With a least chunk: the same invariants, chunks of at least that many keys, and no more
  // chunks than without it.
  for (int64_t min_chunk : {int64_t{0}, kDecodeUnit, kDecodeMinChunk, 4 * kDecodeMinChunk})
    for (int64_t splits = 1; splits <= kMaxSplits; splits += (splits < 8 ? 1 : 7))
      for (int64_t n_kv = 1; n_kv <= 20000; n_kv += (n_kv < 300 ? 1 : 97)) {
        const DecodePlan p = decode_plan_min(n_kv, splits, kDecodeUnit, min_chunk);
        ASSERT_EQ(p.chunk % kDecodeUnit, 0);
        ASSERT_GE(p.chunk, min_chunk);
        ASSERT_GE(p.n_chunks, 1);
        ASSERT_LE(p.n_chunks, decode_plan(n_kv, splits, kDecodeUnit).n_chunks) << n_kv << " " << splits;
        ASSERT_LT((p.n_chunks - 1) * p.chunk, n_kv) << "an empty chunk at n_kv " << n_kv;
        ASSERT_GE(p.n_chunks * p.chunk, n_kv) << "keys left out at n_kv " << n_kv;
      }
  EXPECT_EQ(decode_plan_min(128, 33, kDecodeUnit, kDecodeMinChunk).n_chunks, 1);
  EXPECT_EQ(decode_plan_min(129, 33, kDecodeUnit, kDecodeMinChunk).n_chunks, 2);
}

TEST(CudaAttentionPlan, SplitsAndWorkspace) {
  using namespace attn_detail;
  EXPECT_EQ(decode_splits(64, 8, 1, 528), 1);     // one unit of cache: one split
  EXPECT_EQ(decode_splits(100, 8, 1, 528), 2);
  EXPECT_EQ(decode_splits(1 << 20, 8, 1, 528), 66);  // fills 4 blocks x 132 SMs
  EXPECT_EQ(decode_splits(1 << 20, 1, 1, 100000), kMaxSplits);
  EXPECT_EQ(decode_splits(1 << 20, 64, 4, 16), 1);
  for (int64_t n_ctx : {1, 63, 64, 65, 4096, 100000})
    for (int64_t n_head_kv : {1, 2, 8})
      for (int64_t n_tok = 1; n_tok <= kAttnDecodeMaxTokens; ++n_tok) {
        const int64_t n_head = 4 * n_head_kv, d = 128;
        const int64_t rb = ceil_div(n_tok * 4, kRowsPerBlock);
        const int64_t splits = decode_splits(n_ctx, n_head_kv, rb, 4 * 132);
        // The dedicated kernel at one row per block and a huge grid: the most splits it plans.
        const int64_t splits2 = decode_splits(n_ctx, n_head_kv, n_tok * 4, 1 << 20, kDecodeUnit);
        const size_t need = kDecodeTicketBytes + static_cast<size_t>(n_tok * n_head * splits * (d + 2)) * 4;
        const size_t need2 =
            kDecodeTicketBytes + static_cast<size_t>(n_tok * n_head * (splits2 + kDecodeMaxGroups) * (d + 2)) * 4;
        EXPECT_GE(attention_workspace_bytes(n_head, n_tok, n_ctx, d), std::max(need, need2));
        EXPECT_GE(attention_workspace_bytes(n_head, 512, n_ctx, d), std::max(need, need2));  // prefill-sized callers
      }
  EXPECT_EQ(attention_workspace_bytes(32, 0, 4096, 128), 0u);
}

TEST(CudaAttentionPlan, RowsMapToTokenAndHead) {
  using namespace attn_detail;
  for (int64_t group : {1, 3, 4, 8})
    for (int64_t g = 0; g < 3; ++g)
      for (int64_t i = 0; i < 5 * group; ++i) {
        const RowRef r = row_ref(i, g, group);
        EXPECT_EQ(r.t * group + (r.h - g * group), i);
        EXPECT_EQ(r.h / group, g);  // the engine's GQA mapping g = h / (n_head / n_head_kv)
      }
  EXPECT_EQ(live_keys(10, 3, 100), 13);
  EXPECT_EQ(live_keys(99, 3, 100), 100);  // clamped to the cache
  EXPECT_EQ(live_keys(0, 0, 100), 1);
}

// The kernels (SIMT decode: split chunks + combine; SIMT or tensor-core prefill) run on the CPU over
// a cache image made by engine::KvCache (rows past the live length NaN).
template <class T, int D>
void emulate(const Case& c, std::mt19937& rng) {
  using namespace attn_detail;
  SCOPED_TRACE("emulated " + describe(c));
  const int64_t n_ctx = c.pos0 + c.n_tok + c.extra_ctx, kv_dim = c.n_head_kv * D, n_kv = c.pos0 + c.n_tok;
  const int64_t ldq = c.n_head * D + 8, ldo = c.n_head * D + 16, group = c.n_head / c.n_head_kv;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(c.n_tok * ldq)), k(static_cast<size_t>(n_kv * kv_dim)), v(k.size());
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  engine::KvCache cpu(act_of(c.kv), n_ctx, {kv_dim});
  cpu.store(0, 0, n_kv, k.data(), kv_dim, v.data(), kv_dim);
  const size_t row_bytes = static_cast<size_t>(kv_dim * cpu.esize());
  std::vector<uint8_t> kc(static_cast<size_t>(n_ctx) * row_bytes, 0xFF), vc(kc.size(), 0xFF);
  for (int64_t r = 0; r < n_kv; ++r) {
    std::memcpy(kc.data() + r * row_bytes, cpu.k_row(0, r), row_bytes);
    std::memcpy(vc.data() + r * row_bytes, cpu.v_row(0, r), row_bytes);
  }
  const int32_t pos = static_cast<int32_t>(c.pos0);
  std::vector<float> out(static_cast<size_t>(c.n_tok * ldo), poison());
  std::vector<float> ws(attention_workspace_bytes(c.n_head, c.n_tok, n_ctx, D) / 4 + 4, poison());

  SimtParams p{};
  p.q = q.data();
  p.ldq = ldq;
  p.k = kc.data();
  p.v = vc.data();
  p.kv_stride = kv_dim;
  p.out = out.data();
  p.ldo = ldo;
  p.d_pos = &pos;
  p.n_tok = c.n_tok;
  p.n_ctx = n_ctx;
  p.group = group;
  p.n_head = c.n_head;
  p.scale = 2.0f / std::sqrt(static_cast<float>(D));
  p.round = round_of(c.kv);
  p.row_blocks = ceil_div(c.n_tok * group, kRowsPerBlock);
  if (c.path == Path::kDecode) {
    p.splits = decode_splits(n_ctx, c.n_head_kv, p.row_blocks, 4 * 132);  // an H200's grid
    p.part_acc = ws.data();
    p.part_ml = ws.data() + c.n_tok * c.n_head * p.splits * D;
    ASSERT_LE(static_cast<size_t>(c.n_tok * c.n_head * p.splits * (D + 2)), ws.size());
    simt_grid_host<T, D, true>(p, c.n_head_kv);
    CombineParams cp{p.part_acc, p.part_ml, &pos, out.data(), ldo, c.n_tok, n_ctx, c.n_head, p.splits, D, p.round};
    combine_host(cp);
  } else if (c.path == Path::kPrefill && !std::is_same_v<T, float> && D <= 128) {
    if constexpr (!std::is_same_v<T, float> && D <= 128) {  // the tensor-core kernel, as dispatched
      p.splits = 1;
      p.row_blocks = ceil_div(c.n_tok * group, kMmaRows);
      mma_grid_host<T, D>(p, c.n_head_kv);
    }
  } else {
    p.splits = 1;
    simt_grid_host<T, D, false>(p, c.n_head_kv);
  }

  std::vector<float> ref(out.size(), 0.0f);
  const engine::AttnShape shape{c.n_head, c.n_head_kv, D, D, p.scale};
  engine::attention_ref(shape, cpu, 0, q.data(), ldq, c.n_tok, c.pos0, ref.data(), ldo, act_of(c.kv));
  double vmax = 0;
  for (int64_t r = 0; r < n_kv; ++r) {
    std::vector<float> row(static_cast<size_t>(kv_dim));
    cpu.load_v(0, r, 0, kv_dim, row.data());
    for (float x : row) vmax = std::max(vmax, static_cast<double>(std::fabs(x)));
  }
  for (int64_t t = 0; t < c.n_tok; ++t)
    for (int64_t i = 0; i < ldo; ++i) {
      const float g = out[static_cast<size_t>(t * ldo + i)], r = ref[static_cast<size_t>(t * ldo + i)];
      if (i >= c.n_head * D) {
        ASSERT_TRUE(is_poison(g)) << "wrote padding: token " << t << " column " << i;
        continue;
      }
      ASSERT_FALSE(is_poison(g)) << "token " << t << " column " << i << " not written";
      ASSERT_LE(std::fabs(static_cast<double>(g) - r), tolerance(c.kv, vmax, r))
          << "token " << t << " head " << i / D << " column " << i % D << " got " << g << " want " << r;
    }
}

template <int D>
void emulate_type(const Case& c, std::mt19937& rng) {
  if (c.kv == KvType::kF32) return emulate<float, D>(c, rng);
  if (c.kv == KvType::kBF16) return emulate<__nv_bfloat16, D>(c, rng);
  emulate<__half, D>(c, rng);
}

void emulate_case(const Case& c, std::mt19937& rng) {
  if (c.d == 32) return emulate_type<32>(c, rng);
  if (c.d == 64) return emulate_type<64>(c, rng);
  if (c.d == 128) return emulate_type<128>(c, rng);
  emulate_type<256>(c, rng);
}

TEST(CudaAttentionEmulated, DecodeMatchesRef) {
  std::mt19937 rng(21);
  int n = 0;
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (int64_t pos0 : {0, 1, 63, 300, 1100})
        for (int64_t n_tok : {1, 3, 8}) {
          const auto& hh = kHeads[n++ % 5];  // GQA ratios spread over the sweep
          emulate_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kDecode}, rng);
          if (::testing::Test::HasFatalFailure()) return;
        }
  // A cache far larger than the live length: most chunks idle, chunks of one unit.
  emulate_case({KvType::kBF16, 128, 32, 8, 1, 5, Path::kDecode, 9000}, rng);
}

TEST(CudaAttentionEmulated, PrefillMatchesRef) {
  std::mt19937 rng(22);
  int n = 0;
  for (KvType t : kKvTypes)
    for (int64_t d : kDims)
      for (int64_t pos0 : {0, 100})
        for (int64_t n_tok : {1, 17, 70}) {
          const auto& hh = kHeads[n++ % 5];
          emulate_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kPrefill}, rng);
          if (::testing::Test::HasFatalFailure()) return;
          if (t != KvType::kF32) {
            emulate_case({t, d, hh[0], hh[1], n_tok, pos0, Path::kPrefillSimt}, rng);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
}

// kv_store's element map, run over every element with the CPU's rounding, writes exactly
// engine::KvCache::store's bytes and touches nothing else (K and V of different widths).
TEST(CudaAttentionPlan, KvStoreMapMatchesKvCache) {
  using namespace attn_detail;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t n_ctx = 40, k_dim = 96, v_dim = 64, ldk = 100, ldv = 70, pos = 11, n_tok = 7;
  std::vector<float> k(static_cast<size_t>(n_tok * ldk)), v(static_cast<size_t>(n_tok * ldv));
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  std::vector<uint16_t> kc(static_cast<size_t>(n_ctx * k_dim), 0xFFFF), vc(static_cast<size_t>(n_ctx * v_dim), 0xFFFF);
  std::vector<int> hits(kc.size() + vc.size(), 0);
  for (int64_t i = 0; i < n_tok * (k_dim + v_dim); ++i) {
    const KvSlot e = kv_slot(i, n_tok, k_dim, v_dim, ldk, ldv, pos);
    if (e.is_v) {
      vc[static_cast<size_t>(e.dst)] = f32_to_bf16(v[static_cast<size_t>(e.src)]);
      ++hits[kc.size() + static_cast<size_t>(e.dst)];
    } else {
      kc[static_cast<size_t>(e.dst)] = f32_to_bf16(k[static_cast<size_t>(e.src)]);
      ++hits[static_cast<size_t>(e.dst)];
    }
  }
  // The engine cache keeps one width for K and V: compare each with a cache of its width.
  engine::KvCache ck(engine::ActType::kBF16, n_ctx, {k_dim}), cv(engine::ActType::kBF16, n_ctx, {v_dim});
  ck.store(0, pos, n_tok, k.data(), ldk, k.data(), ldk);
  cv.store(0, pos, n_tok, v.data(), ldv, v.data(), ldv);
  for (int64_t r = 0; r < n_ctx; ++r) {
    const bool live = r >= pos && r < pos + n_tok;
    for (int64_t c = 0; c < k_dim; ++c) {
      const size_t i = static_cast<size_t>(r * k_dim + c);
      ASSERT_EQ(hits[i], live ? 1 : 0) << "K row " << r << " column " << c;
      if (live) {
        ASSERT_EQ(kc[i], static_cast<const uint16_t*>(ck.k_row(0, r))[c]);
      }
    }
    for (int64_t c = 0; c < v_dim; ++c) {
      const size_t i = static_cast<size_t>(r * v_dim + c);
      ASSERT_EQ(hits[kc.size() + i], live ? 1 : 0) << "V row " << r << " column " << c;
      if (live) {
        ASSERT_EQ(vc[i], static_cast<const uint16_t*>(cv.v_row(0, r))[c]);
      }
    }
  }
}

TEST(CudaAttentionArgs, BadShapesThrowBeforeAnyLaunch) {
  AttnArgs a;
  a.n_head = 8;
  a.n_head_kv = 3;  // not a divisor
  a.head_dim_k = a.head_dim_v = 128;
  float f = 0;
  int32_t pos = 0;
  alignas(16) static uint8_t cache[16];
  a.q = &f;
  a.out = &f;
  a.d_pos = &pos;
  a.k_cache = a.v_cache = cache;
  a.ldq = a.ldo = 8 * 128;
  a.n_tok = 1;
  a.n_ctx = 16;
  EXPECT_THROW(attention_prefill(a, nullptr), Error);
  a.n_head_kv = 2;
  a.head_dim_k = a.head_dim_v = 96;
  a.ldq = a.ldo = 8 * 96;
  EXPECT_THROW(attention_prefill(a, nullptr), Error);
  a.head_dim_k = 128;
  EXPECT_THROW(attention_decode(a, &f, nullptr), Error);  // k and v dims differ
  a.head_dim_v = 128;
  a.ldq = a.ldo = 8 * 128;
  a.n_tok = 9;
  EXPECT_THROW(attention_decode(a, &f, nullptr), Error);  // too many tokens for decode
  a.n_tok = 17;
  EXPECT_THROW(attention_prefill(a, nullptr), Error);  // more tokens than the cache holds
  a.n_tok = 1;
  a.ldq = 100;
  EXPECT_THROW(attention_prefill(a, nullptr), Error);
  EXPECT_THROW(kv_store(KvType::kF32, cache, cache, 8, 8, &f, 4, &f, 8, 1, &pos, nullptr), Error);  // ldk < k_dim
}

}  // namespace
}  // namespace ft::cuda
