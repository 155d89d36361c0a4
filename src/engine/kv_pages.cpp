#include "engine/kv_pages.h"

#include <algorithm>

#include "core/error.h"

namespace ft::engine {

KvPages::KvPages(int64_t n_pages, int64_t page_size) : page_size_(page_size) {
  if (n_pages <= 0 || page_size <= 0) fail("KV pages: need n_pages > 0 and page_size > 0, got {} and {}", n_pages, page_size);
  pages_.resize(static_cast<size_t>(n_pages));
  for (int32_t p = 0; p < static_cast<int32_t>(n_pages); ++p) {
    pages_[p].free_it = free_.insert(free_.end(), p);
    pages_[p].in_free = true;
  }
}

uint64_t KvPages::key(int32_t prev, const int32_t* tokens) const {
  // FNV-1a over the predecessor's hash and the token ids; 0 is reserved for "unpublished".
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(prev >= 0 ? pages_[prev].hash : 0x9e3779b97f4a7c15ull);
  for (int64_t i = 0; i < page_size_; ++i) mix(static_cast<uint32_t>(tokens[i]));
  return h == 0 ? 1 : h;
}

int32_t KvPages::alloc() {
  if (free_.empty()) return -1;
  const int32_t p = free_.front();
  free_.pop_front();
  Page& pg = pages_[p];
  pg.in_free = false;
  unpublish(p);
  pg.refs = 1;
  ++pg.epoch;
  return p;
}

void KvPages::ref(int32_t p) {
  Page& pg = pages_[p];
  if (pg.in_free) {
    free_.erase(pg.free_it);
    pg.in_free = false;
  }
  ++pg.refs;
}

bool KvPages::revive(int32_t p, uint64_t e) {
  if (pages_[p].epoch != e) return false;
  ref(p);
  return true;
}

void KvPages::unref(int32_t p, bool keep) {
  Page& pg = pages_[p];
  if (pg.refs <= 0) fail("KV pages: page {} released more often than taken", p);
  if (--pg.refs > 0) return;
  // Unpublished pages are handed out first: a published one may still serve a prefix.
  pg.free_it = pg.hash || keep ? free_.insert(free_.end(), p) : free_.insert(free_.begin(), p);
  pg.in_free = true;
}

void KvPages::unpublish(int32_t p) {
  Page& pg = pages_[p];
  if (pg.hash == 0) return;
  auto it = index_.find(pg.hash);
  if (it != index_.end() && it->second == p) index_.erase(it);
  pg.hash = 0;
  pg.tokens.clear();
}

void KvPages::publish(int32_t p, int32_t prev, const int32_t* tokens) {
  if (prev >= 0 && pages_[prev].hash == 0) return;  // its prefix is not findable either
  const uint64_t k = key(prev, tokens);
  const uint64_t prev_serial = prev >= 0 ? pages_[prev].serial : 0;
  if (auto it = index_.find(k); it != index_.end()) {
    const Page& q = pages_[it->second];
    if (q.prev_serial == prev_serial) return;  // an equal page (or a colliding one) is published
    unpublish(it->second);  // stale: its predecessor was handed out since
  }
  Page& pg = pages_[p];
  unpublish(p);
  pg.hash = k;
  pg.serial = next_serial_++;
  pg.prev_serial = prev_serial;
  pg.tokens.assign(tokens, tokens + page_size_);
  index_[k] = p;
}

int32_t KvPages::lookup(int32_t prev, const int32_t* tokens) {
  if (prev >= 0 && pages_[prev].hash == 0) return -1;
  auto it = index_.find(key(prev, tokens));
  if (it == index_.end()) return -1;
  const int32_t p = it->second;
  const Page& pg = pages_[p];
  if (pg.prev_serial != (prev >= 0 ? pages_[prev].serial : 0)) return -1;
  if (!std::equal(pg.tokens.begin(), pg.tokens.end(), tokens)) return -1;
  ref(p);
  return p;
}

KvPageStats KvPages::stats() const {
  KvPageStats s;
  s.page_size = page_size_;
  s.total = n_pages();
  for (const Page& pg : pages_) {
    if (pg.refs > 0) ++s.used;
    if (pg.refs > 1) ++s.shared;
    if (pg.refs == 0 && pg.hash != 0) ++s.cached;
  }
  s.free = s.total - s.used;
  return s;
}

}  // namespace ft::engine
