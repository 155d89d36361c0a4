// Weights a decode launch streams into L2 for a later launch (cp.async.bulk.prefetch.L2, sm_90+;
// nothing below it): hints that never change a computed bit. Two byte ranges; empty ones skipped.
//
// Spread over many CTAs, never issued by one: an SM's bulk-copy engine moves ~250 GB/s, and a CTA
// does not retire before its prefetches have. H100 session 42 (bench/session42/h200_b.sh): the decode
// FFN norm (one CTA) prefetching 16 / 24 / 32 / 40 MB of gate|up cut Llama-8B tg128 from 455.6 to
// 238.1 / 192.5 / 158.9 / 137.8 tok/s, i.e. ~63 us a layer for 16 MB.
#pragma once

#include <cstdint>

namespace ft::cuda {

struct L2Ahead {
  const void* p[2] = {nullptr, nullptr};
  int64_t bytes[2] = {0, 0};
  bool empty() const { return bytes[0] <= 0 && bytes[1] <= 0; }
};

}  // namespace ft::cuda
