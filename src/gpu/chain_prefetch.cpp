#include "gpu/chain_prefetch.h"

#include <algorithm>
#include <cstdlib>

#include "core/log.h"
#include "cuda/check.h"
#include "cuda/l2_prefetch.h"

namespace ft::gpu {
namespace {

// Tuning (H200, benches/h200.md "Session 18"; tg128, alternating in one call). Qwen3-30B-A3B,
// kWith (qkv and wo of its MoE layers): 403.6 / 402.5 / 403.2 vs 399.8 / 401.0 / 400.8 (call 2),
// 407.9 / 406.0 / 407.8 vs 405.6 / 402.1 / 403.5 (call 5). Llama-8B (dense FFN: its gate|up and
// down stream 99 MB between a fork and the use, more than L2): kWith 378.0 / 376.5 vs 397.7 /
// 390.8, capped at 12 MB 398.4 / 397.1, at 16 MB 384-386 vs 386-389 (calls 1, 3). The experts
// (kExpertsDown 4: 402.1 / 399.3 / 401.8; with gate and up, 12: 389.8 / 390.3 / 390.7) did not
// pay (call 2). So by default: kWith, at MoE layers only (ChainPrefetch::moe_only).
constexpr int kDefaultMode = ChainPrefetch::kWith;
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
  const char* e = std::getenv("FT_L2_PREFETCH");
  moe_only_ = mode < 0 && (e == nullptr || *e == '\0');
  if (mode < 0) mode = static_cast<int>(env_size("FT_L2_PREFETCH", kDefaultMode));
  mode_ = mode & (kWith | kAfter | kExpertsDown | kExpertsUp);
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

void ChainPrefetch::fork_experts(const DevExpertTensor& t, const int32_t* ids, int n_ids, cudaStream_t s) {
  if (mode_ == 0 || !t || t.w == nullptr) return;
  FT_CUDA_CHECK(cudaEventRecord(fork_ev_, s));
  FT_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_ev_, 0));
  cuda::l2_prefetch_experts(ids, n_ids, t.w, static_cast<size_t>(t.expert_bytes),
                            std::min(cap_, static_cast<size_t>(t.expert_bytes)), chunk_, side_);
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
