// The offload MoE backend (gpu/moe_offload.h) and its slot cache (cuda/moe_cache.h):
//   * the ensure / hybrid-ensure kernels against their scalar twin (moe_cache_ref.cpp) over
//     random route sequences: same slot ids, same victims in the same order, same state;
//   * the gather (one launch, and per tensor kind) copies exactly the staged experts from
//     mapped pinned memory, 16-byte and odd sizes;
//   * whole sessions on tiny qwen3moe models (NVFP4 experts with per-expert scales, Q8_0,
//     MXFP4, BF16): offload with a quarter (and a half) of the experts cached gives bit-identical
//     logits and the same greedy tokens as fused over a prompt (prefill), a 6-token decode
//     batch, 256 greedy steps and a second prefill -- graphs on and off, fused and per-bank
//     gather, speculative fetches (from the FFN input or the output, early or late) --
//     while really missing (fetched experts counted);
//   * hybrid with and without speculative fetches: the same logits as fused, bit for bit.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cuda/buffer.h"
#include "cuda/device.h"
#include "cuda/moe_cache.h"
#include "engine/sampler.h"
#include "gpu/moe_cpu_backend.h"
#include "gpu/moe_offload.h"
#include "gpu/session.h"
#include "model/model.h"
#include "testgen/model_gen.h"

namespace fs = std::filesystem;
using ft::GgmlType;
using u64 = unsigned long long;

namespace {

// Host and device copies of one cache state.
struct Twin {
  int64_t L, E, S;
  std::vector<int32_t> slot_of, expert_of_slot;
  std::vector<u64> last_use, recency;
  u64 step = 0;
  ft::cuda::DeviceBuffer d_slot_of, d_eos, d_last, d_step, d_rec;
  Twin(int64_t l, int64_t e, int64_t s) : L(l), E(e), S(s) {
    slot_of.assign(static_cast<size_t>(L * E), -1);
    expert_of_slot.assign(static_cast<size_t>(S), -1);
    last_use.assign(static_cast<size_t>(S), 0);
    recency.assign(static_cast<size_t>(L * E), 0);
    d_slot_of = ft::cuda::DeviceBuffer(slot_of.size() * 4);
    d_eos = ft::cuda::DeviceBuffer(expert_of_slot.size() * 4);
    d_last = ft::cuda::DeviceBuffer(last_use.size() * 8);
    d_step = ft::cuda::DeviceBuffer(8);
    d_rec = ft::cuda::DeviceBuffer(recency.size() * 8);
    ft::cuda::moe_cache_reset(dev(), nullptr);
  }
  ft::cuda::CacheState host() {
    return {slot_of.data(), expert_of_slot.data(), last_use.data(), &step, recency.data(), L, E, S};
  }
  ft::cuda::CacheState dev() {
    return {d_slot_of.as<int32_t>(), d_eos.as<int32_t>(), d_last.as<u64>(), d_step.as<u64>(), d_rec.as<u64>(),
            L, E, S};
  }
  void expect_same(const std::string& where) {
    EXPECT_EQ(ft::cuda::to_host<int32_t>(d_slot_of, slot_of.size()), slot_of) << where;
    EXPECT_EQ(ft::cuda::to_host<int32_t>(d_eos, expert_of_slot.size()), expert_of_slot) << where;
    EXPECT_EQ(ft::cuda::to_host<u64>(d_last, last_use.size()), last_use) << where;
    EXPECT_EQ(ft::cuda::to_host<u64>(d_rec, recency.size()), recency) << where;
    EXPECT_EQ(ft::cuda::to_host<u64>(d_step, 1)[0], step) << where;
  }
};

struct Staging {
  int32_t n = 0;
  std::vector<int32_t> slot, expert;
  ft::cuda::DeviceBuffer d_n, d_slot, d_expert;
  explicit Staging(int64_t max) : slot(static_cast<size_t>(max)), expert(static_cast<size_t>(max)) {
    d_n = ft::cuda::DeviceBuffer(4);
    d_slot = ft::cuda::DeviceBuffer(static_cast<size_t>(max) * 4);
    d_expert = ft::cuda::DeviceBuffer(static_cast<size_t>(max) * 4);
  }
  ft::cuda::CacheMisses host() { return {&n, slot.data(), expert.data()}; }
  ft::cuda::CacheMisses dev() { return {d_n.as<int32_t>(), d_slot.as<int32_t>(), d_expert.as<int32_t>()}; }
};

// Routes of one call: n_tok tokens of n_used distinct experts from a skewed distribution
// (hot experts recur, so there are hits), sometimes a -1.
std::vector<int32_t> random_routes(std::mt19937& rng, int64_t E, int n_tok, int n_used) {
  std::vector<int32_t> ids;
  std::geometric_distribution<int> hot(0.15);
  std::uniform_int_distribution<int> coin(0, 49);
  for (int t = 0; t < n_tok; ++t) {
    std::vector<int32_t> tok;
    while (static_cast<int>(tok.size()) < n_used) {
      const int32_t e = static_cast<int32_t>(hot(rng) % E);
      bool dup = false;
      for (int32_t x : tok) dup |= x == e;
      if (!dup) tok.push_back(e);
    }
    for (int32_t e : tok) ids.push_back(coin(rng) == 0 ? -1 : e);
  }
  return ids;
}

// The scalar twin alone (no device needed): LRU properties an independent reader can check.
// Routes that hit never fetch; a step's misses are exactly its distinct absent experts; no
// slot used in the step is evicted; every victim had the smallest last use (lowest index on
// ties) among the slots still evictable; slot_of and expert_of_slot stay inverse.
TEST(MoeCacheRef, LruProperties) {
  const int64_t L = 2, E = 12, S = 9;
  std::vector<int32_t> slot_of(L * E, -1), eos(S, -1), ms(64), me(64);
  std::vector<u64> last(S, 0), rec(L * E, 0), cnt(L * 4, 0);
  u64 step = 0;
  int32_t n_miss = 0;
  ft::cuda::CacheState c{slot_of.data(), eos.data(), last.data(), &step, rec.data(), L, E, S};
  ft::cuda::CacheMisses m{&n_miss, ms.data(), me.data()};
  std::mt19937 rng(5);
  int64_t misses = 0;
  for (int call = 0; call < 400; ++call) {
    const int64_t layer = call % L;
    std::vector<int32_t> ids = random_routes(rng, E, 1 + static_cast<int>(rng() % 4), 2);
    const std::vector<int32_t> so_before = slot_of;
    const std::vector<u64> last_before = last;
    std::vector<int32_t> sid(ids.size());
    ft::cuda::moe_cache_ensure_ref(c, layer, ids.data(), static_cast<int64_t>(ids.size()), sid.data(), m,
                                   cnt.data());
    std::set<int32_t> absent, used;
    for (int32_t e : ids)
      if (e >= 0 && so_before[static_cast<size_t>(layer * E + e)] < 0) absent.insert(e);
    for (int32_t e : ids)
      if (e >= 0 && so_before[static_cast<size_t>(layer * E + e)] >= 0) used.insert(so_before[static_cast<size_t>(layer * E + e)]);
    ASSERT_EQ(static_cast<size_t>(n_miss), absent.size()) << "call " << call;
    misses += n_miss;
    for (int i = 0; i < n_miss; ++i) {
      EXPECT_TRUE(absent.count(me[static_cast<size_t>(i)])) << "call " << call;
      const int32_t v = ms[static_cast<size_t>(i)];
      EXPECT_FALSE(used.count(v)) << "call " << call << ": evicted a slot used in this step";
      // Smallest (last use, index) among the slots neither used nor already taken.
      for (int32_t s2 = 0; s2 < S; ++s2) {
        if (used.count(s2) || s2 == v) continue;
        const bool taken_before = std::find(ms.begin(), ms.begin() + i, s2) != ms.begin() + i;
        if (taken_before) continue;
        const auto a = std::make_pair(last_before[static_cast<size_t>(v)], v);
        const auto b = std::make_pair(last_before[static_cast<size_t>(s2)], s2);
        EXPECT_LT(a, b) << "call " << call << ": victim " << v << " is not the least recently used";
      }
      used.insert(v);
    }
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] < 0) continue;
      ASSERT_GE(sid[r], 0);
      EXPECT_EQ(eos[static_cast<size_t>(sid[r])], layer * E + ids[r]);
    }
    for (int32_t s2 = 0; s2 < S; ++s2) {
      const int32_t f = eos[static_cast<size_t>(s2)];
      if (f >= 0) {
        EXPECT_EQ(slot_of[static_cast<size_t>(f)], s2);
      }
    }
  }
  EXPECT_GT(misses, 200);
}

TEST(MoeCache, EnsureMatchesScalarTwin) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const int64_t L = 3, E = 16, S = 20;
  Twin tw(L, E, S);
  Staging st(64);
  std::vector<u64> counters(static_cast<size_t>(L * 4), 0);
  ft::cuda::DeviceBuffer d_counters = ft::cuda::to_device(counters);
  ft::cuda::DeviceBuffer d_ids(64 * 4), d_sid(64 * 4), d_split(3 * 64 * 4);
  std::vector<u64> zero1(1, 0);
  ft::cuda::DeviceBuffer d_spec = ft::cuda::to_device(zero1);
  u64 spec_fetched = 0;
  std::mt19937 rng(7);
  int64_t total_miss = 0, total_hit_routes = 0, split_hits = 0, split_misses = 0;
  const int32_t dummy = static_cast<int32_t>(S);
  for (int call = 0; call < 300; ++call) {
    const int64_t layer = call % L;
    const int n_tok = 1 + static_cast<int>(rng() % 8);
    std::vector<int32_t> ids = random_routes(rng, E, n_tok, 2);
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<int32_t> sid(ids.size(), 99);
    // Every other call also writes the hit / miss split (the overlap's), on both sides.
    const bool with_split = call % 2 == 1;
    std::vector<int32_t> split(3 * 64, 77);
    ft::cuda::CacheSplit hs, ds;
    if (with_split) {
      hs = {split.data(), split.data() + 64, split.data() + 128, dummy};
      int32_t* p = d_split.as<int32_t>();
      ds = {p, p + 64, p + 128, dummy};
    }
    const u64 hits_before = counters[static_cast<size_t>(layer * 4 + 1)];
    ft::cuda::moe_cache_ensure_ref(tw.host(), layer, ids.data(), n, sid.data(), st.host(), counters.data(), hs);
    d_ids.upload(ids.data(), ids.size() * 4);
    ft::cuda::moe_cache_ensure(tw.dev(), layer, d_ids.as<int32_t>(), n, d_sid.as<int32_t>(), st.dev(),
                               d_counters.as<u64>(), nullptr, ds);
    EXPECT_EQ(ft::cuda::to_host<int32_t>(d_sid, ids.size()), sid) << "call " << call;
    if (with_split) {
      const std::vector<int32_t> got = ft::cuda::to_host<int32_t>(d_split, split.size());
      for (int part = 0; part < 3; ++part)
        EXPECT_EQ(std::vector<int32_t>(got.begin() + part * 64, got.begin() + part * 64 + n),
                  std::vector<int32_t>(split.begin() + part * 64, split.begin() + part * 64 + n))
            << "call " << call << " split part " << part;
      // The twin's split: each routed expert's slot in exactly one pass, the miss marks are
      // the miss pass's slots, and the hit routes are the counted hits.
      int64_t hit_routes = 0;
      std::set<int32_t> miss_slots;
      for (int64_t r = 0; r < n; ++r) {
        const int32_t h = split[static_cast<size_t>(r)], m = split[static_cast<size_t>(64 + r)];
        const int32_t mk = split[static_cast<size_t>(128 + r)];
        if (ids[static_cast<size_t>(r)] < 0) {
          EXPECT_TRUE(h == dummy && m == dummy && mk == -1) << "call " << call;
          continue;
        }
        EXPECT_TRUE((h == dummy) != (m == dummy)) << "call " << call << " route " << r;
        EXPECT_EQ(h == dummy ? m : h, sid[static_cast<size_t>(r)]);
        EXPECT_EQ(mk, m == dummy ? -1 : m);
        hit_routes += h != dummy;
        if (m != dummy) miss_slots.insert(m);
      }
      EXPECT_EQ(static_cast<u64>(hit_routes), counters[static_cast<size_t>(layer * 4 + 1)] - hits_before);
      EXPECT_EQ(static_cast<int32_t>(miss_slots.size()), st.n) << "call " << call;
      split_hits += hit_routes;
      split_misses += static_cast<int64_t>(miss_slots.size());
    }
    const int32_t dn = ft::cuda::to_host<int32_t>(st.d_n, 1)[0];
    ASSERT_EQ(dn, st.n) << "call " << call;
    EXPECT_EQ(ft::cuda::to_host<int32_t>(st.d_slot, static_cast<size_t>(dn)),
              std::vector<int32_t>(st.slot.begin(), st.slot.begin() + dn));
    EXPECT_EQ(ft::cuda::to_host<int32_t>(st.d_expert, static_cast<size_t>(dn)),
              std::vector<int32_t>(st.expert.begin(), st.expert.begin() + dn));
    // The twin itself: every route's slot holds its expert, and misses were really absent.
    for (size_t r = 0; r < ids.size(); ++r) {
      if (ids[r] < 0) {
        EXPECT_EQ(sid[r], -1);
        continue;
      }
      ASSERT_GE(sid[r], 0);
      EXPECT_EQ(tw.expert_of_slot[static_cast<size_t>(sid[r])], layer * E + ids[r]);
      EXPECT_EQ(tw.last_use[static_cast<size_t>(sid[r])], tw.step);
    }
    total_miss += st.n;
    total_hit_routes += static_cast<int64_t>(counters[static_cast<size_t>(layer * 4 + 1)]);
    if (call % 3 == 0) {
      // A speculative fetch for the next layer inside this step (FT_MOE_SPEC): same victims
      // and miss list as the twin, and nothing this call's routes use is evicted.
      const int64_t next = (layer + 1) % L;
      const int max_new = 1 + (call / 3) % 3;
      const std::vector<int32_t> pred = random_routes(rng, E, n_tok, 2);
      ft::cuda::moe_cache_prefetch_ref(tw.host(), next, pred.data(), static_cast<int64_t>(pred.size()), max_new,
                                       st.host());
      d_ids.upload(pred.data(), pred.size() * 4);
      ft::cuda::moe_cache_prefetch(tw.dev(), next, d_ids.as<int32_t>(), static_cast<int64_t>(pred.size()), max_new,
                                   st.dev(), d_spec.as<u64>(), nullptr);
      spec_fetched += static_cast<u64>(st.n);
      const int32_t dn2 = ft::cuda::to_host<int32_t>(st.d_n, 1)[0];
      ASSERT_EQ(dn2, st.n) << "prefetch after call " << call;
      EXPECT_LE(st.n, max_new);
      EXPECT_EQ(ft::cuda::to_host<int32_t>(st.d_slot, static_cast<size_t>(dn2)),
                std::vector<int32_t>(st.slot.begin(), st.slot.begin() + dn2));
      EXPECT_EQ(ft::cuda::to_host<int32_t>(st.d_expert, static_cast<size_t>(dn2)),
                std::vector<int32_t>(st.expert.begin(), st.expert.begin() + dn2));
      for (size_t r = 0; r < ids.size(); ++r)
        if (ids[r] >= 0) {
          EXPECT_EQ(tw.expert_of_slot[static_cast<size_t>(sid[r])], layer * E + ids[r]) << call;
        }
      for (int i = 0; i < st.n; ++i) EXPECT_EQ(tw.expert_of_slot[static_cast<size_t>(st.slot[i])], next * E + st.expert[i]);
      tw.expect_same("prefetch after call " + std::to_string(call));
    }
    if (call % 50 == 49) tw.expect_same("call " + std::to_string(call));
  }
  tw.expect_same("end");
  EXPECT_EQ(ft::cuda::to_host<u64>(d_counters, counters.size()), counters);
  EXPECT_GT(total_miss, 100);          // the cache is too small for 48 experts: it evicts
  EXPECT_GT(counters[1] + counters[5], 100u);  // and the hot experts hit
  EXPECT_GT(split_hits, 50);  // the split calls saw both kinds
  EXPECT_GT(split_misses, 50);
  EXPECT_EQ(ft::cuda::to_host<u64>(d_spec, 1)[0], spec_fetched);
  EXPECT_GT(spec_fetched, 20u);
}

// The pre-gating counts on a hand-made call: 2 tokens x 3 ranks.
TEST(MoeCache, RouteOverlapCounts) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const std::vector<int32_t> actual = {5, 7, 9, 1, 2, -1};
  const std::vector<int32_t> pa = {9, 5, 0, 3, 4, 6};   // token 0: 5, 9; token 1: none
  const std::vector<int32_t> pb = {7, 1, 2, 2, 1, 8};   // token 0: 7; token 1: 1, 2 (not 7: token 0's)
  const std::vector<int32_t> mark = {-1, 4, 6, 0, -1, -1};  // misses: 7, 9, 1
  ft::cuda::DeviceBuffer a = ft::cuda::to_device(actual), da = ft::cuda::to_device(pa), db = ft::cuda::to_device(pb);
  ft::cuda::DeviceBuffer dm = ft::cuda::to_device(mark);
  std::vector<u64> zero(6, 0);
  ft::cuda::DeviceBuffer c = ft::cuda::to_device(zero);
  for (int rep = 0; rep < 2; ++rep)
    ft::cuda::moe_route_overlap(a.as<int32_t>(), da.as<int32_t>(), db.as<int32_t>(), dm.as<int32_t>(), 6, 3,
                                c.as<u64>(), nullptr);
  // routes 5, in a 2, in b 3, misses 3, misses in a 1 (9), in b 2 (7, 1); twice.
  EXPECT_EQ(ft::cuda::to_host<u64>(c, 6), (std::vector<u64>{10, 4, 6, 6, 2, 4}));
}

// The parallel victim selection against the twin where round 1's small caches did not reach:
// H200-sized state (48 layers x 128 experts, 3072 slots, up to 8 tokens x 8 routes), many ties
// (slots invalidated to last_use 0 mid-run, as prefill does), and a cache smaller than a call's
// distinct misses (overflow routes get -1, the first misses in route order get the slots).
TEST(MoeCache, EnsureMatchesScalarTwinLargeTiesOverflow) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  struct Case {
    int64_t L, E, S;
    int max_tok, n_used;
  };
  for (const int variant : {0, 1})  // L2 re-reads, keys in registers (moe_cache_set_ensure_variant)
  for (const Case& k : {Case{48, 128, 3072, 8, 8}, Case{2, 16, 6, 8, 2}}) {
    ft::cuda::moe_cache_set_ensure_variant(variant);
    Twin tw(k.L, k.E, k.S);
    Staging st(64);
    std::vector<u64> counters(static_cast<size_t>(k.L * 4), 0);
    ft::cuda::DeviceBuffer d_counters = ft::cuda::to_device(counters);
    ft::cuda::DeviceBuffer d_ids(64 * 4), d_sid(64 * 4);
    std::mt19937 rng(static_cast<unsigned>(11 + k.S));
    int64_t total_miss = 0, overflow = 0;
    const int calls = k.S > 1000 ? 2000 : 300;
    for (int call = 0; call < calls; ++call) {
      const int64_t layer = call % k.L;
      if (call % 700 == 699) {  // a prefill: the first 2E slots invalidated, evicted first after
        const int64_t n = std::min<int64_t>(2 * k.E, k.S);
        for (int64_t i = 0; i < n; ++i) {
          const int32_t f = tw.expert_of_slot[static_cast<size_t>(i)];
          if (f >= 0) tw.slot_of[static_cast<size_t>(f)] = -1;
          tw.expert_of_slot[static_cast<size_t>(i)] = -1;
          tw.last_use[static_cast<size_t>(i)] = 0;
        }
        ft::cuda::moe_cache_invalidate(tw.dev(), 0, n, nullptr);
      }
      const int n_tok = 1 + static_cast<int>(rng() % static_cast<unsigned>(k.max_tok));
      std::vector<int32_t> ids = random_routes(rng, k.E, n_tok, k.n_used);
      if (k.S > 1000) {  // a wide uniform spread as well, so the 3072 slots fill and evict
        std::uniform_int_distribution<int> u(0, static_cast<int>(k.E) - 1);
        for (size_t r = 0; r < ids.size(); r += 2) ids[r] = u(rng);
      }
      const int64_t n = static_cast<int64_t>(ids.size());
      std::vector<int32_t> sid(ids.size(), 99);
      ft::cuda::moe_cache_ensure_ref(tw.host(), layer, ids.data(), n, sid.data(), st.host(), counters.data());
      d_ids.upload(ids.data(), ids.size() * 4);
      ft::cuda::moe_cache_ensure(tw.dev(), layer, d_ids.as<int32_t>(), n, d_sid.as<int32_t>(), st.dev(),
                                 d_counters.as<u64>(), nullptr);
      const std::string where =
          "variant " + std::to_string(variant) + " S " + std::to_string(k.S) + " call " + std::to_string(call);
      ASSERT_EQ(ft::cuda::to_host<int32_t>(d_sid, ids.size()), sid) << where;
      const int32_t dn = ft::cuda::to_host<int32_t>(st.d_n, 1)[0];
      ASSERT_EQ(dn, st.n) << where;
      ASSERT_EQ(ft::cuda::to_host<int32_t>(st.d_slot, static_cast<size_t>(dn)),
                std::vector<int32_t>(st.slot.begin(), st.slot.begin() + dn)) << where;
      ASSERT_EQ(ft::cuda::to_host<int32_t>(st.d_expert, static_cast<size_t>(dn)),
                std::vector<int32_t>(st.expert.begin(), st.expert.begin() + dn)) << where;
      total_miss += st.n;
      for (size_t r = 0; r < ids.size(); ++r) overflow += ids[r] >= 0 && sid[r] < 0;
      if (call % 200 == 199) tw.expect_same(where);
    }
    tw.expect_same("S " + std::to_string(k.S) + " end");
    EXPECT_EQ(ft::cuda::to_host<u64>(d_counters, counters.size()), counters);
    if (k.S > 1000) {
      EXPECT_GT(total_miss, 3000);  // more distinct experts than slots: it evicts
    } else {
      EXPECT_GT(overflow, 20);  // 6 slots, up to 16 distinct experts a call: routes left without a slot
    }
  }
  ft::cuda::moe_cache_set_ensure_variant(0);
}

TEST(MoeCache, HybridEnsureMatchesScalarTwin) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const int64_t L = 2, E = 32, S = 40;
  for (const int variant : {0, 1})
  for (int max_fetch : {0, 1, 2, 5}) {
    ft::cuda::moe_cache_set_ensure_variant(variant);
    Twin tw(L, E, S);
    Staging st(64);
    std::vector<u64> counters(static_cast<size_t>(L * 4), 0);
    ft::cuda::DeviceBuffer d_counters = ft::cuda::to_device(counters);
    ft::cuda::DeviceBuffer d_ids(64 * 4), d_wts(64 * 4), d_sid(64 * 4), d_gw(64 * 4), d_cid(64 * 4), d_cw(64 * 4);
    std::mt19937 rng(100 + max_fetch);
    for (int call = 0; call < 200; ++call) {
      const int64_t layer = call % L;
      const int n_tok = 1 + static_cast<int>(rng() % 4);
      std::vector<int32_t> ids = random_routes(rng, E, n_tok, 4);
      std::vector<float> wts(ids.size());
      for (float& w : wts) w = static_cast<float>(rng() % 1000) / 1000.0f + 0.001f;
      const int64_t n = static_cast<int64_t>(ids.size());
      std::vector<int32_t> sid(ids.size()), cid(ids.size());
      std::vector<float> gw(ids.size()), cw(ids.size());
      ft::cuda::moe_cache_ensure_hybrid_ref(tw.host(), layer, ids.data(), wts.data(), n, max_fetch, sid.data(),
                                            gw.data(), cid.data(), cw.data(), st.host(), counters.data());
      d_ids.upload(ids.data(), ids.size() * 4);
      d_wts.upload(wts.data(), wts.size() * 4);
      ft::cuda::moe_cache_ensure_hybrid(tw.dev(), layer, d_ids.as<int32_t>(), d_wts.as<float>(), n, max_fetch,
                                        d_sid.as<int32_t>(), d_gw.as<float>(), d_cid.as<int32_t>(), d_cw.as<float>(),
                                        st.dev(), d_counters.as<u64>(), nullptr);
      const std::string where = "variant " + std::to_string(variant) + " max_fetch " + std::to_string(max_fetch) +
                                " call " + std::to_string(call);
      EXPECT_EQ(ft::cuda::to_host<int32_t>(d_sid, ids.size()), sid) << where;
      EXPECT_EQ(ft::cuda::to_host<int32_t>(d_cid, ids.size()), cid) << where;
      EXPECT_EQ(ft::cuda::to_host<float>(d_gw, ids.size()), gw) << where;
      EXPECT_EQ(ft::cuda::to_host<float>(d_cw, ids.size()), cw) << where;
      ASSERT_EQ(ft::cuda::to_host<int32_t>(st.d_n, 1)[0], st.n) << where;
      EXPECT_LE(st.n, max_fetch) << where;
      // Each route exactly once: on the GPU (weight kept) or on the CPU (weight moved).
      for (size_t r = 0; r < ids.size(); ++r) {
        if (ids[r] < 0) continue;
        EXPECT_EQ(gw[r] + cw[r], wts[r]) << where;
        EXPECT_TRUE((cid[r] == ids[r]) != (gw[r] == wts[r])) << where;
        if (cid[r] < 0) {
          EXPECT_EQ(tw.expert_of_slot[static_cast<size_t>(sid[r])], layer * E + ids[r]) << where;
        }
      }
    }
    tw.expect_same("max_fetch " + std::to_string(max_fetch));
    EXPECT_EQ(ft::cuda::to_host<u64>(d_counters, counters.size()), counters);
    if (max_fetch == 0) {
      EXPECT_EQ(counters[2] + counters[6], 0u);
    }
  }
  ft::cuda::moe_cache_set_ensure_variant(0);
}

TEST(MoeCache, GatherCopiesStagedExperts) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const int64_t E = 12, S = 7;
  const int64_t sizes[3] = {4608, 16, 1000};  // 16-byte vectors, a scale-bank row, odd bytes
  std::vector<uint8_t*> host(3);
  std::vector<ft::cuda::DeviceBuffer> pool;
  std::mt19937 rng(3);
  for (int k = 0; k < 3; ++k) {
    void* p = nullptr;
    ASSERT_EQ(cudaHostAlloc(&p, static_cast<size_t>(E * sizes[k]), cudaHostAllocMapped | cudaHostAllocPortable),
              cudaSuccess);
    host[k] = static_cast<uint8_t*>(p);
    for (int64_t i = 0; i < E * sizes[k]; ++i) host[k][i] = static_cast<uint8_t>(rng());
  }
  for (const bool per_kind : {false, true}) {
    pool.clear();
    ft::cuda::GatherPlan plan;
    const int64_t stride[3] = {4608, 16, 1008};
    for (int k = 0; k < 3; ++k) {
      pool.emplace_back(static_cast<size_t>(S * stride[k]));
      ASSERT_EQ(cudaMemset(pool.back().get(), 0, pool.back().bytes()), cudaSuccess);
      void* dev = nullptr;
      ASSERT_EQ(cudaHostGetDevicePointer(&dev, host[k], 0), cudaSuccess);
      plan.kind[plan.n_kind++] = {static_cast<const uint8_t*>(dev), pool.back().as<uint8_t>(), sizes[k], stride[k]};
    }
    Staging st(8);
    st.n = 3;
    st.slot = {5, 0, 2, 0, 0, 0, 0, 0};
    st.expert = {11, 3, 7, 0, 0, 0, 0, 0};
    st.d_n.upload(&st.n, 4);
    st.d_slot.upload(st.slot.data(), 32);
    st.d_expert.upload(st.expert.data(), 32);
    if (!per_kind) {
      ft::cuda::moe_cache_gather(plan, st.dev(), 8, nullptr);
    } else {
      for (int k = 0; k < 3; ++k) {
        ft::cuda::GatherPlan one;
        one.kind[0] = plan.kind[k];
        one.n_kind = 1;
        ft::cuda::moe_cache_gather(one, st.dev(), 8, nullptr);
      }
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int k = 0; k < 3; ++k) {
      const std::vector<uint8_t> got = ft::cuda::to_host<uint8_t>(pool[k], pool[k].bytes());
      for (int64_t s = 0; s < S; ++s) {
        int64_t e = -1;
        for (int m = 0; m < 3; ++m)
          if (st.slot[m] == s) e = st.expert[m];
        for (int64_t b = 0; b < stride[k]; ++b) {
          const uint8_t want = e >= 0 && b < sizes[k] ? host[k][e * sizes[k] + b] : 0;
          ASSERT_EQ(got[static_cast<size_t>(s * stride[k] + b)], want)
              << "kind " << k << " slot " << s << " byte " << b << (per_kind ? " per kind" : " one launch");
        }
      }
    }
  }
  for (uint8_t* p : host) cudaFreeHost(p);
}

// The gather's grid is shared by the misses a call really has (CTAs per miss = grid / n_miss):
// 1, 2 and 5 misses of 256 KiB + a 16-byte bank row out of 8 possible, every byte checked.
TEST(MoeCache, GatherSharesTheGridAmongFewMisses) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const int64_t E = 6, S = 8, sizes[2] = {256 * 1024, 16};
  std::vector<uint8_t*> host(2);
  std::mt19937 rng(4);
  ft::cuda::GatherPlan plan;
  std::vector<ft::cuda::DeviceBuffer> pool;
  for (int k = 0; k < 2; ++k) {
    void* p = nullptr;
    ASSERT_EQ(cudaHostAlloc(&p, static_cast<size_t>(E * sizes[k]), cudaHostAllocMapped | cudaHostAllocPortable),
              cudaSuccess);
    host[k] = static_cast<uint8_t*>(p);
    for (int64_t i = 0; i < E * sizes[k]; ++i) host[k][i] = static_cast<uint8_t>(rng());
    void* dev = nullptr;
    ASSERT_EQ(cudaHostGetDevicePointer(&dev, host[k], 0), cudaSuccess);
    pool.emplace_back(static_cast<size_t>(S * sizes[k]));
    plan.kind[plan.n_kind++] = {static_cast<const uint8_t*>(dev), pool.back().as<uint8_t>(), sizes[k], 0};
  }
  for (const int n_miss : {1, 2, 5}) {
    for (auto& b : pool) ASSERT_EQ(cudaMemset(b.get(), 0, b.bytes()), cudaSuccess);
    Staging st(8);
    st.n = n_miss;
    st.slot = {6, 1, 3, 0, 7, 0, 0, 0};
    st.expert = {2, 5, 0, 4, 1, 0, 0, 0};
    st.d_n.upload(&st.n, 4);
    st.d_slot.upload(st.slot.data(), 32);
    st.d_expert.upload(st.expert.data(), 32);
    ft::cuda::moe_cache_gather(plan, st.dev(), 8, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int k = 0; k < 2; ++k) {
      const std::vector<uint8_t> got = ft::cuda::to_host<uint8_t>(pool[k], pool[k].bytes());
      for (int64_t s = 0; s < S; ++s) {
        int64_t e = -1;
        for (int m = 0; m < n_miss; ++m)
          if (st.slot[m] == s) e = st.expert[m];
        for (int64_t b = 0; b < sizes[k]; ++b) {
          const uint8_t want = e >= 0 ? host[k][e * sizes[k] + b] : 0;
          ASSERT_EQ(got[static_cast<size_t>(s * sizes[k] + b)], want)
              << n_miss << " misses, kind " << k << " slot " << s << " byte " << b;
        }
      }
    }
  }
  for (uint8_t* p : host) cudaFreeHost(p);
}

struct ModelCase {
  std::string name;
  GgmlType experts;
};

ft::testgen::ModelSpec moe_spec(GgmlType experts) {
  auto s = ft::testgen::preset("tiny", ft::testgen::Arch::kQwen3Moe);
  s.seed = 23;
  s.n_layer = 4;
  s.n_expert = 16;
  s.n_expert_used = 2;
  for (auto& r : s.role_type) r = GgmlType::BF16;
  s.set_type(ft::testgen::Role::kExperts, experts);
  if (experts == GgmlType::NVFP4) s.set_type(ft::testgen::Role::kAttn, GgmlType::NVFP4);
  return s;
}

// Everything a run produces: the logits of every eval and the greedy tokens.
struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
  ft::gpu::MoeStats stats;
  ft::gpu::MoeCacheGauges gauges;
  bool has_gauges = false;
};

Trace run(const ft::model::Model& m, const ft::gpu::GpuSessionOptions& go, int64_t n_vocab) {
  ft::gpu::GpuSession s(m, go);
  Trace t;
  auto keep = [&](const float* l, int64_t rows) {
    t.logits.emplace_back(l, l + rows * n_vocab);
    return ft::engine::argmax(l + (rows - 1) * n_vocab, static_cast<int32_t>(n_vocab));
  };
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(static_cast<int32_t>((37 * i + 5) % n_vocab));
  int32_t next = keep(s.eval(prompt.data(), 20), 1);                   // prefill (GEMM path)
  std::vector<int32_t> six;
  for (int i = 0; i < 6; ++i) six.push_back(static_cast<int32_t>((11 * i + next) % n_vocab));
  next = keep(s.eval(six.data(), 6, /*all_logits=*/true), 6);          // 6-token decode batch
  for (int i = 0; i < 256; ++i) {                                      // greedy decode
    t.tokens.push_back(next);
    next = keep(s.eval(&next, 1), 1);
  }
  std::vector<int32_t> more;
  for (int i = 0; i < 16; ++i) more.push_back(static_cast<int32_t>((13 * i + 1) % n_vocab));
  next = keep(s.eval(more.data(), 16), 1);                             // prefill after decode
  for (int i = 0; i < 8; ++i) {
    t.tokens.push_back(next);
    next = keep(s.eval(&next, 1), 1);
  }
  t.stats = s.moe().stats();
  t.has_gauges = s.moe().cache_gauges(&t.gauges);
  return t;
}

class OffloadVsFused : public ::testing::TestWithParam<ModelCase> {};

TEST_P(OffloadVsFused, SameLogitsAndTokens) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const ModelCase& c = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("ft-moe-offload-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / (c.name + ".gguf")).string();
  ft::testgen::generate_model(moe_spec(c.experts), path);
  auto m = ft::model::load_model(path);
  const int64_t V = m->hp.n_vocab;
  for (const char* dtype : {"auto", "float32"}) {
    ft::gpu::GpuSessionOptions go;
    go.n_ctx = 320;
    go.dtype = dtype;
    go.moe.name = "fused";
    const Trace ref = run(*m, go, V);
    EXPECT_GE(std::set<int32_t>(ref.tokens.begin(), ref.tokens.end()).size(), 4u) << "degenerate generation";
    struct Variant {
      double rate;
      bool graphs;
      bool per_bank;
      bool overlap = false;  // FT_MOE_OFFLOAD_OVERLAP=1: hits during the gather
      bool pregate = false;  // FT_MOE_PREGATE=1: the measurement must not change a bit
      int spec = 0;  // FT_MOE_SPEC (-1: unset, the default 2): speculation changes the cache, not a bit
      const char* spec_from = nullptr;  // FT_MOE_SPEC_FROM (out: guesses from the layer's output)
      bool late = false;                // FT_MOE_SPEC_EARLY=0: the ensure waits for the guessed copies
      bool clock = false;               // FT_MOE_GATHER_CLOCK=1: the timeline must not change a bit
    };
    for (const Variant v : {Variant{0.25, true, false}, Variant{0.25, false, false}, Variant{0.25, true, true},
                            Variant{0.5, true, false}, Variant{0.25, true, false, true},
                            Variant{0.25, false, false, true}, Variant{0.5, true, true, true, true},
                            Variant{0.25, true, false, true, false, 2}, Variant{0.25, false, false, true, true, 1},
                            Variant{0.5, true, false, false, false, -1},
                            Variant{0.25, true, false, false, false, 2, "out", false, true},
                            Variant{0.25, true, true, false, false, 3, nullptr, true},
                            Variant{0.25, false, false, false, false, 2, "out", true, true},
                            Variant{0.75, true, false, false, false, -1}}) {  // 0.75: slots preloaded
      if (v.per_bank)
        setenv("FT_MOE_COPY", "per_bank", 1);
      else
        unsetenv("FT_MOE_COPY");
      if (v.overlap) setenv("FT_MOE_OFFLOAD_OVERLAP", "1", 1);
      if (v.pregate) setenv("FT_MOE_PREGATE", "1", 1);
      if (v.spec >= 0) setenv("FT_MOE_SPEC", std::to_string(v.spec).c_str(), 1);
      if (v.spec_from) setenv("FT_MOE_SPEC_FROM", v.spec_from, 1);
      if (v.late) setenv("FT_MOE_SPEC_EARLY", "0", 1);
      if (v.clock) setenv("FT_MOE_GATHER_CLOCK", "1", 1);
      ft::gpu::GpuSessionOptions o = go;
      o.moe.name = "offload";
      o.moe.cache_rate = v.rate;
      o.graphs = v.graphs;
      const Trace got = run(*m, o, V);
      unsetenv("FT_MOE_COPY");
      unsetenv("FT_MOE_OFFLOAD_OVERLAP");
      unsetenv("FT_MOE_PREGATE");
      unsetenv("FT_MOE_SPEC");
      unsetenv("FT_MOE_SPEC_FROM");
      unsetenv("FT_MOE_SPEC_EARLY");
      unsetenv("FT_MOE_GATHER_CLOCK");
      const std::string where = c.name + " " + dtype + " rate " + std::to_string(v.rate) +
                                (v.graphs ? " graphs" : " no graphs") + (v.per_bank ? " per-bank" : "") +
                                (v.overlap ? " overlap" : "") + (v.pregate ? " pregate" : "") +
                                (v.spec != 0 ? " spec " + std::to_string(v.spec) : "") +
                                (v.spec_from ? std::string(" from ") + v.spec_from : "") +
                                (v.late ? " late" : "") + (v.clock ? " clock" : "");
      if (v.spec != 0) {
        EXPECT_GT(got.stats.spec_fetched, 0u) << where;  // the default (-1) speculates too
      } else {
        EXPECT_EQ(got.stats.spec_fetched, 0u) << where;
      }
      if (v.pregate) {
        // 3 of 4 layers are compared, 2 ranks, 270 decode tokens.
        EXPECT_EQ(got.stats.pregate[0], 3u * 2u * 270u) << where;
        EXPECT_LE(got.stats.pregate[1], got.stats.pregate[0]) << where;
        EXPECT_LE(got.stats.pregate[2], got.stats.pregate[0]) << where;
        EXPECT_GT(got.stats.pregate[3], 0u) << where;
        std::printf("PREGATE %s: %s", where.c_str(), ft::gpu::format_moe_stats(got.stats).c_str());
      } else {
        EXPECT_EQ(got.stats.pregate[0], 0u) << where;
      }
      EXPECT_EQ(got.tokens, ref.tokens) << where;
      ASSERT_EQ(got.logits.size(), ref.logits.size());
      int first_diff = -1;
      for (size_t i = 0; i < ref.logits.size() && first_diff < 0; ++i)
        if (std::memcmp(got.logits[i].data(), ref.logits[i].data(), ref.logits[i].size() * 4) != 0)
          first_diff = static_cast<int>(i);
      EXPECT_EQ(first_diff, -1) << where << ": logits differ from eval " << first_diff;
      const ft::gpu::MoeLayerStats tot = got.stats.total();
      // 4 layers x 2 ranks x (6 + 256 + 8) decode tokens.
      EXPECT_EQ(tot.routes, 4u * 2u * 270u) << where;
      EXPECT_GT(tot.misses_fetched, 16u) << where << ": a quarter of the experts must miss";
      EXPECT_GT(tot.hits, 0u) << where;
      EXPECT_EQ(tot.prefill_layers, 8u) << where;
      // /metrics' gauges (another thread's view): the same decode counters, a full cache.
      ASSERT_TRUE(got.has_gauges) << where;
      EXPECT_EQ(got.gauges.routes, tot.routes) << where;
      EXPECT_EQ(got.gauges.hits, tot.hits) << where;
      EXPECT_EQ(got.gauges.misses_fetched, tot.misses_fetched) << where;
      EXPECT_GT(got.gauges.slots, 0) << where;
      EXPECT_GT(got.gauges.slots_used, 0) << where;
      EXPECT_LE(got.gauges.slots_used, got.gauges.slots) << where;
      std::printf("OFFLOAD %s: %d tokens identical, fetched %llu of %llu routes (%.1f%% hits), %.2f MiB H2D\n",
                  where.c_str(), static_cast<int>(got.tokens.size()), static_cast<unsigned long long>(tot.misses_fetched),
                  static_cast<unsigned long long>(tot.routes),
                  100.0 * static_cast<double>(tot.hits) / static_cast<double>(tot.routes),
                  static_cast<double>(tot.bytes_h2d) / (1024.0 * 1024.0));
    }
  }
  std::error_code ec;
  fs::remove(path, ec);
}

INSTANTIATE_TEST_SUITE_P(Tiny, OffloadVsFused,
                         ::testing::Values(ModelCase{"qwen3moe_nvfp4", GgmlType::NVFP4},
                                           ModelCase{"qwen3moe_q8_0", GgmlType::Q8_0},
                                           ModelCase{"qwen3moe_mxfp4", GgmlType::MXFP4},
                                           ModelCase{"qwen3moe_bf16", GgmlType::BF16}),
                         [](const auto& i) { return i.param.name; });

// hybrid with speculative fetches (gpu/moe_spec.h): the guesses only decide which experts
// are resident, i.e. which routes the GPU and which the CPU computes; with the CPU in exact
// mode and the ranks summed in order every logit stays fused's, bit for bit. Also without
// speculation, from the layer's output, with the ensure waiting for the copies.
class HybridVsFused : public ::testing::TestWithParam<ModelCase> {};

TEST_P(HybridVsFused, SpeculationKeepsLogits) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  ft::gpu::register_moe_cpu_backends();
  const ModelCase& c = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("ft-moe-hybrid-spec-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / (c.name + ".gguf")).string();
  ft::testgen::generate_model(moe_spec(c.experts), path);
  auto m = ft::model::load_model(path);
  const int64_t V = m->hp.n_vocab;
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 320;
  go.moe.name = "fused";
  const Trace ref = run(*m, go, V);
  struct Variant {
    int spec;  // FT_MOE_SPEC (-1: unset, the default 2)
    int max_fetch;
    bool graphs;
    const char* from = nullptr;  // FT_MOE_SPEC_FROM
    bool late = false;           // FT_MOE_SPEC_EARLY=0
    double rate = 0.25;          // 0.75: slots beyond the prefill buffers preloaded
  };
  uint64_t cpu_without = 0, cpu_with = 0;
  for (const Variant v : {Variant{0, 1, true}, Variant{-1, 1, true}, Variant{2, 0, false}, Variant{3, 1, true, "out"},
                          Variant{2, 1, true, nullptr, true}, Variant{1, 0, true, nullptr, false, 0.75}}) {
    if (v.spec >= 0) setenv("FT_MOE_SPEC", std::to_string(v.spec).c_str(), 1);
    if (v.from) setenv("FT_MOE_SPEC_FROM", v.from, 1);
    if (v.late) setenv("FT_MOE_SPEC_EARLY", "0", 1);
    ft::gpu::GpuSessionOptions o = go;
    o.moe.name = "hybrid";
    o.moe.cache_rate = v.rate;
    o.moe.hybrid_max_fetch = v.max_fetch;
    o.moe.threads = 2;
    o.graphs = v.graphs;
    const Trace got = run(*m, o, V);
    unsetenv("FT_MOE_SPEC");
    unsetenv("FT_MOE_SPEC_FROM");
    unsetenv("FT_MOE_SPEC_EARLY");
    const std::string where = c.name + " rate " + std::to_string(v.rate) + " spec " + std::to_string(v.spec) +
                              " max-fetch " + std::to_string(v.max_fetch) + (v.graphs ? " graphs" : " no graphs") +
                              (v.from ? std::string(" from ") + v.from : "") + (v.late ? " late" : "");
    const ft::gpu::MoeLayerStats tot = got.stats.total();
    if (v.spec != 0)
      EXPECT_GT(got.stats.spec_fetched, 0u) << where;
    else
      EXPECT_EQ(got.stats.spec_fetched, 0u) << where;
    EXPECT_EQ(tot.routes, 4u * 2u * 270u) << where;
    EXPECT_GT(tot.misses_cpu, 0u) << where << ": a quarter of the experts cached, some routes go to the CPU";
    if (v.max_fetch == 1 && !v.from && !v.late) (v.spec == 0 ? cpu_without : cpu_with) = tot.misses_cpu;
    EXPECT_EQ(got.tokens, ref.tokens) << where;
    ASSERT_EQ(got.logits.size(), ref.logits.size());
    int first_diff = -1;
    for (size_t i = 0; i < ref.logits.size() && first_diff < 0; ++i)
      if (std::memcmp(got.logits[i].data(), ref.logits[i].data(), ref.logits[i].size() * 4) != 0)
        first_diff = static_cast<int>(i);
    EXPECT_EQ(first_diff, -1) << where << ": logits differ from eval " << first_diff;
    std::printf("HYBRID %s: %d tokens identical, %llu of %llu routes on the CPU, %llu fetched, %llu guessed\n",
                where.c_str(), static_cast<int>(got.tokens.size()), static_cast<unsigned long long>(tot.misses_cpu),
                static_cast<unsigned long long>(tot.routes), static_cast<unsigned long long>(tot.misses_fetched),
                static_cast<unsigned long long>(got.stats.spec_fetched));
  }
  // The guesses must move routes from the CPU to the GPU (the tiny models' routers on the
  // layer before pick 57-60% of the routes).
  EXPECT_LT(cpu_with, cpu_without) << c.name;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Tiny, HybridVsFused,
                         ::testing::Values(ModelCase{"qwen3moe_nvfp4", GgmlType::NVFP4},
                                           ModelCase{"qwen3moe_q8_0", GgmlType::Q8_0}),
                         [](const auto& i) { return i.param.name; });

// SlotCache::preload: the slots outside the prefill buffers hold the first experts of every
// MoE layer (as many a layer as fit), each in its own slot; the buffers' last_use is back to
// 0; FT_MOE_PRELOAD=0 leaves the cache empty. (That the preloaded bytes are right is the
// 0.75-rate variants of OffloadVsFused / HybridVsFused: their logits equal fused's.)
TEST(MoeOffloadPreload, FirstExpertsOfEveryLayer) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  const fs::path dir = fs::temp_directory_path() / ("ft-moe-preload-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.gguf").string();
  ft::testgen::generate_model(moe_spec(GgmlType::Q8_0), path);
  auto m = ft::model::load_model(path);
  ft::gpu::HostBanks hb(*m, nullptr);
  ft::gpu::DeviceWeights w(*m, nullptr, /*upload_experts=*/false);
  int64_t n_moe = 0, E = 0;
  for (const auto& L : hb.layers)
    if (L.moe()) {
      ++n_moe;
      E = std::max(E, L.n_expert);
    }
  ASSERT_EQ(n_moe * E, 64);  // 4 layers x 16 experts
  for (const bool off : {false, true}) {
    if (off) setenv("FT_MOE_PRELOAD", "0", 1);
    ft::gpu::SlotCache c(*m, w, hb, 48, 16);  // 48 slots >= 2E: 2 prefill buffers (32 slots) held out
    const int64_t n = c.preload();
    unsetenv("FT_MOE_PRELOAD");
    const int64_t per_layer = (48 - 2 * E) / n_moe;  // 4
    EXPECT_EQ(n, off ? 0 : per_layer * n_moe);
    const ft::cuda::CacheState& st = c.state();
    std::vector<int32_t> slot_of(static_cast<size_t>(st.n_layer * st.n_expert));
    ASSERT_EQ(cudaMemcpy(slot_of.data(), st.slot_of, slot_of.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::set<int32_t> used;
    for (int64_t l = 0; l < st.n_layer; ++l) {
      if (!hb.layers[static_cast<size_t>(l)].moe()) continue;
      for (int64_t e = 0; e < E; ++e) {
        const int32_t sl = slot_of[static_cast<size_t>(l * st.n_expert + e)];
        if (off || e >= per_layer) {
          EXPECT_EQ(sl, -1) << "layer " << l << " expert " << e;
          continue;
        }
        EXPECT_GE(sl, 2 * E) << "layer " << l << " expert " << e << ": in a prefill buffer";
        EXPECT_LT(sl, 48);
        EXPECT_TRUE(used.insert(sl).second) << "slot " << sl << " given twice";
      }
    }
    std::vector<unsigned long long> last(48);
    ASSERT_EQ(cudaMemcpy(last.data(), st.last_use, last.size() * sizeof(last[0]), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < 2 * E; ++i) EXPECT_EQ(last[static_cast<size_t>(i)], 0u) << "slot " << i;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The start-up measurement's candidates (moe_select.cpp): auto with the experts in host RAM
// measures offload, the hybrid variants and cpu; hybrid without a fetch cap its variants;
// anything explicit, or FT_MOE_TUNE=0, nothing.
TEST(MoeTune, Candidates) {
  ft::gpu::register_moe_cpu_backends();
  ft::gpu::MoeBackendOptions o;
  o.name = "auto";
  EXPECT_TRUE(ft::gpu::moe_tune_candidates("fused", o).empty());
  const auto a = ft::gpu::moe_tune_candidates("offload", o);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a.front().backend, "offload");
  EXPECT_EQ(a.back().backend, "cpu");
  for (size_t i = 1; i + 1 < a.size(); ++i) {
    EXPECT_EQ(a[i].backend, "hybrid");
    EXPECT_GE(a[i].o.spec, 0);
    EXPECT_GE(a[i].o.hybrid_max_fetch, 0);
  }
  o.name = "hybrid";
  EXPECT_EQ(ft::gpu::moe_tune_candidates("hybrid", o).size(), 3u);
  o.hybrid_max_fetch = 1;
  EXPECT_TRUE(ft::gpu::moe_tune_candidates("hybrid", o).empty());
  o.hybrid_max_fetch = -1;
  setenv("FT_MOE_TUNE", "0", 1);
  EXPECT_TRUE(ft::gpu::moe_tune_candidates("hybrid", o).empty());
  unsetenv("FT_MOE_TUNE");
  o.name = "offload";
  EXPECT_TRUE(ft::gpu::moe_tune_candidates("offload", o).empty());
}

// auto on a model whose experts are taken as not fitting (FT_MOE_AUTO_HOST=1): the session
// measures the candidates, keeps one of them, and its tokens and logits are fused's.
TEST(MoeTune, AutoMeasuresAndKeepsTheTokens) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present";
  ft::gpu::register_moe_cpu_backends();
  const fs::path dir = fs::temp_directory_path() / ("ft-moe-tune-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.gguf").string();
  ft::testgen::generate_model(moe_spec(GgmlType::NVFP4), path);
  auto m = ft::model::load_model(path);
  const int64_t V = m->hp.n_vocab;
  ft::gpu::GpuSessionOptions go;
  go.n_ctx = 320;
  go.moe.name = "fused";
  const Trace ref = run(*m, go, V);
  setenv("FT_MOE_AUTO_HOST", "1", 1);
  go.moe.name = "auto";
  go.moe.cache_rate = 0.75;
  go.moe.threads = 2;
  std::string described;
  Trace got;
  {
    ft::gpu::GpuSession probe(*m, go);
    described = probe.moe().describe();
  }
  got = run(*m, go, V);
  unsetenv("FT_MOE_AUTO_HOST");
  EXPECT_TRUE(described.rfind("offload", 0) == 0 || described.rfind("hybrid", 0) == 0 ||
              described.rfind("cpu", 0) == 0)
      << described;
  if (described.rfind("hybrid", 0) == 0) {
    EXPECT_NE(described.find("measured at start-up"), std::string::npos);
  }
  EXPECT_EQ(got.tokens, ref.tokens) << described;
  ASSERT_EQ(got.logits.size(), ref.logits.size());
  for (size_t i = 0; i < ref.logits.size(); ++i)
    ASSERT_EQ(std::memcmp(got.logits[i].data(), ref.logits[i].data(), ref.logits[i].size() * 4), 0)
        << described << ": logits differ from eval " << i;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Slot sizing: explicit sizes, rates, the clamp to one layer's experts and the error when
// the slots cannot fit.
TEST(MoeOffloadSizing, ChooseSlots) {
  if (!ft::cuda::has_device()) GTEST_SKIP() << "no CUDA device present (host banks are pinned)";
  const fs::path dir = fs::temp_directory_path() / ("ft-moe-sizing-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.gguf").string();
  ft::testgen::generate_model(moe_spec(GgmlType::Q8_0), path);
  auto m = ft::model::load_model(path);
  ft::gpu::HostBanks hb(*m, nullptr);
  EXPECT_EQ(hb.bytes() >= ft::gpu::HostBanks::expert_bytes(*m), true);
  const size_t big = size_t{1} << 34;
  std::string why;
  ft::gpu::MoeBackendOptions o;
  o.cache_rate = 0.25;
  EXPECT_EQ(ft::gpu::SlotCache::choose_slots(*m, hb, o, big, &why), 16);
  o.cache_rate = 0.1;  // 6 slots < 16 experts of a layer: raised
  EXPECT_EQ(ft::gpu::SlotCache::choose_slots(*m, hb, o, big, &why), 16);
  EXPECT_NE(why.find("raised"), std::string::npos) << why;
  o.cache_rate = 0;
  o.cache_size = 1000;
  EXPECT_EQ(ft::gpu::SlotCache::choose_slots(*m, hb, o, big, &why), 64);
  o.cache_size = 0;
  EXPECT_EQ(ft::gpu::SlotCache::choose_slots(*m, hb, o, big, &why), 64);  // auto: everything fits
  EXPECT_THROW(ft::gpu::SlotCache::choose_slots(*m, hb, o, 1000, &why), ft::Error);
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace
