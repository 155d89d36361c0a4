// A persistent pool of worker threads for data-parallel loops (matmul rows, attention
// heads, expert work lists). The calling thread takes part in every loop, so a pool of
// n threads starts n-1 workers.
//
// Decode runs a few hundred short loops per token, so waking workers must be cheap:
// workers spin on a generation counter for a while after each loop (they are hot for
// the next matmul) and only then sleep on a futex (std::atomic::wait). A loop never
// allocates: the body is passed as a pointer to the caller's callable.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace ft {

// Number of physical cores (unique package/core pairs in sysfs); falls back to
// std::thread::hardware_concurrency(), and to 1.
int physical_cores();

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(i0, i1, thread_id) for chunks [i0, i1) covering [0, n), chunks of at most
  // `grain` items handed out dynamically (a one-thread pool, or n <= grain, gets a single
  // call over [0, n)). Returns when all chunks are done. Not reentrant:
  // a body must not call parallel_for on the same pool.
  template <class Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n, 0);
      return;
    }
    using F = std::remove_reference_t<Fn>;
    run(n, grain, [](void* ctx, int64_t a, int64_t b, int tid) { (*static_cast<F*>(ctx))(a, b, tid); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Chunk size that gives every thread about `chunks_per_thread` chunks of a loop over n
  // items, rounded up to a multiple of `align` (kernels like row counts in multiples of 4/8).
  int64_t grain_for(int64_t n, int64_t align = 1, int chunks_per_thread = 4) const;

 private:
  using Body = void (*)(void* ctx, int64_t i0, int64_t i1, int tid);
  void run(int64_t n, int64_t grain, Body body, void* ctx);
  void worker(int tid);
  void work(int tid);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The current loop, published by bumping gen_.
  Body body_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  alignas(64) std::atomic<int64_t> next_{0};
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> busy_{0};  // workers still inside the current loop
  std::atomic<bool> stop_{false};
};

}  // namespace ft
