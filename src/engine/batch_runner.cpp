#include "engine/batch_runner.h"

#include "engine/batch_impl.h"
#include "engine/session.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::engine {

namespace {

std::vector<BatchRunnerFactory>& factories() {
  static std::vector<BatchRunnerFactory> f;
  return f;
}

}  // namespace

void register_batch_runner_factory(BatchRunnerFactory f) {
  for (BatchRunnerFactory g : factories())
    if (g == f) return;
  factories().push_back(f);
}

std::unique_ptr<BatchRunner> make_batch_runner(Runner& r, int64_t max_seqs, int64_t page_size) {
  auto* s = dynamic_cast<Session*>(&r);
  if (!s) {
    for (BatchRunnerFactory f : factories())
      if (auto b = f(r, max_seqs, page_size)) return b;
    return nullptr;
  }
  if (s->model().arch->forward == &model::decoder_forward) return make_paged_batch_runner(*s, max_seqs, page_size);
  return make_serial_batch_runner(*s, max_seqs, page_size);
}

}  // namespace ft::engine
