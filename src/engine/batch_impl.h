// The two BatchRunner implementations behind make_batch_runner (engine/batch_runner.h).
#pragma once

#include <memory>

#include "engine/batch_runner.h"

namespace ft::engine {

class Session;

// Paged KV cache, one forward for all sequences (archs whose forward is decoder_forward).
std::unique_ptr<BatchRunner> make_paged_batch_runner(Session& s, int64_t max_seqs, int64_t page_size);
// One State per sequence slot, stepped in turn (any arch).
std::unique_ptr<BatchRunner> make_serial_batch_runner(Session& s, int64_t max_seqs, int64_t page_size);

}  // namespace ft::engine
