// Decode's weights into L2 from a side branch of the step (cuda/l2_prefetch.h says why): fork()
// records where the main stream is, and a prefetch of the next projection's first bytes runs on
// a side stream from there, beside the launches that follow; join() ties the side stream back
// before the step ends (a captured graph must end on its origin stream). The forward places
// the forks (gpu/forward.cpp): kWith before the projection ahead of the one to prefetch, so the
// side branch starts when the launch before that one completes; kAfter right after it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpu/weights.h"

namespace ft::gpu {

class ChainPrefetch {
 public:
  enum When : int { kWith = 1, kAfter = 2 };

  // mode: a mask of When, 0 off; -1: FT_L2_PREFETCH, else kDefaultMode. FT_L2_PREFETCH_MB (bytes
  // a fork asks for, from the start of the projection), FT_L2_PREFETCH_KB (bytes a thread's bulk
  // prefetch covers); the defaults are tuning (chain_prefetch.cpp). Off where
  // cuda::l2_prefetch_supported() is not.
  explicit ChainPrefetch(int mode);
  ~ChainPrefetch();
  ChainPrefetch(const ChainPrefetch&) = delete;
  ChainPrefetch& operator=(const ChainPrefetch&) = delete;

  bool on(When w) const { return (mode_ & w) != 0; }
  int mode() const { return mode_; }
  // Forks since construction (a test's proof that the branch ran).
  int64_t forks() const { return forks_; }
  // Prefetch l's parts (at most the cap in all) on the side stream, after what s has enqueued.
  void fork(const DevLinear& l, cudaStream_t s);
  // s waits for every fork since the last join (nothing when there was none).
  void join(cudaStream_t s);

 private:
  int mode_ = 0;
  size_t cap_ = 0, chunk_ = 0;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ev_ = nullptr, join_ev_ = nullptr;
  bool pending_ = false;
  int64_t forks_ = 0;
};

}  // namespace ft::gpu
