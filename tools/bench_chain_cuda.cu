// ft-bench-chain-cuda: what a decode step's chain of launches costs against one persistent
// kernel doing the same phases behind grid barriers -- the question a decode megakernel has to
// answer before anyone writes one.
//
//   ft-bench-chain-cuda [--preset llama8b|qwen3moe|all] [--stages S] [--chunk-kib C] [--warps W]
//                       [--layers L] [--bw-gbs X] [--check]
//
// Why: sessions 12-14 (benches/h200.md) found that a decode layer's ~8 launches each cost a
// latency floor of a few microseconds (a 4.7 MB GEMV takes ~6 us, a 14 MB one ~11 us), so a step
// reads its 2.2-5.0 GB at 19-43% of HBM bandwidth although one launch of 33-66 MB of bulk copies
// reads at 74-87%. Only the first stages of a launch's weights can load before its PDL wait, and
// only where the launch before left room on the SM. A persistent kernel can stream the next
// phase's weights while the previous phase is finishing and the grid barrier is pending. This
// tool measures both on the same bytes, with no arithmetic beyond a checksum, so the difference
// is what the launch chain costs.
//
// The program: a step's phases with the weight bytes each reads (the presets are the Llama-8B and
// Qwen3-30B-A3B NVFP4 decode steps of benches/h200.md: norm, qkv, attention, wo, norm / router,
// gate+up, SwiGLU, down per layer, then the BF16 head), every phase and layer its own memory.
// Each phase p: every CTA reads the 4096-word activation row act[p] (written by all CTAs of
// phase p - 1), streams its contiguous slice of the phase's weights through a ring of bulk copies
// (cp.async.bulk into S stages of C bytes, a producer warp, W consumer warps), and writes its
// share of act[p + 1] from a wrapping sum of both. Modes (one CTA per SM in all, the same
// slicing, so the same words come out):
//   launches    one PDL launch per phase (the engine's shape): the producer issues its first
//               stages at once, before the consumers' PDL wait; the ring is small enough that
//               two CTAs fit an SM, so the next launch's CTAs can start under this one's tail;
//   persistent  one cooperative launch for the step; a grid barrier (release add / acquire
//               spin on one counter) between phases; the producer runs ahead into the next
//               phases' weights as far as the ring allows;
//   persist-nopf the same without running ahead: the producer waits for the barrier.
// Figures: microseconds per step (median of 7 graph replays) and GB/s of weight bytes against
// --bw-gbs. --check runs a small program in every mode and compares act with a host model of
// the same sums (exit 1 on a difference; 77 without a sm_90 device).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/bulk_copy.cuh"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_launch.h"
#include "cuda/pdl.cuh"
#include "graph_timer.cuh"

using namespace ft;
using namespace ft::cuda;

namespace {

constexpr int kActWords = 4096;  // one activation row, as the GEMVs' x (n_embd 4096 / 2048 x 2)
constexpr int kMaxStages = 16;

struct Chain {
  const uint8_t* w;       // all phases' weights, phase p at w + off[p]
  const int64_t* off;     // [n_phases]
  const int64_t* bytes;   // [n_phases], multiples of 16
  uint32_t* act;          // [(n_phases + 1) x kActWords]: phase p reads row p, writes row p + 1
  unsigned* arrive;       // grid barrier counter, zero at the start of a persistent launch
  int p0, p1;             // the phases of this launch
  int persistent;         // grid barriers between phases
  int run_ahead;          // persistent: the producer streams past the pending barrier
  int stages, chunk;      // ring: stages x chunk bytes (chunk a multiple of 16)
};

__device__ __forceinline__ uint32_t mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return h;
}

// CTA c's contiguous slice [b0, b1) of a phase of `bytes` bytes over g CTAs, 16-byte aligned.
__host__ __device__ inline void slice_of(int64_t bytes, int c, int g, int64_t& b0, int64_t& b1) {
  b0 = bytes / 16 * c / g * 16;
  b1 = bytes / 16 * (c + 1) / g * 16;
}

// Words [a0, a1) of the activation row that CTA c writes.
__host__ __device__ inline void act_share(int c, int g, int& a0, int& a1) {
  a0 = kActWords * c / g;
  a1 = kActWords * (c + 1) / g;
}

__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__global__ void chain_kernel(const Chain ch) {
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ uint32_t red_acc[32], red_x[32];
  __shared__ volatile int released;  // persistent without run-ahead: the last phase the barrier let through
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int n_cons = static_cast<int>(blockDim.x) - 32;  // consumer threads (warps 1..)
  const int g = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  const int S = ch.stages, C = ch.chunk;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], static_cast<uint32_t>(n_cons / 32));
    }
    released = ch.p0;
  }
  __syncthreads();

  if (warp == 0) {  // producer: lane 0 issues every chunk of every phase in order
    if (!ch.persistent) pdl_trigger();  // as the engine's kernels: the next launch may start its copies now
    if (lane != 0) return;
    int64_t q = 0;
    for (int p = ch.p0; p < ch.p1; ++p) {
      if (ch.persistent && !ch.run_ahead) {
        const long long t0 = clock64();
        while (released < p)
          if (clock64() - t0 > (1ll << 31)) __trap();
      }
      int64_t b0, b1;
      slice_of(ch.bytes[p], c, g, b0, b1);
      const uint8_t* src = ch.w + ch.off[p];
      for (int64_t o = b0; o < b1; o += C, ++q) {
        const int st = static_cast<int>(q % S);
        if (q >= S) mbar_wait(&empty[st], static_cast<uint32_t>((q / S - 1) & 1));
        const uint32_t len = static_cast<uint32_t>(b1 - o < C ? b1 - o : C);
        mbar_arrive_expect(&full[st], len);
        bulk_g2s(ring + static_cast<int64_t>(st) * C, src + o, len, &full[st]);
      }
    }
    return;
  }

  // Consumers.
  const int t = static_cast<int>(threadIdx.x) - 32;
  int64_t q = 0;
  for (int p = ch.p0; p < ch.p1; ++p) {
    if (!ch.persistent) {
      pdl_wait();
      pdl_trigger();
    } else if (p > ch.p0) {  // grid barrier: every CTA has written act[p]
      named_sync(1, n_cons);
      if (t == 0) {  // cooperative groups' grid.sync pattern: fence, arrive, spin, fence
        const unsigned target = static_cast<unsigned>(p - ch.p0) * static_cast<unsigned>(g);
        __threadfence();
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(ch.arrive) : "memory");
        unsigned v = 0;
        const long long t0 = clock64();
        for (;;) {  // a barrier that never opens traps after ~1 s (a launch error, not a hang)
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ch.arrive) : "memory");
          if (v >= target) break;
          if (clock64() - t0 > (1ll << 31)) __trap();
        }
        __threadfence();
        released = p;
      }
      named_sync(1, n_cons);
    }
    // The activation row (past L1: other CTAs wrote it).
    uint32_t xs = 0;
    for (int i = t; i < kActWords; i += n_cons) xs += __ldcg(ch.act + static_cast<int64_t>(p) * kActWords + i);
    // This CTA's weight slice.
    uint32_t acc = 0;
    int64_t b0, b1;
    slice_of(ch.bytes[p], c, g, b0, b1);
    for (int64_t o = b0; o < b1; o += C, ++q) {
      const int st = static_cast<int>(q % S);
      mbar_wait(&full[st], static_cast<uint32_t>((q / S) & 1));
      const int n16 = static_cast<int>((b1 - o < C ? b1 - o : C) / 16);
      const uint4* v = reinterpret_cast<const uint4*>(ring + static_cast<int64_t>(st) * C);
      for (int i = t; i < n16; i += n_cons) {
        const uint4 u = v[i];
        acc += u.x ^ u.y ^ u.z ^ u.w;
      }
      // These reads before the producer's next bulk write into the stage.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[st]);
    }
    // CTA sums (wrapping: any order gives the same words), then this CTA's share of act[p + 1].
    for (int o = 16; o > 0; o >>= 1) {
      acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
      xs += __shfl_xor_sync(0xFFFFFFFFu, xs, o);
    }
    if (lane == 0) red_acc[warp] = acc, red_x[warp] = xs;
    named_sync(1, n_cons);
    uint32_t a = 0, x = 0;
    for (int w = 1; w <= n_cons / 32; ++w) a += red_acc[w], x += red_x[w];
    int a0, a1;
    act_share(c, g, a0, a1);
    for (int i = a0 + t; i < a1; i += n_cons)
      ch.act[static_cast<int64_t>(p + 1) * kActWords + i] = mix(a + 0x9E3779B9u * x + static_cast<uint32_t>(i));
    named_sync(1, n_cons);  // red_* are rewritten by the next phase
  }
}

// Host model of the same words.
uint32_t mix_host(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return h;
}

struct Program {
  std::string name;
  std::vector<int64_t> bytes;  // per phase
  int per_layer = 0;           // phases a layer (for the per-layer figure)
  int layers = 0;
};

// NVFP4 rows of k columns: k / 64 blocks of 36 bytes.
int64_t nvfp4(int64_t rows, int64_t k) { return rows * (k / 64) * 36; }

Program preset(const std::string& name, int layers) {
  Program pr;
  pr.name = name;
  std::vector<int64_t> layer;
  int64_t head = 0;
  if (name == "llama8b") {  // Llama-3.1-8B: n_embd 4096, 32 / 8 heads of 128, n_ff 14336, BF16 head
    layer = {0, nvfp4(6144, 4096), 0, nvfp4(4096, 4096), 0, nvfp4(2 * 14336, 4096), 0, nvfp4(4096, 14336)};
    head = int64_t{128256} * 4096 * 2;
    pr.layers = layers > 0 ? layers : 32;
  } else {  // Qwen3-30B-A3B: n_embd 2048, 32 / 4 heads of 128, 8 of 128 experts of n_ff 768, F32 router
    layer = {0, nvfp4(5120, 2048), 0, nvfp4(2048, 4096), int64_t{128} * 2048 * 4, 8 * nvfp4(2 * 768, 2048), 0,
             8 * nvfp4(2048, 768)};
    head = int64_t{151936} * 2048 * 2;
    pr.layers = layers > 0 ? layers : 48;
  }
  pr.per_layer = static_cast<int>(layer.size());
  for (int l = 0; l < pr.layers; ++l) pr.bytes.insert(pr.bytes.end(), layer.begin(), layer.end());
  pr.bytes.push_back(head);
  return pr;
}

struct Setup {
  int stages = 6, chunk = 16384, warps = 8;
};

class Runner {
 public:
  Runner(const Program& pr, const Setup& su, bool random_weights) : pr_(pr), su_(su) {
    const int n = static_cast<int>(pr.bytes.size());
    std::vector<int64_t> off(n);
    int64_t total = 0;
    for (int p = 0; p < n; ++p) {
      off[p] = total;
      total += (pr.bytes[p] + 255) / 256 * 256;
    }
    total_ = total;
    w_ = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(total, 256)));
    if (random_weights) {
      std::vector<uint32_t> h(static_cast<size_t>(total / 4));
      for (size_t i = 0; i < h.size(); ++i) h[i] = mix_host(static_cast<uint32_t>(i) * 0x9E3779B1u + 7u);
      FT_CUDA_CHECK(cudaMemcpy(w_.get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice));
      host_w_ = std::move(h);
    } else {
      FT_CUDA_CHECK(cudaMemset(w_.get(), 0x5A, static_cast<size_t>(total)));
    }
    off_ = DeviceBuffer(n * sizeof(int64_t));
    bytes_ = DeviceBuffer(n * sizeof(int64_t));
    FT_CUDA_CHECK(cudaMemcpy(off_.get(), off.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    FT_CUDA_CHECK(cudaMemcpy(bytes_.get(), pr.bytes.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    act_ = DeviceBuffer(static_cast<size_t>(n + 1) * kActWords * 4);
    std::vector<uint32_t> a0(kActWords);
    for (int i = 0; i < kActWords; ++i) a0[i] = mix_host(static_cast<uint32_t>(i) + 12345u);
    act0_ = a0;
    FT_CUDA_CHECK(cudaMemset(act_.get(), 0, static_cast<size_t>(n + 1) * kActWords * 4));
    FT_CUDA_CHECK(cudaMemcpy(act_.get(), a0.data(), kActWords * 4, cudaMemcpyHostToDevice));
    arrive_ = DeviceBuffer(sizeof(unsigned));
    off_host_ = off;
    smem_ = static_cast<size_t>(su.stages) * su.chunk;
    gemv_detail::allow_max_dynamic_smem(chain_kernel);
    int blocks = 0;
    FT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, chain_kernel, threads(), smem_));
    ctas_per_sm_ = blocks;
    if (blocks < 1)
      fail_message("ft-bench-chain-cuda: a CTA of " + std::to_string(threads()) + " threads and " +
                   std::to_string(smem_) + " bytes of ring does not fit an SM; fewer --stages or a smaller --chunk-kib");
    FT_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  ~Runner() { cudaStreamDestroy(s_); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  int threads() const { return 32 * (1 + su_.warps); }
  int ctas_per_sm() const { return ctas_per_sm_; }
  int64_t weight_bytes() const {
    int64_t b = 0;
    for (int64_t x : pr_.bytes) b += x;
    return b;
  }

  // mode 0: launches, 1: persistent (run ahead), 2: persistent without running ahead.
  void enqueue(int mode) {
    const int n = static_cast<int>(pr_.bytes.size());
    Chain ch{};
    ch.w = w_.as<uint8_t>();
    ch.off = off_.as<int64_t>();
    ch.bytes = bytes_.as<int64_t>();
    ch.act = act_.as<uint32_t>();
    ch.arrive = arrive_.as<unsigned>();
    ch.stages = su_.stages;
    ch.chunk = su_.chunk;
    const dim3 grid(static_cast<unsigned>(ft::cuda::sm_count())), block(static_cast<unsigned>(threads()));
    if (mode == 0) {
      ch.persistent = 0;
      for (int p = 0; p < n; ++p) {
        ch.p0 = p;
        ch.p1 = p + 1;
        launch_pdl(chain_kernel, grid, block, smem_, s_, ch);
      }
      return;
    }
    ch.persistent = 1;
    ch.run_ahead = mode == 1;
    ch.p0 = 0;
    ch.p1 = n;
    FT_CUDA_CHECK(cudaMemsetAsync(arrive_.get(), 0, sizeof(unsigned), s_));
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem_;
    cfg.stream = s_;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    FT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, chain_kernel, ch));
  }

  // Median of 7 graph replays; a persistent step whose cooperative launch a graph does not take
  // is timed by events around a plain launch instead (one launch: its host latency is ~0.2% of a step).
  float step_us(int mode) {
    if (mode == 0 || graph_ok_) {
      try {
        return 1000.0f * tools::capture_median_ms(s_, [&] { enqueue(mode); });
      } catch (const std::exception& e) {
        cudaGraph_t g = nullptr;
        if (cudaStreamEndCapture(s_, &g) == cudaSuccess && g != nullptr) cudaGraphDestroy(g);
        cudaGetLastError();
        if (mode == 0) throw;
        std::fprintf(stderr, "ft-bench-chain-cuda: graph capture of the persistent launch failed (%s); timing it by events\n",
                     e.what());
        graph_ok_ = false;
      }
    }
    return 1000.0f * tools::events_median_ms(s_, [&] { enqueue(mode); });
  }

  // act after one step of `mode`, rows 1..n.
  std::vector<uint32_t> run_once(int mode) {
    const int n = static_cast<int>(pr_.bytes.size());
    FT_CUDA_CHECK(cudaMemsetAsync(act_.as<uint32_t>() + kActWords, 0, static_cast<size_t>(n) * kActWords * 4, s_));
    enqueue(mode);
    std::vector<uint32_t> out(static_cast<size_t>(n) * kActWords);
    FT_CUDA_CHECK(cudaMemcpyAsync(out.data(), act_.as<uint32_t>() + kActWords, out.size() * 4, cudaMemcpyDeviceToHost, s_));
    FT_CUDA_CHECK(cudaStreamSynchronize(s_));
    return out;
  }

  // The host model of run_once (random weights only).
  std::vector<uint32_t> model() const {
    const int n = static_cast<int>(pr_.bytes.size()), g = ft::cuda::sm_count();
    std::vector<uint32_t> prev = act0_, out;
    for (int p = 0; p < n; ++p) {
      uint32_t x = 0;
      for (uint32_t v : prev) x += v;
      std::vector<uint32_t> next(kActWords);
      for (int c = 0; c < g; ++c) {
        int64_t b0, b1;
        slice_of(pr_.bytes[p], c, g, b0, b1);
        uint32_t a = 0;
        for (int64_t o = b0; o < b1; o += 16) {
          const uint32_t* u = host_w_.data() + (off_host_[p] + o) / 4;
          a += u[0] ^ u[1] ^ u[2] ^ u[3];
        }
        int a0, a1;
        act_share(c, g, a0, a1);
        for (int i = a0; i < a1; ++i) next[i] = mix_host(a + 0x9E3779B9u * x + static_cast<uint32_t>(i));
      }
      out.insert(out.end(), next.begin(), next.end());
      prev = next;
    }
    return out;
  }

 private:
  Program pr_;
  Setup su_;
  DeviceBuffer w_, off_, bytes_, act_, arrive_;
  std::vector<int64_t> off_host_;
  std::vector<uint32_t> host_w_, act0_;
  int64_t total_ = 0;
  size_t smem_ = 0;
  int ctas_per_sm_ = 0;
  bool graph_ok_ = true;
  cudaStream_t s_ = nullptr;
};

const char* kModes[3] = {"launches (PDL)", "persistent", "persistent, no run-ahead"};

int check(const Setup& su) {
  // Small phases of odd sizes, empty ones between, a few layers: every mode's rows against the model.
  Program pr;
  pr.name = "check";
  const std::vector<int64_t> layer = {0, 16 * 12345, 0, 16 * 70001, 16, 16 * 300000, 0, 16 * 4099};
  pr.layers = 3;
  pr.per_layer = static_cast<int>(layer.size());
  for (int l = 0; l < pr.layers; ++l) pr.bytes.insert(pr.bytes.end(), layer.begin(), layer.end());
  pr.bytes.push_back(16 * 1000003);
  Runner r(pr, su, true);
  const std::vector<uint32_t> want = r.model();
  int bad = 0;
  for (int mode = 0; mode < 3; ++mode) {
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<uint32_t> got = r.run_once(mode);
      size_t diff = 0;
      for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
      if (diff != 0) {
        std::printf("check: %s, run %d: %zu of %zu words differ from the host model\n", kModes[mode], rep, diff,
                    got.size());
        ++bad;
      }
    }
  }
  std::printf("check (%d stages x %d bytes, %d consumer warps): %s\n", su.stages, su.chunk, su.warps,
              bad ? "FAILED" : "passed");
  return bad ? 1 : 0;
}

int bench(const std::string& which, const Setup& su, int layers, double bw) {
  std::printf("\n| program | phases | GB a step | mode | us a step | us a layer | GB/s | %% of %.0f GB/s | CTAs/SM fit |\n",
              bw);
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string name : {std::string("llama8b"), std::string("qwen3moe")}) {
    if (which != "all" && which != name) continue;
    const Program pr = preset(name, layers);
    Runner r(pr, su, false);
    const double gb = static_cast<double>(r.weight_bytes()) / 1e9;
    for (int mode = 0; mode < 3; ++mode) {
      const double us = r.step_us(mode);
      const double gbs = gb / (us * 1e-6);
      std::printf("| %s x%d | %zu | %.3f | %s | %.1f | %.2f | %.0f | %.1f | %d |\n", pr.name.c_str(), pr.layers,
                  pr.bytes.size(), gb, kModes[mode], us, us / pr.layers, gbs, 100.0 * gbs / bw, r.ctas_per_sm());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  Setup su;
  int layers = 0;
  double bw = 4562.0;
  bool do_check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ft-bench-chain-cuda: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--preset") which = next("--preset");
    else if (a == "--stages") su.stages = std::atoi(next("--stages"));
    else if (a == "--chunk-kib") su.chunk = 1024 * std::atoi(next("--chunk-kib"));
    else if (a == "--warps") su.warps = std::atoi(next("--warps"));
    else if (a == "--layers") layers = std::atoi(next("--layers"));
    else if (a == "--bw-gbs") bw = std::atof(next("--bw-gbs"));
    else if (a == "--check") do_check = true;
    else {
      std::fprintf(stderr,
                   "usage: ft-bench-chain-cuda [--preset llama8b|qwen3moe|all] [--stages S] [--chunk-kib C] "
                   "[--warps W] [--layers L] [--bw-gbs X] [--check]\n");
      return 2;
    }
  }
  if (su.stages < 2 || su.stages > kMaxStages || su.chunk < 1024 || su.chunk % 16 != 0 || su.warps < 1 ||
      su.warps > 31) {
    std::fprintf(stderr, "ft-bench-chain-cuda: needs 2 <= stages <= %d, chunk >= 1 KiB, 1 <= warps <= 31\n",
                 kMaxStages);
    return 2;
  }
  if (which != "all" && which != "llama8b" && which != "qwen3moe") {
    std::fprintf(stderr, "ft-bench-chain-cuda: unknown preset '%s' (llama8b, qwen3moe, all)\n", which.c_str());
    return 2;
  }
  if (!has_device() || !bulk_copy_supported()) {
    std::printf("ft-bench-chain-cuda: no sm_90+ CUDA device; skipped\n");
    return 77;
  }
  try {
    std::printf("%s\n", device_summary().c_str());
    if (do_check) return check(su);
    return bench(which, su, layers, bw);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
