// GPU <-> CPU handshake of the cpu and hybrid MoE backends, without a host callback per
// layer: per layer a pair of 32-bit flags in mapped pinned memory.
//
//   GPU stream                                    coordinator thread (CPU)
//   (task written into mapped memory)
//   cuStreamWriteValue32(ready[l], 1)   ------>   sees ready[l] == 1, sets ready[l] = 0,
//   (other GPU work: hybrid's fetch + GEMV)        runs the handler (the experts), then
//   cuStreamWaitValue32(done[l] == 1)   <------   done[l] = 1 (release)
//   cuStreamWriteValue32(done[l], 0)
//   (add the CPU's result into x)
//
// Every value is fixed, so the same ops are valid inside a captured CUDA graph, replayed
// for every token. The write-value op fences the kernel writes before it (no
// NO_MEMORY_BARRIER flag), so the task is visible before the flag. No kernel spins: the
// stream waits in the front end, so GPU utilisation stays honest.
//
// Support is measured, not assumed: at construction a self-test runs the protocol eagerly
// and inside a captured graph (with this thread playing the CPU side). If the driver entry
// points, the ops or their capture fail, or FT_MOE_CPU_HOSTFUNC=1, the handshake falls back
// to cudaLaunchHostFunc nodes (submit: set ready; wait: spin until done) and says so in
// describe(): correct, but ~30-50 us per callback (the original's measurement).
//
// The coordinator busy-polls (pause) while tasks arrive and, after kIdleSpin without one,
// sleeps kIdleSleep between polls, so an idle server does not burn a core; the first layer
// after an idle period waits at most kIdleSleep.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace ft::gpu {

// Page-locked host memory mapped into the device's address space.
class MappedHostBuffer {
 public:
  MappedHostBuffer() = default;
  explicit MappedHostBuffer(size_t bytes);  // zeroed; throws ft::Error on failure
  ~MappedHostBuffer();
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
  MappedHostBuffer(MappedHostBuffer&& o) noexcept { swap(o); }
  MappedHostBuffer& operator=(MappedHostBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  uint8_t* host() const { return host_; }
  uint8_t* dev() const { return dev_; }
  size_t bytes() const { return bytes_; }

 private:
  void swap(MappedHostBuffer& o) noexcept {
    std::swap(host_, o.host_);
    std::swap(dev_, o.dev_);
    std::swap(bytes_, o.bytes_);
  }
  uint8_t* host_ = nullptr;
  uint8_t* dev_ = nullptr;
  size_t bytes_ = 0;
};

struct CpuHandshakeOptions {
  int n_slots = 1;             // flag pairs (one per MoE layer)
  int coordinator_cpu = -1;    // pin the coordinator here (-1: not pinned)
  bool force_host_func = false;  // also FT_MOE_CPU_HOSTFUNC=1
};

class CpuHandshake {
 public:
  // handler(slot) runs on the coordinator thread for every submitted task; it must not call
  // CUDA (the stream may be inside a capture, and it may run from a CUDA callback).
  using Handler = std::function<void(int slot)>;
  // after(slot), if given, runs on the coordinator right after task `slot`'s done flag is
  // raised (the stream goes on meanwhile): work for the gap before the next task.
  CpuHandshake(const CpuHandshakeOptions& o, Handler handler, Handler after = nullptr);
  ~CpuHandshake();
  CpuHandshake(const CpuHandshake&) = delete;
  CpuHandshake& operator=(const CpuHandshake&) = delete;

  // Enqueue on s (capturable): signal task `slot` ready after the work before it ...
  void submit(int slot, cudaStream_t s);
  // ... and make the work after it wait for the CPU to finish that task.
  void wait(int slot, cudaStream_t s);

  // Task `slot`'s ready flag as the coordinator sees it (non-zero: submitted, not yet taken):
  // lets after() stop early when the next task arrives.
  const volatile uint32_t* ready_flag(int slot) const { return ready_host(slot); }

  bool stream_mem_ops() const { return mem_ops_; }
  // "stream memory ops (write/wait value, graph-capturable)" or the fallback and why.
  std::string describe() const { return how_; }

  // FT_MOE_CLOCK=1 (a diagnostic, gpu/layer_clock.h): the steady clock (ns) when the
  // coordinator last saw task `slot`'s ready flag and when it raised its done flag; 0 when off
  // or not yet served.
  int64_t seen_ns(int slot) const { return trace_ ? trace_[2 * slot].load(std::memory_order_relaxed) : 0; }
  int64_t done_ns(int slot) const { return trace_ ? trace_[2 * slot + 1].load(std::memory_order_relaxed) : 0; }

  // Tasks served and time the coordinator spent in the handler.
  uint64_t tasks() const { return tasks_.load(std::memory_order_relaxed); }
  double busy_seconds() const { return static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9; }

  static constexpr auto kIdleSpin = std::chrono::milliseconds(50);

  static constexpr auto kIdleSleep = std::chrono::microseconds(100);

 private:
  struct HostFuncCtx {
    CpuHandshake* self;
    int slot;
  };
  uint32_t* ready_host(int slot) const;
  uint32_t* done_host(int slot) const;
  uint8_t* ready_dev(int slot) const;
  uint8_t* done_dev(int slot) const;
  bool load_driver_entry_points(std::string& why);
  bool self_test(std::string& why);
  void coordinator();

  CpuHandshakeOptions o_;
  Handler handler_, after_;
  MappedHostBuffer flags_;
  std::vector<HostFuncCtx> ctx_;
  bool mem_ops_ = false;
  std::string how_;
  void* write_fn_ = nullptr;  // cuStreamWriteValue32
  void* wait_fn_ = nullptr;   // cuStreamWaitValue32
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> tasks_{0}, busy_ns_{0};
  std::unique_ptr<std::atomic<int64_t>[]> trace_;  // [n_slots][seen, done] (FT_MOE_CLOCK=1)
  std::thread thread_;
};

}  // namespace ft::gpu
