// KvPages: refcounts and counters, prefix publication and lookup (exact: tokens and the
// predecessor must match), eviction order of free pages.
#include "engine/kv_pages.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace ft::engine {
namespace {

std::vector<int32_t> seq_tokens(int n, int32_t base) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), base);
  return t;
}

TEST(KvPages, CountsRefsAndFreesAtOnce) {
  KvPages kp(4, 8);
  EXPECT_EQ(kp.stats().free, 4);
  const int32_t a = kp.alloc(), b = kp.alloc();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  kp.ref(a);
  KvPageStats s = kp.stats();
  EXPECT_EQ(s.total, 4);
  EXPECT_EQ(s.used, 2);
  EXPECT_EQ(s.shared, 1);
  EXPECT_EQ(s.free, 2);
  kp.unref(a);
  kp.unref(a);
  kp.unref(b);
  s = kp.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.free, 4);
  EXPECT_THROW(kp.unref(b), std::exception);
}

TEST(KvPages, RunsOutThenRecovers) {
  KvPages kp(2, 4);
  const int32_t a = kp.alloc();
  kp.alloc();
  EXPECT_EQ(kp.alloc(), -1);
  kp.unref(a);
  EXPECT_EQ(kp.alloc(), a);
}

TEST(KvPages, PublishedPrefixIsFoundOnlyWhenTheWholePrefixMatches) {
  KvPages kp(8, 4);
  const auto t = seq_tokens(8, 100);
  const int32_t p0 = kp.alloc(), p1 = kp.alloc();
  kp.publish(p0, -1, t.data());
  kp.publish(p1, p0, t.data() + 4);
  // Same tokens, same predecessor: shared.
  EXPECT_EQ(kp.lookup(-1, t.data()), p0);
  EXPECT_EQ(kp.lookup(p0, t.data() + 4), p1);
  EXPECT_EQ(kp.stats().shared, 2);
  // The second page's tokens as a first page: not the same prefix.
  EXPECT_EQ(kp.lookup(-1, t.data() + 4), -1);
  // One token differs.
  auto u = t;
  u[6] = 7;
  EXPECT_EQ(kp.lookup(p0, u.data() + 4), -1);
  // After another first page with different tokens: p1 is not its successor.
  const int32_t q0 = kp.alloc();
  kp.publish(q0, -1, u.data() + 4);
  EXPECT_EQ(kp.lookup(q0, t.data() + 4), -1);
}

TEST(KvPages, FreePagesStayReusableUntilHandedOut) {
  KvPages kp(3, 2);
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const int32_t p0 = kp.alloc(), p1 = kp.alloc();
  kp.publish(p0, -1, t.data());
  kp.publish(p1, p0, t.data() + 2);
  kp.unref(p1);
  kp.unref(p0);
  KvPageStats s = kp.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.cached, 2);
  // The unpublished page goes first; the published ones in the order they were freed.
  const int32_t x = kp.alloc();
  EXPECT_NE(x, p0);
  EXPECT_NE(x, p1);
  EXPECT_EQ(kp.lookup(-1, t.data()), p0);  // revived from the free list
  kp.unref(p0);
  // p1 was freed before p0's second release: handed out next, so unpublished.
  EXPECT_EQ(kp.alloc(), p1);
  EXPECT_EQ(kp.stats().cached, 1);
  EXPECT_EQ(kp.lookup(-1, t.data()), p0);
  EXPECT_EQ(kp.lookup(p0, t.data() + 2), -1);
}

TEST(KvPages, ASuccessorOfAHandedOutPageIsNotMatched) {
  KvPages kp(2, 2);
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const int32_t p0 = kp.alloc(), p1 = kp.alloc();
  kp.publish(p0, -1, t.data());
  kp.publish(p1, p0, t.data() + 2);
  kp.unref(p0);  // p0 freed first: handed out first
  kp.unref(p1);
  ASSERT_EQ(kp.alloc(), p0);
  kp.publish(p0, -1, t.data());  // the same first page again, computed anew
  // p1 was published after the old p0: its predecessor is gone, so no match.
  EXPECT_EQ(kp.lookup(p0, t.data() + 2), -1);
}

}  // namespace
}  // namespace ft::engine
