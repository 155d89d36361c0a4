#include "gpu/chain_prefetch.h"

#include <algorithm>
#include <cstdlib>

#include "core/log.h"
#include "cuda/check.h"
#include "cuda/l2_prefetch.h"

namespace ft::gpu {
namespace {

// Tuning (H200; benches/h200.md "Session 18").
constexpr int kDefaultMode = 0;
constexpr size_t kDefaultMiB = 32;
constexpr size_t kDefaultKiB = 32;

size_t env_size(const char* name, size_t dflt) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return dflt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(e, &end, 10);
  if (*end != '\0') {
    log::warn("{}={} is not a number; using {}", name, e, dflt);
    return dflt;
  }
  return static_cast<size_t>(v);
}

}  // namespace

ChainPrefetch::ChainPrefetch(int mode) {
  mode_ = (mode >= 0 ? mode : static_cast<int>(env_size("FT_L2_PREFETCH", kDefaultMode))) & (kWith | kAfter);
  cap_ = env_size("FT_L2_PREFETCH_MB", kDefaultMiB) << 20;
  chunk_ = std::max<size_t>(16, env_size("FT_L2_PREFETCH_KB", kDefaultKiB) << 10);
  if (mode_ == 0 || cap_ == 0 || !cuda::l2_prefetch_supported()) {
    mode_ = 0;
    return;
  }
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&fork_ev_, cudaEventDisableTiming));
  FT_CUDA_CHECK(cudaEventCreateWithFlags(&join_ev_, cudaEventDisableTiming));
}

ChainPrefetch::~ChainPrefetch() {
  if (side_ != nullptr) cudaStreamDestroy(side_);
  if (fork_ev_ != nullptr) cudaEventDestroy(fork_ev_);
  if (join_ev_ != nullptr) cudaEventDestroy(join_ev_);
}

void ChainPrefetch::fork(const DevLinear& l, cudaStream_t s) {
  if (mode_ == 0 || l.empty()) return;
  FT_CUDA_CHECK(cudaEventRecord(fork_ev_, s));
  FT_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_ev_, 0));
  size_t left = cap_;
  for (const DevMatrix& p : l.parts) {
    const size_t bytes = std::min(left, static_cast<size_t>(p.rows * p.row_bytes));
    cuda::l2_prefetch(p.w, bytes, chunk_, side_);
    left -= bytes;
    if (left == 0) break;
  }
  pending_ = true;
  ++forks_;
}

void ChainPrefetch::join(cudaStream_t s) {
  if (!pending_) return;
  FT_CUDA_CHECK(cudaEventRecord(join_ev_, side_));
  FT_CUDA_CHECK(cudaStreamWaitEvent(s, join_ev_, 0));
  pending_ = false;
}

}  // namespace ft::gpu
