#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <queue>

#include "tokenizer/unicode.h"

namespace ft::tok {

void BpeRanks::make_key(std::string& key, std::string_view left, std::string_view right) {
  const auto n = static_cast<uint32_t>(left.size());
  key.resize(sizeof(n) + left.size() + right.size());
  std::memcpy(key.data(), &n, sizeof(n));
  std::memcpy(key.data() + sizeof(n), left.data(), left.size());
  std::memcpy(key.data() + sizeof(n) + left.size(), right.data(), right.size());
}

void BpeRanks::add(std::string_view left, std::string_view right, int rank) {
  std::string key;
  make_key(key, left, right);
  map_.emplace(std::move(key), rank);
}

int BpeRanks::find(std::string_view left, std::string_view right) const {
  // Reused per thread so a lookup does not allocate (keys are often > 15 bytes).
  thread_local std::string key;
  make_key(key, left, right);
  const auto it = map_.find(key);
  return it == map_.end() ? -1 : it->second;
}

namespace {

std::vector<BpeSpan> initial_symbols(std::string_view word) {
  std::vector<BpeSpan> syms;
  syms.reserve(word.size());
  size_t off = 0;
  while (off < word.size()) {
    const size_t n = std::min(word.size() - off, utf8_len(static_cast<uint8_t>(word[off])));
    syms.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n)});
    off += n;
  }
  return syms;
}

std::string_view text_of(std::string_view word, const BpeSpan& s) { return word.substr(s.offset, s.length); }

}  // namespace

void bpe_merge(std::string_view word, const BpeRanks& ranks, std::vector<BpeSpan>& out) {
  struct Sym {
    BpeSpan span;
    int prev;
    int next;
  };
  struct Pair {
    int rank;
    int left;
    int right;
    uint32_t total;  // left.length + right.length when queued; a mismatch means stale
  };
  struct Later {  // priority_queue puts the "largest" on top: make that the lowest (rank, left)
    bool operator()(const Pair& a, const Pair& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  const std::vector<BpeSpan> init = initial_symbols(word);
  std::vector<Sym> syms(init.size());
  for (size_t i = 0; i < init.size(); ++i) {
    syms[i] = {init[i], static_cast<int>(i) - 1, i + 1 < init.size() ? static_cast<int>(i) + 1 : -1};
  }
  std::priority_queue<Pair, std::vector<Pair>, Later> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const int rank = ranks.find(text_of(word, syms[l].span), text_of(word, syms[r].span));
    if (rank >= 0) queue.push({rank, l, r, syms[l].span.length + syms[r].span.length});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Sym& l = syms[p.left];
    Sym& r = syms[p.right];
    // Symbols only grow to the right and a merged-away symbol gets length 0, so
    // an unchanged total length means the pair still spells the queued text.
    if (l.span.length == 0 || r.span.length == 0 || l.span.length + r.span.length != p.total) continue;
    l.span.length += r.span.length;
    r.span.length = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }

  out.clear();
  for (const Sym& s : syms) {
    if (s.span.length > 0) out.push_back(s.span);
  }
}

void bpe_merge_naive(std::string_view word, const BpeRanks& ranks, std::vector<BpeSpan>& out) {
  out = initial_symbols(word);
  while (out.size() > 1) {
    int best_rank = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      const int rank = ranks.find(text_of(word, out[i]), text_of(word, out[i + 1]));
      if (rank >= 0 && (best_rank < 0 || rank < best_rank)) {
        best_rank = rank;
        best = i;
      }
    }
    if (best_rank < 0) break;
    out[best].length += out[best + 1].length;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

}  // namespace ft::tok
