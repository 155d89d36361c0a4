#include "gpu/cpu_handshake.h"

#include <cuda.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/check.h"
#include "moe_cpu/cpu_topology.h"

namespace ft::gpu {
namespace {

// Each flag on its own 64-byte line: the GPU's writes to one must not invalidate the line
// the coordinator polls for another.
constexpr size_t kFlagStride = 64;

using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

uint32_t load_acquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") != 0 && *v != '\0';
}

int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

MappedHostBuffer::MappedHostBuffer(size_t bytes) : bytes_(bytes) {
  void* p = nullptr;
  FT_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<uint8_t*>(p);
  std::memset(host_, 0, bytes);
  void* d = nullptr;
  FT_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
  dev_ = static_cast<uint8_t*>(d);
}

MappedHostBuffer::~MappedHostBuffer() {
  if (host_) cudaFreeHost(host_);
}

CpuHandshake::CpuHandshake(const CpuHandshakeOptions& o, Handler handler, Handler after)
    : o_(o), handler_(std::move(handler)), after_(std::move(after)) {
  if (o_.n_slots < 1) fail("CpuHandshake: {} flag slots (need at least 1)", o_.n_slots);
  if (const char* c = std::getenv("FT_MOE_CLOCK"); c && c[0] == '1') {
    trace_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(2 * o_.n_slots));
    for (int i = 0; i < 2 * o_.n_slots; ++i) trace_[i] = 0;
  }
  // Slot n_slots is the self-test's.
  flags_ = MappedHostBuffer(static_cast<size_t>(o_.n_slots + 1) * 2 * kFlagStride);
  ctx_.resize(static_cast<size_t>(o_.n_slots + 1));
  for (int i = 0; i <= o_.n_slots; ++i) ctx_[i] = {this, i};
  std::string why;
  if (o_.force_host_func || env_true("FT_MOE_CPU_HOSTFUNC")) {
    why = "forced (FT_MOE_CPU_HOSTFUNC)";
  } else if (load_driver_entry_points(why)) {
    mem_ops_ = true;
    if (!self_test(why)) mem_ops_ = false;
  }
  how_ = mem_ops_ ? "stream memory ops (cuStreamWriteValue32 / cuStreamWaitValue32 on mapped flags, graph-capturable)"
                  : "cudaLaunchHostFunc fallback: " + why;
  if (!mem_ops_) log::warn("moe cpu handshake: {}", how_);
  thread_ = std::thread([this] { coordinator(); });
}

CpuHandshake::~CpuHandshake() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

uint32_t* CpuHandshake::ready_host(int slot) const {
  return reinterpret_cast<uint32_t*>(flags_.host() + static_cast<size_t>(slot) * 2 * kFlagStride);
}
uint32_t* CpuHandshake::done_host(int slot) const {
  return reinterpret_cast<uint32_t*>(flags_.host() + (static_cast<size_t>(slot) * 2 + 1) * kFlagStride);
}
uint8_t* CpuHandshake::ready_dev(int slot) const { return flags_.dev() + static_cast<size_t>(slot) * 2 * kFlagStride; }
uint8_t* CpuHandshake::done_dev(int slot) const {
  return flags_.dev() + (static_cast<size_t>(slot) * 2 + 1) * kFlagStride;
}

bool CpuHandshake::load_driver_entry_points(std::string& why) {
  // Through the runtime, so ft_cuda needs no link to libcuda.
  cudaDriverEntryPointQueryResult q1 = cudaDriverEntryPointSymbolNotFound, q2 = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e1 = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write_fn_, 12000,
                                                          cudaEnableDefault, &q1);
  const cudaError_t e2 = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait_fn_, 12000,
                                                          cudaEnableDefault, &q2);
  if (e1 != cudaSuccess || e2 != cudaSuccess || q1 != cudaDriverEntryPointSuccess ||
      q2 != cudaDriverEntryPointSuccess || !write_fn_ || !wait_fn_) {
    cudaGetLastError();
    why = fmt::format("driver entry points cuStreamWriteValue32/cuStreamWaitValue32 not found ({} / {})",
                      cudaGetErrorName(e1), cudaGetErrorName(e2));
    return false;
  }
  return true;
}

void CpuHandshake::submit(int slot, cudaStream_t s) {
  if (mem_ops_) {
    const CUresult r = reinterpret_cast<WriteValueFn>(write_fn_)(
        reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(ready_dev(slot)), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS) fail("cuStreamWriteValue32 (moe cpu ready flag {}) failed: CUresult {}", slot, int(r));
    return;
  }
  FT_CUDA_CHECK(cudaLaunchHostFunc(
      s,
      [](void* p) {
        auto* c = static_cast<HostFuncCtx*>(p);
        store_release(c->self->ready_host(c->slot), 1);
      },
      &ctx_[static_cast<size_t>(slot)]));
}

void CpuHandshake::wait(int slot, cudaStream_t s) {
  if (mem_ops_) {
    auto wait = reinterpret_cast<WaitValueFn>(wait_fn_);
    auto write = reinterpret_cast<WriteValueFn>(write_fn_);
    CUresult r = wait(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(done_dev(slot)), 1,
                      CU_STREAM_WAIT_VALUE_EQ);
    if (r == CUDA_SUCCESS)
      r = write(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(done_dev(slot)), 0,
                CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS) fail("cuStreamWaitValue32 (moe cpu done flag {}) failed: CUresult {}", slot, int(r));
    return;
  }
  FT_CUDA_CHECK(cudaLaunchHostFunc(
      s,
      [](void* p) {
        // Spin briefly, then sleep on the flag (futex): a callback thread spinning for the
        // whole CPU task took a core from a pinned worker, and the H200 run's ft bench with
        // FT_MOE_CPU_HOSTFUNC=1 did not finish 32 tokens in 25 s.
        auto* c = static_cast<HostFuncCtx*>(p);
        uint32_t* done = c->self->done_host(c->slot);
        for (int i = 0; i < 2048 && load_acquire(done) != 1; ++i) cpu_pause();
        std::atomic_ref<uint32_t> d(*done);
        while (d.load(std::memory_order_acquire) != 1) d.wait(0, std::memory_order_acquire);
        store_release(done, 0);
      },
      &ctx_[static_cast<size_t>(slot)]));
}

// Runs the protocol on the test slot, this thread playing the CPU side: eagerly, then as a
// captured graph replayed twice. A GPU that never raises the flag within a second counts as
// unsupported (the stream is released by setting done anyway).
bool CpuHandshake::self_test(std::string& why) {
  const int slot = o_.n_slots;
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    why = "no stream for the self-test";
    return false;
  }
  auto play_cpu = [&]() {
    const auto t0 = std::chrono::steady_clock::now();
    bool seen = false;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
      if (load_acquire(ready_host(slot)) == 1) {
        seen = true;
        break;
      }
      cpu_pause();
    }
    store_release(ready_host(slot), 0);
    store_release(done_host(slot), 1);
    const bool ok = cudaStreamSynchronize(s) == cudaSuccess && load_acquire(done_host(slot)) == 0;
    cudaGetLastError();
    return seen && ok;
  };
  bool ok = true;
  try {
    submit(slot, s);
    wait(slot, s);
    ok = play_cpu();
    if (!ok) why = "self-test: the eager write/wait value ops did not complete";
    if (ok) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
      if (ok) {
        try {
          submit(slot, s);
          wait(slot, s);
        } catch (const Error&) {
          ok = false;
        }
        ok = cudaStreamEndCapture(s, &g) == cudaSuccess && ok;
      }
      ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
      for (int rep = 0; ok && rep < 2; ++rep) ok = cudaGraphLaunch(ge, s) == cudaSuccess && play_cpu();
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      if (!ok) why = "self-test: write/wait value ops failed under CUDA graph capture";
    }
  } catch (const Error& e) {
    ok = false;
    why = fmt::format("self-test: {}", e.what());
  }
  cudaStreamDestroy(s);
  return ok;
}

void CpuHandshake::coordinator() {
  if (o_.coordinator_cpu >= 0) moe_cpu::pin_current_thread(o_.coordinator_cpu);
  using clock = std::chrono::steady_clock;
  auto last_task = clock::now();
  int cursor = 0;
  const int n = o_.n_slots;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool found = false;
    // Layers arrive in order: look at the expected one first.
    for (int i = 0; i < n; ++i) {
      const int slot = (cursor + i) % n;
      if (load_acquire(ready_host(slot)) != 1) continue;
      store_release(ready_host(slot), 0);
      const auto t0 = clock::now();
      if (trace_) trace_[2 * slot].store(ns_of(t0), std::memory_order_relaxed);
      handler_(slot);
      const auto t1 = clock::now();
      if (trace_) trace_[2 * slot + 1].store(ns_of(t1), std::memory_order_relaxed);
      store_release(done_host(slot), 1);
      if (!mem_ops_) std::atomic_ref<uint32_t>(*done_host(slot)).notify_all();  // the sleeping callback
      busy_ns_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()),
                         std::memory_order_relaxed);
      tasks_.fetch_add(1, std::memory_order_relaxed);
      cursor = (slot + 1) % n;
      if (after_) after_(slot);
      last_task = t1;
      found = true;
      break;
    }
    if (found) continue;
    if (clock::now() - last_task < kIdleSpin) {
      for (int i = 0; i < 16; ++i) cpu_pause();
    } else {
      std::this_thread::sleep_for(kIdleSleep);
    }
  }
}

}  // namespace ft::gpu
