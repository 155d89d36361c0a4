#include "engine/batch_runner.h"

#include "engine/batch_impl.h"
#include "engine/session.h"
#include "model/decoder.h"
#include "model/model.h"

namespace ft::engine {

std::unique_ptr<BatchRunner> make_batch_runner(Runner& r, int64_t max_seqs, int64_t page_size) {
  auto* s = dynamic_cast<Session*>(&r);
  if (!s) return nullptr;
  if (s->model().arch->forward == &model::decoder_forward) return make_paged_batch_runner(*s, max_seqs, page_size);
  return make_serial_batch_runner(*s, max_seqs, page_size);
}

}  // namespace ft::engine
