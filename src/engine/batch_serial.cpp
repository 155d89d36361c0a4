// The serial BatchRunner: one State (KV cache, recurrent state, buffers) per sequence slot,
// each sequence of a step run by itself. For the archs the paged forward does not cover
// (gemma4's sliding-window rings, qwen35's recurrent layers): their state is only valid for
// the whole text it has seen, so a slot is reused as a prefix only when the new prompt
// extends that text.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "engine/batch_impl.h"
#include "engine/session.h"
#include "model/model.h"

namespace ft::engine {
namespace {

class SerialBatchRunner : public BatchRunner {
 public:
  SerialBatchRunner(Session& s, int64_t max_seqs, int64_t page_size)
      : sess_(s), m_(s.model()), n_ctx_(s.n_ctx()), max_seqs_(max_seqs), ps_(page_size),
        n_ubatch_(s.state().n_ubatch), slots_(static_cast<size_t>(max_seqs)) {}

  int64_t add_sequence(const int32_t* prompt, int64_t n, bool reuse, int64_t* n_cached) override {
    // The free slot holding the longest strict prefix of the prompt, else the least
    // recently used free slot (its text is forgotten).
    int64_t best = -1, best_len = -1, lru = -1;
    for (int64_t i = 0; i < max_seqs_; ++i) {
      const Slot& sl = slots_[i];
      if (sl.live) continue;
      const auto len = static_cast<int64_t>(sl.tokens.size());
      if (reuse && sl.st && len > best_len && len < n && std::equal(sl.tokens.begin(), sl.tokens.end(), prompt)) {
        best = i;
        best_len = len;
      }
      if (lru < 0 || sl.last_used < slots_[lru].last_used) lru = i;
    }
    if (lru < 0) fail("batch runner: {} sequences are running already", max_seqs_);
    const int64_t id = best >= 0 ? best : lru;
    Slot& sl = slots_[id];
    if (best < 0) sl.tokens.clear();
    if (!sl.st) {
      State& base = sess_.state();
      sl.st = std::make_unique<State>(m_, *base.ex.pool, base.ex.act, n_ctx_, base.n_ubatch);
      sl.st->ex.act_quant = base.ex.act_quant;
    }
    sl.live = true;
    sl.last_used = ++clock_;
    if (n_cached) *n_cached = static_cast<int64_t>(sl.tokens.size());
    return id;
  }

  void remove_sequence(int64_t id) override {
    Slot& sl = slot(id);
    sl.live = false;
    sl.last_used = ++clock_;
  }

  const float* step(const std::vector<BatchItem>& items) override {
    const int64_t V = m_.hp.n_vocab;
    logits_.resize(items.size() * static_cast<size_t>(V));
    for (size_t i = 0; i < items.size(); ++i) {
      const BatchItem& it = items[i];
      Slot& sl = slot(it.seq);
      const auto n_past = static_cast<int64_t>(sl.tokens.size());
      if (it.n <= 0) fail("batch runner: a step item needs at least one token");
      if (n_past + it.n > n_ctx_)
        fail("context is full: {} tokens in the cache + {} new > --ctx-size {}", n_past, it.n, n_ctx_);
      for (int64_t t = 0; t < it.n; ++t)
        if (it.tokens[t] < 0 || it.tokens[t] >= V) fail("token id {} is out of range [0, {})", it.tokens[t], V);
      const int64_t U = sl.st->n_ubatch;
      try {
        for (int64_t i0 = 0; i0 < it.n; i0 += U) {
          const int64_t nb = std::min(U, it.n - i0);
          float* out = i0 + nb == it.n ? logits_.data() + i * V : nullptr;
          m_.forward(*sl.st, it.tokens + i0, nb, n_past + i0, out, false);
        }
      } catch (...) {
        sl.tokens.clear();  // a recurrent state half-way through a text is no prefix of anything
        throw;
      }
      sl.tokens.insert(sl.tokens.end(), it.tokens, it.tokens + it.n);
    }
    return logits_.data();
  }

  int64_t n_past(int64_t id) const override { return static_cast<int64_t>(slot(id).tokens.size()); }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_vocab() const override { return m_.hp.n_vocab; }
  int64_t max_sequences() const override { return max_seqs_; }
  int64_t max_step_tokens() const override { return n_ubatch_; }
  // Pages here are accounting only: each slot is a whole context of ceil(n_ctx / page) pages.
  KvPageStats kv_stats() const override { return whole_slot_kv_stats(ps_, n_ctx_, max_seqs_, slots_); }
  std::string describe() const override {
    return fmt::format("{}; batched: {} sequences, one KV cache each (serial)", sess_.describe(), max_seqs_);
  }

 private:
  struct Slot {
    bool live = false;
    uint64_t last_used = 0;
    std::unique_ptr<State> st;    // created on first use
    std::vector<int32_t> tokens;  // the text whose state st holds
  };
  Slot& slot(int64_t id) {
    if (id < 0 || id >= max_seqs_ || !slots_[id].live) fail("batch runner: no sequence {}", id);
    return slots_[id];
  }
  const Slot& slot(int64_t id) const { return const_cast<SerialBatchRunner*>(this)->slot(id); }

  Session& sess_;
  const model::Model& m_;
  int64_t n_ctx_, max_seqs_, ps_, n_ubatch_;
  std::vector<Slot> slots_;
  std::vector<float> logits_;
  uint64_t clock_ = 0;
};

}  // namespace

std::unique_ptr<BatchRunner> make_serial_batch_runner(Session& s, int64_t max_seqs, int64_t page_size) {
  return std::make_unique<SerialBatchRunner>(s, max_seqs, page_size);
}

}  // namespace ft::engine
