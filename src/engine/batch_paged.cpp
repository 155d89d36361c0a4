// The paged BatchRunner: every sequence's KV lives in pages of one shared KvCache.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "engine/batch_impl.h"
#include "engine/session.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::engine {
namespace {

class PagedBatchRunner : public BatchRunner {
 public:
  PagedBatchRunner(Session& s, int64_t max_seqs, int64_t page_size)
      : sess_(s), m_(s.model()), st_(s.state()), n_ctx_(s.n_ctx()), max_seqs_(max_seqs),
        ps_(page_size), pages_(max_seqs * ((s.n_ctx() + page_size - 1) / page_size), page_size),
        kv_(st_.ex.act, pages_.n_pages() * page_size, kv_dims(m_.hp)),
        seqs_(static_cast<size_t>(max_seqs)) {
    // The session's own KV cache (a whole context) is idle while the batch runner borrows
    // the session: give its memory back, and make a fresh one when the runner ends.
    st_.kv = KvCache(st_.ex.act, 1, std::vector<int64_t>(static_cast<size_t>(m_.hp.n_layer), 0));
  }
  ~PagedBatchRunner() override {
    st_.kv = KvCache(st_.ex.act, n_ctx_, kv_dims(m_.hp));
    sess_.reset();
  }

  int64_t add_sequence(const int32_t* prompt, int64_t n, bool reuse, int64_t* n_cached) override {
    int64_t id = 0;
    while (id < max_seqs_ && seqs_[id].live) ++id;
    if (id == max_seqs_) fail("batch runner: {} sequences are running already", max_seqs_);
    Seq& q = seqs_[id];
    q = Seq{};
    q.live = true;
    // The last finished sequence's text, partial last page included, when the prompt
    // extends it and none of its pages was handed out since (the multi-turn chat case).
    if (reuse && !parked_.tokens.empty() && static_cast<int64_t>(parked_.tokens.size()) < n &&
        std::equal(parked_.tokens.begin(), parked_.tokens.end(), prompt)) {
      for (size_t i = 0; i < parked_.pages.size(); ++i) {
        if (!pages_.revive(parked_.pages[i], parked_.epochs[i])) {
          for (int32_t p : q.pages) pages_.unref(p);
          q.pages.clear();
          break;
        }
        q.pages.push_back(parked_.pages[i]);
      }
      if (!q.pages.empty()) q.tokens = parked_.tokens;
    }
    parked_ = Parked{};
    // Else whole pages of the prompt that are published, but never the last prompt token:
    // its logits are what the caller needs.
    if (reuse && q.pages.empty()) {
      int32_t prev = -1;
      for (int64_t i = 0; (i + 1) * ps_ <= n - 1; ++i) {
        const int32_t p = pages_.lookup(prev, prompt + i * ps_);
        if (p < 0) break;
        q.pages.push_back(p);
        prev = p;
      }
    }
    if (q.tokens.empty()) q.tokens.assign(prompt, prompt + static_cast<int64_t>(q.pages.size()) * ps_);
    const auto nc = static_cast<int64_t>(q.tokens.size());
    for (int64_t pos = 0; pos < nc; ++pos) q.cells.push_back(q.pages[pos / ps_] * ps_ + pos % ps_);
    if (n_cached) *n_cached = nc;
    return id;
  }

  void remove_sequence(int64_t id) override {
    Seq& q = seq(id);
    // Its pages are free at once; it is remembered as the parked text (see add_sequence).
    parked_ = Parked{};
    // (After a failed step the pages past its tokens hold garbage, never read back.)
    parked_.tokens = q.tokens;
    parked_.pages = q.pages;
    for (int32_t p : q.pages) parked_.epochs.push_back(pages_.epoch(p));
    for (int32_t p : q.pages) pages_.unref(p, true);
    q = Seq{};
  }

  const float* step(const std::vector<BatchItem>& items) override {
    const int64_t V = m_.hp.n_vocab, B = static_cast<int64_t>(items.size());
    int64_t total = 0;
    for (const BatchItem& it : items) {
      Seq& q = seq(it.seq);
      if (it.n <= 0) fail("batch runner: a step item needs at least one token");
      if (static_cast<int64_t>(q.tokens.size()) + it.n > n_ctx_)
        fail("context is full: {} tokens in the cache + {} new > --ctx-size {}", q.tokens.size(), it.n, n_ctx_);
      for (int64_t i = 0; i < it.n; ++i)
        if (it.tokens[i] < 0 || it.tokens[i] >= V) fail("token id {} is out of range [0, {})", it.tokens[i], V);
      total += it.n;
    }
    if (total > st_.n_ubatch) fail("batch runner: a step of {} tokens exceeds the batch size {}", total, st_.n_ubatch);
    toks_.clear();
    aseqs_.assign(static_cast<size_t>(B), AttnSeq{});
    if (static_cast<int64_t>(ropes_.size()) < B) ropes_.resize(static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) {
      const BatchItem& it = items[i];
      Seq& q = seq(it.seq);
      const int64_t pos0 = static_cast<int64_t>(q.tokens.size());
      for (int64_t pos = pos0; pos < pos0 + it.n; ++pos) {
        if (pos / ps_ == static_cast<int64_t>(q.pages.size())) {
          const int32_t p = pages_.alloc();
          if (p < 0) fail("batch runner: the KV cache is out of pages ({} in all)", pages_.n_pages());
          q.pages.push_back(p);
        }
        q.cells.push_back(q.pages[pos / ps_] * ps_ + pos % ps_);
      }
      aseqs_[i] = AttnSeq{static_cast<int64_t>(toks_.size()), it.n, pos0, nullptr};
      ropes_[i].build(m_.hp.rope, m_.rope_freqs ? m_.rope_freqs.f32() : nullptr, pos0, it.n);
      toks_.insert(toks_.end(), it.tokens, it.tokens + it.n);
    }
    for (int64_t i = 0; i < B; ++i) aseqs_[i].cells = seq(items[i].seq).cells.data();
    logits_.resize(static_cast<size_t>(B * V));
    const model::BatchSeqs b{aseqs_.data(), ropes_.data(), B, &kv_};
    model::decoder_forward_seqs(m_, st_, toks_.data(), total, b, logits_.data());
    // The new tokens are in the cache: publish the pages they filled.
    for (const BatchItem& it : items) {
      Seq& q = seq(it.seq);
      const int64_t full0 = static_cast<int64_t>(q.tokens.size()) / ps_;
      q.tokens.insert(q.tokens.end(), it.tokens, it.tokens + it.n);
      const int64_t full1 = static_cast<int64_t>(q.tokens.size()) / ps_;
      for (int64_t pg = full0; pg < full1; ++pg)
        pages_.publish(q.pages[pg], pg > 0 ? q.pages[pg - 1] : -1, q.tokens.data() + pg * ps_);
    }
    return logits_.data();
  }

  int64_t n_past(int64_t id) const override { return static_cast<int64_t>(seq(id).tokens.size()); }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_vocab() const override { return m_.hp.n_vocab; }
  int64_t max_sequences() const override { return max_seqs_; }
  int64_t max_step_tokens() const override { return st_.n_ubatch; }
  KvPageStats kv_stats() const override { return pages_.stats(); }
  std::string describe() const override {
    return fmt::format("{}; batched: {} sequences, paged KV ({} pages of {} tokens, {:.1f} MiB)",
                       sess_.describe(), max_seqs_, pages_.n_pages(), ps_, kv_.bytes() / 1048576.0);
  }

 private:
  struct Seq {
    bool live = false;
    std::vector<int32_t> pages;   // page table: position p is in page pages[p / page_size]
    std::vector<int32_t> tokens;  // the tokens whose KV is held
    std::vector<int64_t> cells;   // cache cell of each held position (and of the step's new ones)
  };

  struct Parked {
    std::vector<int32_t> tokens, pages;
    std::vector<uint64_t> epochs;
  };

  static std::vector<int64_t> kv_dims(const model::HParams& hp) {
    std::vector<int64_t> d(static_cast<size_t>(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) d[il] = hp.n_head_kv[il] * hp.head_dim(il);
    return d;
  }
  Seq& seq(int64_t id) {
    if (id < 0 || id >= max_seqs_ || !seqs_[id].live) fail("batch runner: no sequence {}", id);
    return seqs_[id];
  }
  const Seq& seq(int64_t id) const { return const_cast<PagedBatchRunner*>(this)->seq(id); }

  Session& sess_;
  const model::Model& m_;
  State& st_;
  int64_t n_ctx_, max_seqs_, ps_;
  KvPages pages_;
  KvCache kv_;
  std::vector<Seq> seqs_;
  Parked parked_;  // the last removed sequence
  std::vector<float> logits_;
  std::vector<int32_t> toks_;
  std::vector<AttnSeq> aseqs_;
  std::vector<RopeCache> ropes_;
};

}  // namespace

std::unique_ptr<BatchRunner> make_paged_batch_runner(Session& s, int64_t max_seqs, int64_t page_size) {
  return std::make_unique<PagedBatchRunner>(s, max_seqs, page_size);
}

}  // namespace ft::engine
