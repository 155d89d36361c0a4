// Bookkeeping of a paged KV cache: a pool of fixed-size pages (page_size token positions x
// every layer's K and V; the rows themselves live in a KvCache whose cells are the pages laid
// end to end, cell = page * page_size + offset), refcounted so sequences with the same
// prompt prefix share the pages of that prefix.
//
// Prefix sharing: a full page is published under the hash of its token ids chained with its
// predecessor's hash. A later sequence walks its prompt page by page and takes a published
// page only when the page's tokens are equal and its predecessor is the page it matched just
// before (so the whole prefix up to it matches; the hash is only the index, equality is
// checked). A page whose last user leaves goes to the free list but keeps its contents and
// its publication until it is handed out again (least recently freed first), so a prefix
// stays reusable across requests while memory is short of nothing.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace ft::engine {

struct KvPageStats {
  int64_t page_size = 0;  // token positions per page
  int64_t total = 0;      // pages in the pool
  int64_t used = 0;       // pages held by at least one sequence
  int64_t shared = 0;     // pages held by two or more sequences
  int64_t free = 0;       // total - used
  int64_t cached = 0;     // free pages still published (reusable as a prefix until handed out)
};

// Pages as accounting only, for the runners whose every slot is a whole context of
// ceil(n_ctx / page_size) pages (engine/batch_serial.cpp, gpu/batch_runner_gpu.cpp): a slot
// holds the pages its tokens fill, used while its sequence lives and cached after.
template <class Slots>
KvPageStats whole_slot_kv_stats(int64_t page_size, int64_t n_ctx, int64_t max_seqs, const Slots& slots) {
  KvPageStats s;
  s.page_size = page_size;
  const int64_t per_slot = (n_ctx + page_size - 1) / page_size;
  s.total = max_seqs * per_slot;
  for (const auto& sl : slots) {
    const int64_t held = (static_cast<int64_t>(sl.tokens.size()) + page_size - 1) / page_size;
    (sl.live ? s.used : s.cached) += held;
  }
  s.free = s.total - s.used;
  return s;
}

class KvPages {
 public:
  KvPages(int64_t n_pages, int64_t page_size);

  int64_t page_size() const { return page_size_; }
  int64_t n_pages() const { return static_cast<int64_t>(pages_.size()); }

  // A page for new rows (refcount 1), or -1 when every page is held. Takes an unpublished
  // free page first, else the least recently freed published one (unpublishing it).
  int32_t alloc();
  void ref(int32_t p);
  // Drops one holder; at zero the page is free at once. With keep, a free unpublished page
  // goes to the back of the free list like a published one (the last, partial page of a
  // finished sequence that may be revived, see revive).
  void unref(int32_t p, bool keep = false);
  // Counts the times page p was handed out by alloc(): its contents are those of that time.
  uint64_t epoch(int32_t p) const { return pages_[p].epoch; }
  // Takes page p back (ref'd) when it was not handed out again since epoch(p) was `e`.
  bool revive(int32_t p, uint64_t e);

  // Publishes full page p (holding page_size token ids `tokens`) as the successor of page
  // `prev` (-1: the first page of a sequence). No-op when an equal page is already published.
  void publish(int32_t p, int32_t prev, const int32_t* tokens);
  // The published page holding `tokens` after page `prev` (-1: first page), ref'd, or -1.
  int32_t lookup(int32_t prev, const int32_t* tokens);

  KvPageStats stats() const;

 private:
  struct Page {
    int32_t refs = 0;
    uint64_t epoch = 0;
    uint64_t hash = 0;        // published under this key (0: not published)
    uint64_t serial = 0;      // changes each time the page is published anew
    uint64_t prev_serial = 0; // the predecessor's serial when this page was published
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator free_it;
    bool in_free = false;
  };
  uint64_t key(int32_t prev, const int32_t* tokens) const;
  void unpublish(int32_t p);

  int64_t page_size_;
  std::vector<Page> pages_;
  std::list<int32_t> free_;  // front: handed out first
  std::unordered_map<uint64_t, int32_t> index_;
  uint64_t next_serial_ = 1;
};

}  // namespace ft::engine
