#include "engine/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "model/model.h"

namespace ft::engine {

Session::Session(const model::Model& m, const SessionOptions& o) : m_(m) {
  int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(m.hp.n_ctx_train, 4096);
  if (n_ctx <= 0) n_ctx = 4096;
  const int n_threads = o.n_threads > 0 ? o.n_threads : physical_cores();
  pool_ = std::make_unique<ThreadPool>(n_threads);
  st_ = std::make_unique<State>(m, *pool_, o.act, n_ctx, o.n_ubatch);
  st_->ex.act_quant = o.act_quant;
  logits_.resize(static_cast<size_t>(m.hp.n_vocab));
}

int64_t Session::n_vocab() const { return m_.hp.n_vocab; }

std::string Session::describe() const {
  return fmt::format("cpu, {} threads, {}{}", pool_->size(), act_type_name(st_->ex.act),
                     st_->ex.act_quant == quant::ActQuant::kQ8 ? " with Q8 matmul inputs" : "");
}

const float* Session::eval(const int32_t* tokens, int64_t n, bool all_logits) {
  if (n <= 0) fail("eval needs at least one token");
  if (n_past_ + n > st_->n_ctx)
    fail("context is full: {} tokens in the cache + {} new > --ctx-size {}", n_past_, n, st_->n_ctx);
  const int64_t V = m_.hp.n_vocab;
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V) fail("token id {} is out of range [0, {})", tokens[i], V);
  const size_t need = static_cast<size_t>((all_logits ? n : 1) * V);
  if (logits_.size() < need) logits_.resize(need);
  int64_t n_pass = 0;
  for (int64_t i0 = 0; i0 < n; i0 += st_->n_ubatch) {
    const int64_t nb = std::min(st_->n_ubatch, n - i0);
    // Without all_logits only the last batch's last row is wanted.
    float* out = all_logits ? logits_.data() + i0 * V : (i0 + nb == n ? logits_.data() : nullptr);
    m_.forward(*st_, tokens + i0, nb, n_past_, out, all_logits);
    n_past_ += nb;
    ++n_pass;
  }
  // What --ubatch-size did to a prompt (tests/cli/kv_type_test.cpp reads it under FT_LOG_LEVEL=debug).
  if (n > 1) log::debug("cpu eval: {} tokens, micro-batch {}, forward passes {}", n, st_->n_ubatch, n_pass);
  return logits_.data();
}

}  // namespace ft::engine
