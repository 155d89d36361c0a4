#include "gpu/session.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/proc_mem.h"
#include "cuda/check.h"
#include "cuda/deltanet.h"
#include "cuda/device.h"
#include "cuda/gemv.h"
#include "engine/sampler.h"
#include "gpu/moe_offload.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

bool step_clock_on() {
  static const bool on = [] {
    const char* e = std::getenv("FT_STEP_CLOCK");
    return e != nullptr && e[0] == '1';
  }();
  return on;
}

// Live keys from which one decode token takes the tensor-core decode attention (after its own
// rope + KV store launch) instead of the fused dedicated kernel. ft-bench-attention-cuda on the
// H200 (session 16, f16, us a launch, dedicated / mma): Qwen3-30B-A3B 3.9 / 6.3 at 8 keys, 11.8 /
// 8.6 at 512, 20.5 / 11.5 at 4096, 39.9 / 25.9 at 16384; Llama-8B 3.9 / 6.5, 12.0 / 9.0,
// 21.3 / 18.2, 43.2 / 31.7. Session 17, with the kernel's 128-key chunks
// (attn_decode_tuning.cuh): Qwen3-30B-A3B 3.9 / 6.2 at 8 keys, 11.9 / 8.1 at 512, 20.7 / 10.6
// at 4096; Llama-8B 4.0 / 5.8, 12.1 / 9.0, 21.5 / 12.9 -- and end to end tg128 at depth 512
// (keys 512..640) with the threshold at 256 against 1024: Qwen3-30B-A3B 404.8 vs 344.8,
// Llama-8B 393.3 vs 357.2 (depths 1024 / 2048 and 0 unchanged). GpuSessionOptions::
// attn_mma_min_keys or FT_ATTN_MMA_MIN_KEYS=N sets it, 0 turns the kernel off.
constexpr int64_t kMmaMinKeys = 256;
int64_t mma_min_keys(int64_t option) {
  if (option >= 0) return option;
  const char* e = std::getenv("FT_ATTN_MMA_MIN_KEYS");
  return e != nullptr ? std::atoll(e) : kMmaMinKeys;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// gemma4 auto's exact prefill GEMMs (the Q8 inputs): 3 bf16 parts by default (cuda/gemm.h:
// fp32-exact products; emulated on Q8 x NVFP4 rows, k 256..2816: max error 0.4-1.9e-6 S2
// against 1.3-3.7e-6 S2 for an fp32 FMA chain, where 2 parts reach 6.5-7.3e-6 S2 and bf16 x
// 4.5-5.8e-3 S2); 3 parts cost 1.5x the tensor-core work of 2. H200, Gemma-4-26B-A4B-shaped
// NVFP4, pp512 (benches/h200.md, session 6): x3 6,135, x2 6,604, f32 3,254 tok/s (bf16
// operands, FT_GEMMA4_AUTO=cuda: 7,546); x2 against x3 and the CPU engine: Gemma4Q8Prefill
// (tests/cuda/gemma4_session_test.cpp).
// FT_GEMMA4_Q8_PREFILL=f32 keeps the fp32 GEMM (cuBLAS SGEMM / the fp32 grouped kernel), =x2
// the 2-part split: fallback and speed A/B.
cuda::GemmPrec gemma4_exact_prec() {
  const char* e = std::getenv("FT_GEMMA4_Q8_PREFILL");
  if (e == nullptr || std::strcmp(e, "x3") == 0) return cuda::GemmPrec::kBF16x3;
  if (std::strcmp(e, "f32") == 0) return cuda::GemmPrec::kF32;
  if (std::strcmp(e, "x2") == 0) return cuda::GemmPrec::kBF16x2;
  fail("FT_GEMMA4_Q8_PREFILL='{}' is not one of f32, x2, x3", e);
}

// --kv-type: nullopt for auto (the KV type that --dtype and the architecture choose below).
std::optional<cuda::KvType> kv_type_option(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "f32") return cuda::KvType::kF32;
  if (name == "f16") return cuda::KvType::kF16;
  if (name == "bf16") return cuda::KvType::kBF16;
  fail("--kv-type '{}' is not one of auto, f32, f16, bf16", name);
}

}  // namespace

GpuNumerics gpu_numerics(const std::string& dtype, const std::string& arch) {
  GpuNumerics n;
  if (dtype == "float32") {
    n = {cuda::Round::kNone, cuda::KvType::kF32, cuda::GemmPrec::kF32, false};
  } else if (dtype == "bfloat16") {
    n = {cuda::Round::kBF16, cuda::KvType::kBF16, cuda::GemmPrec::kBF16, false};
  } else if (dtype == "float16") {
    n = {cuda::Round::kF16, cuda::KvType::kF16, cuda::GemmPrec::kF16, false};
  } else if (dtype == "auto") {
    n = {cuda::Round::kNone, cuda::KvType::kF16, cuda::GemmPrec::kBF16, true};
  } else {
    fail("--dtype '{}' is not one of auto, float32, bfloat16, float16", dtype);
  }
  // gemma4 in auto: llama.cpp's CPU numerics (the parity oracle's, and the CPU engine's auto):
  // an fp32 KV cache and Q8 inputs to the prefill GEMMs of Q8_0-dot weights (state.h). The tiny
  // gemma4 models amplify rounding: the CPU engine with its KV stored as f16 leaves llama.cpp
  // at a top-2 margin of 0.47 on parity's moe-bf16; with bf16 operands in those prefill GEMMs
  // its prompt logits move by 2.1 on gemma4_session_test's moe_nvfp4 (0 and 0 as is).
  // FT_GEMMA4_AUTO=cuda keeps llama.cpp CUDA's numerics there (f16 KV, bf16 prefill operands,
  // fp32 inputs to BF16 matmuls): the speed A/B of that choice.
  const char* g4_auto = std::getenv("FT_GEMMA4_AUTO");
  if (dtype == "auto" && arch == "gemma4" && !(g4_auto && std::strcmp(g4_auto, "cuda") == 0)) {
    n.kv = cuda::KvType::kF32;
    n.q8_prefill = true;
    n.half_inputs = true;
    n.exact_prec = gemma4_exact_prec();
  }
  return n;
}

bool gpu_supports(const model::Model& m) {
  const std::string a = m.arch->name;
  if (a == "qwen35" || a == "qwen35moe") return cuda::deltanet_supported(m.gdn_shape.d_head);
  return a == "llama" || a == "qwen3" || a == "qwen3moe" || a == "gemma4";
}

GpuSession::GpuSession(const model::Model& m, const GpuSessionOptions& o)
    : m_(m), dtype_(o.dtype), num_(gpu_numerics(o.dtype, m.arch->name)), graphs_(o.graphs),
      mma_min_keys_(mma_min_keys(o.attn_mma_min_keys)) {
  if (!cuda::has_device()) fail("--device cuda: no CUDA device is available (driver and GPU needed)");
  if (!gpu_supports(m))
    fail("{}: the CUDA backend does not run architecture '{}' yet; use --device cpu", m.file->path(), m.arch->name);
  if (const char* e = std::getenv("FT_CUDA_GRAPHS"); e && std::strcmp(e, "0") == 0) graphs_ = false;
  const std::optional<cuda::KvType> kv_forced = kv_type_option(o.kv_type);  // checked before the upload
  int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(m.hp.n_ctx_train, 4096);
  if (n_ctx <= 0) n_ctx = 4096;
  FT_CUDA_CHECK(cudaFree(nullptr));  // the context exists before the first reading
  if (const std::string cc = cuda::apply_cache_config_env(); !cc.empty())
    log::info("cuda: FT_CUDA_CACHE_CONFIG={} (device-wide L1 / shared-memory preference)", cc);
  size_t free_before = 0, total = 0;
  FT_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  FT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  std::string why;
  const std::string backend = choose_moe_backend(m, o.moe, free_before, &why);
  if (backend != "fused") {
    host_banks_ = std::make_shared<HostBanks>(m, o.progress);
    log::info("moe: host banks {:.1f} MiB pinned (routed experts of {} layers)",
              static_cast<double>(host_banks_->bytes()) / (1024.0 * 1024.0), m.hp.n_layer);
  }
  w_ = std::make_unique<DeviceWeights>(m, o.progress, /*upload_experts=*/backend == "fused", /*tile_nvfp4=*/num_.q8);
  if (w_->tiled_count() > 0)
    log::info("cuda: {} NVFP4 projections stored tiled for the tensor-core GEMV ({} lane-major)", w_->tiled_count(),
              w_->lanes_count());
  if (w_->clean_count() > 0) log::info("cuda: {} NVFP4 matrices scanned free of NaN scale codes", w_->clean_count());
  // What the process holds in host RAM once the weights are where they run (the file's pages
  // are given back as they are copied): issue 4 wants it within 5% of the host banks plus the
  // non-expert weights.
  if (const ProcMem pm = read_proc_mem(); pm.ok)
    log::info("host memory after load: {}; host banks {:.0f} MiB", ft::describe(pm),
              host_banks_ ? static_cast<double>(host_banks_->bytes()) / (1024.0 * 1024.0) : 0.0);
  // FT_CUDA_UBATCH: prompt micro-batch size (a diagnostic: <= 8 runs prompts through the
  // decode GEMVs and their Q8 activations instead of the prefill GEMMs).
  // Experts in host banks: each prompt micro-batch streams all of them over PCIe again (15.5 GB
  // on the Qwen3-30B-A3B-shaped file), so the micro-batch size sets the prefill speed. H200,
  // pp8192, cpu backend: 1,727 tok/s at 512 against 10,877 in one 8192-token micro-batch
  // (benches/h200.md, "Session 7: offload overlap and pp8192"). 4096 halves the passes of 8192
  // and keeps the buffers near 1 GB there.
  constexpr int64_t kHostBankUbatch = 4096;
  int64_t n_ubatch = o.ubatch_auto && backend != "fused" ? std::max<int64_t>(o.n_ubatch, kHostBankUbatch) : o.n_ubatch;
  if (const char* e = std::getenv("FT_CUDA_UBATCH"); e && std::atoll(e) > 0) n_ubatch = std::atoll(e);
  if (n_ubatch != o.n_ubatch) log::info("prompt micro-batch: {} tokens (experts stream from host RAM once per micro-batch)", n_ubatch);
  // --kv-type over gpu_numerics' choice: gemma4's auto keeps fp32 to round as llama.cpp's CPU build
  // does; f16 halves the cache for users who prefer the memory (every KV kernel takes all three).
  if (kv_forced) {
    num_.kv = *kv_forced;
    log::info("kv cache: {} (--kv-type)", o.kv_type);
  }
  b_ = std::make_unique<GpuBuffers>(m, num_, n_ctx, n_ubatch);
  if (backend == "fused") {
    moe_ = make_moe_fused(*w_);
  } else {
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    size_t free_now = 0, total_now = 0;
    FT_CUDA_CHECK(cudaMemGetInfo(&free_now, &total_now));
    std::string sizing;
    const int64_t n_slot = SlotCache::choose_slots(m, *host_banks_, o.moe, free_now, &sizing);
    const int64_t max_routes = cuda::kGemvMaxTokens * std::max<int64_t>(1, b_->n_used);
    MoeFactoryArgs a;
    a.m = &m;
    a.w = w_.get();
    a.hb = host_banks_;
    a.n_slot = n_slot;
    a.max_routes = max_routes;
    a.o = o.moe;
    std::string chosen = backend;
    const std::vector<MoeCandidate> cands = moe_tune_candidates(backend, o.moe);
    if (cands.size() > 1 && b_->n_ctx < 32) {
      why += "; not measured: --ctx-size below the measurement's 32 steps";
    } else if (cands.size() > 1) {
      std::string tune;
      const MoeCandidate best = tune_moe(a, cands, &tune);
      chosen = best.backend;
      a.o = best.o;
      why += "; " + tune;
    }
    moe_ = make_moe_backend(chosen, a);
    why += "; slots: " + sizing;
  }
  log::info("moe backend: {} ({})", moe_->describe(), why);
  fwd_ = std::make_unique<GpuForward>(m, *w_, *b_, num_, moe_.get());
  FT_CUDA_CHECK(cudaDeviceSynchronize());
  mem_.moe = moe_->device_bytes();
  mem_.host = moe_->host_bytes();
  mem_.weights = w_->bytes();
  mem_.kv = b_->kv_bytes;
  mem_.workspace = b_->workspace_bytes;
  FT_CUDA_CHECK(cudaMemGetInfo(&mem_.free_after, &mem_.total));
  mem_.taken = free_before > mem_.free_after ? free_before - mem_.free_after : 0;
  mem_.free_before = free_before;
  constexpr double kMiB = 1024.0 * 1024.0;
  log::info("cuda: {}", cuda::device_summary());
  log::info("cuda memory: weights {:.1f} MiB, KV {:.1f} MiB ({} tokens), workspace {:.1f} MiB, MoE slots {:.1f} MiB; "
            "taken {:.1f} MiB ({:+.1f}% of declared), free {:.1f} MiB",
            static_cast<double>(mem_.weights) / kMiB, static_cast<double>(mem_.kv) / kMiB, n_ctx,
            static_cast<double>(mem_.workspace) / kMiB, static_cast<double>(mem_.moe) / kMiB,
            static_cast<double>(mem_.taken) / kMiB, mem_.over_declared_pct(mem_.taken),
            static_cast<double>(mem_.free_after) / kMiB);
}

// One-token steps on tokens spread over the vocabulary from position 0: kWarm (the first
// captures the graph; the slot cache starts preloaded, moe_offload.h), then the median of
// kTimed, each from launch to the argmax on the host. Not timed as a whole: from session 10's
// H200 figures (steps of 8-18 ms, a 146 ms slot preload per slot-backed candidate) five
// host-RAM candidates of Qwen3-30B-A3B should take 1.5-2 s, graph captures included.
MoeCandidate GpuSession::tune_moe(const MoeFactoryArgs& a, const std::vector<MoeCandidate>& c,
                                  std::string* log_line) {
  constexpr int kWarm = 8, kTimed = 24;
  const int64_t V = m_.hp.n_vocab;
  std::vector<double> med(c.size(), 0.0);
  size_t best = 0;
  std::vector<bool> ok(c.size(), false);
  size_t free0 = 0, total = 0;
  FT_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
  auto drop = [&] {
    for (auto& [k, g] : graphs_by_shape_) cudaGraphExecDestroy(g);
    graphs_by_shape_.clear();
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    fwd_.reset();
    moe_.reset();
    n_past_ = 0;
    size_t free1 = 0;
    FT_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    log::debug("moe start-up measurement: device memory {:+.1f} MiB over its start after a candidate",
               (static_cast<double>(free0) - static_cast<double>(free1)) / (1024.0 * 1024.0));
  };
  for (size_t i = 0; i < c.size(); ++i) {
    std::vector<double> ms;
    try {
      MoeFactoryArgs ac = a;
      ac.o = c[i].o;
      moe_ = make_moe_backend(c[i].backend, ac);
      fwd_ = std::make_unique<GpuForward>(m_, *w_, *b_, num_, moe_.get());
      n_past_ = 0;
      for (int t = 0; t < kWarm + kTimed && n_past_ < b_->n_ctx; ++t) {
        const int32_t tok = static_cast<int32_t>((int64_t{t} * 7919 + 11) % V);
        const double t0 = wall_ms();
        eval_argmax(&tok, 1);
        if (t >= kWarm) ms.push_back(wall_ms() - t0);
      }
      drop();
    } catch (const Error& e) {  // a candidate this machine cannot run is left out, not fatal
      log::warn("moe start-up measurement: {} left out: {}", c[i].label, e.what());
      drop();
      continue;
    }
    if (ms.empty()) fail("moe start-up measurement: --ctx-size {} leaves no room for a decode step", b_->n_ctx);
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
    med[i] = ms[ms.size() / 2];
    ok[i] = true;
    if (!ok[best] || med[i] < med[best]) best = i;
  }
  if (!ok[best]) fail("moe start-up measurement: none of the {} candidates ran (see the warnings above)", c.size());
  std::string s = fmt::format("measured one-token steps (median of {} after {}):", kTimed, kWarm);
  for (size_t i = 0; i < c.size(); ++i)
    s += ok[i] ? fmt::format("{} {} {:.2f} ms", i ? "," : "", c[i].label, med[i])
               : fmt::format("{} {} left out", i ? "," : "", c[i].label);
  s += fmt::format(" -> {} (FT_MOE_TUNE=0 skips the measurement)", c[best].label);
  *log_line = s;  // logged with the backend's description
  MoeCandidate won = c[best];
  won.o.tuned = "measured at start-up";  // the winner's own description says why its parameters
  return won;
}

GpuSession::~GpuSession() {
  if (clock_) {
    const StepClock& c = *clock_;
    if (c.steps > 0)
      log::info("step clock (FT_STEP_CLOCK): {} one-token steps, GPU {:.3f} ms a step (the graph, events), host "
                "{:.3f} ms (launch to sync), {:.3f} ms between a step's sync and the next launch",
                c.steps, c.gpu_ms / c.steps, c.wall_ms / c.steps, c.steps > 1 ? c.gap_ms / (c.steps - 1) : 0.0);
    cudaEventDestroy(c.a);
    cudaEventDestroy(c.b);
  }
  // Taken at load is read before any kernel ran; what the run added since (graphs, cuBLAS
  // workspaces, the driver's local-memory reserve for the kernels' stack frames) shows here.
  if (size_t f = 0, t = 0; mem_.free_before > 0 && cudaMemGetInfo(&f, &t) == cudaSuccess && f < mem_.free_before) {
    const size_t taken = mem_.free_before - f;
    log::info("cuda memory at the end: taken {:.1f} MiB ({:+.1f}% of declared)",
              static_cast<double>(taken) / (1024.0 * 1024.0), mem_.over_declared_pct(taken));
  }
  for (auto& [k, g] : graphs_by_shape_) cudaGraphExecDestroy(g);
  if (h_u_) cudaFreeHost(h_u_);
  if (h_hist_) cudaFreeHost(h_hist_);
  if (stream_) cudaStreamDestroy(stream_);
}

int64_t GpuSession::n_vocab() const { return m_.hp.n_vocab; }

std::string GpuSession::describe() const {
  return fmt::format("cuda ({}), {}{}{}", cuda::device_summary(), dtype_, graphs_ ? ", graphs" : "",
                     host_banks_ ? ", moe " + moe_->describe() : std::string());
}

void GpuSession::check(const int32_t* tokens, int64_t n) const {
  if (n <= 0) fail("eval needs at least one token");
  if (n_past_ + n > b_->n_ctx)
    fail("context is full: {} tokens in the cache + {} new > --ctx-size {}", n_past_, n, b_->n_ctx);
  const int64_t V = m_.hp.n_vocab;
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V) fail("token id {} is out of range [0, {})", tokens[i], V);
}

// The whole step as stream work: token and position copies from the pinned slots, the
// forward pass, the copy of its result back. Capturable as is.
void GpuSession::enqueue(int64_t n, Head head) {
  GpuBuffers& b = *b_;
  FT_CUDA_CHECK(cudaMemcpyAsync(b.tokens.get(), b.h_tokens, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  FT_CUDA_CHECK(cudaMemcpyAsync(b.pos.get(), b.h_pos, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  const int64_t V = m_.hp.n_vocab;
  if (head == Head::kSample) {
    FT_CUDA_CHECK(cudaMemcpyAsync(sample_u_.get(), h_u_, sizeof(double), cudaMemcpyHostToDevice, stream_));
    if (sp_.n_penalty > 0)
      FT_CUDA_CHECK(cudaMemcpyAsync(sample_hist_.get(), h_hist_, sp_.n_penalty * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream_));
  }
  fwd_->run(n, head, stream_);
  if (head == Head::kSample) {
    cuda::sample(b.logits.as<float>(), V, sp_, sample_u_.as<double>(), b.argmax.as<int32_t>(), sample_ws_.get(),
                 stream_);
    FT_CUDA_CHECK(cudaMemcpyAsync(b.h_argmax, b.argmax.get(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  } else if (head == Head::kArgmax) {
    FT_CUDA_CHECK(cudaMemcpyAsync(b.h_argmax, b.argmax.get(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  } else if (head != Head::kNone) {
    const int64_t rows = head == Head::kAll ? n : 1;
    FT_CUDA_CHECK(cudaMemcpyAsync(b.h_logits, b.logits.get(), rows * V * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
  }
}

void GpuSession::step(const int32_t* tokens, int64_t n, Head head) {
  GpuBuffers& b = *b_;
  std::memcpy(b.h_tokens, tokens, n * sizeof(int32_t));
  *b.h_pos = static_cast<int32_t>(n_past_);
  // One token with at least mma_min_keys_ live keys: the tensor-core decode attention; graphs are
  // keyed by it, so a step replays the right one (GpuForward::plan_decode_attention).
  const bool deep = fwd_->plan_decode_attention(n_past_, n, mma_min_keys_);
  const bool capture = graphs_ && n <= cuda::kGemvMaxTokens && head != Head::kAll;
  if (!capture) {
    enqueue(n, head);
  } else {
    const auto key = std::make_tuple(n, head, deep);
    auto it = graphs_by_shape_.find(key);
    if (it == graphs_by_shape_.end()) {
      cudaGraph_t g = nullptr;
      FT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        enqueue(n, head);
      } catch (...) {
        cudaStreamEndCapture(stream_, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      FT_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
      cudaGraphExec_t exec = nullptr;
      FT_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      cudaGraphDestroy(g);
      it = graphs_by_shape_.emplace(key, exec).first;
    }
    const bool timed = n == 1 && step_clock_on();
    if (timed && !clock_) {
      clock_ = std::make_unique<StepClock>();
      FT_CUDA_CHECK(cudaEventCreate(&clock_->a));
      FT_CUDA_CHECK(cudaEventCreate(&clock_->b));
    }
    const double t0 = timed ? wall_ms() : 0.0;
    if (timed) FT_CUDA_CHECK(cudaEventRecord(clock_->a, stream_));
    FT_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    if (timed) {
      FT_CUDA_CHECK(cudaEventRecord(clock_->b, stream_));
      FT_CUDA_CHECK(cudaStreamSynchronize(stream_));
      const double t1 = wall_ms();
      float ms = 0;
      FT_CUDA_CHECK(cudaEventElapsedTime(&ms, clock_->a, clock_->b));
      StepClock& c = *clock_;
      if (c.steps > 0) c.gap_ms += t0 - c.last_end;
      c.gpu_ms += ms;
      c.wall_ms += t1 - t0;
      c.last_end = t1;
      ++c.steps;
    }
  }
  FT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  n_past_ += n;
}

const float* GpuSession::eval(const int32_t* tokens, int64_t n, bool all_logits) {
  check(tokens, n);
  const int64_t V = m_.hp.n_vocab;
  // With all_logits the head runs on every row, so micro-batches stay within the logits
  // buffer (kGemvMaxTokens rows); that mode is for tests and teacher forcing.
  const int64_t ub = all_logits ? std::min<int64_t>(b_->n_ubatch, cuda::kGemvMaxTokens) : b_->n_ubatch;
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  for (int64_t i0 = 0; i0 < n; i0 += ub) {
    const int64_t nb = std::min(ub, n - i0);
    const bool last = i0 + nb == n;
    const Head head = all_logits ? Head::kAll : (last ? Head::kLast : Head::kNone);
    step(tokens + i0, nb, head);
    if (all_logits)
      std::memcpy(logits_.data() + i0 * V, b_->h_logits, nb * V * sizeof(float));
    else if (last)
      std::memcpy(logits_.data(), b_->h_logits, V * sizeof(float));
  }
  return logits_.data();
}

void GpuSession::prepare_sampling(const engine::Sampler& s) {
  const engine::SamplerParams& p = s.params();
  const int64_t V = m_.hp.n_vocab;
  if (!sample_ws_.get()) {  // first call: buffers for the rest of the session
    sample_ws_ = cuda::DeviceBuffer(cuda::sample_workspace_bytes(V));
    sample_u_ = cuda::DeviceBuffer(sizeof(double));
    FT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h_u_), sizeof(double), cudaHostAllocDefault));
  }
  const int32_t window = p.repeat_penalty != 1.0f ? std::max<int32_t>(p.repeat_last_n, 0) : 0;
  if (window > hist_cap_) {
    if (h_hist_) cudaFreeHost(h_hist_);
    FT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&h_hist_), window * sizeof(int32_t), cudaHostAllocDefault));
    sample_hist_ = cuda::DeviceBuffer(window * sizeof(int32_t));
    hist_cap_ = window;
    sp_set_ = false;  // the graphs point at the old buffer
  }
  cuda::SampleParams sp;
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repeat_penalty = p.repeat_penalty;
  sp.penalty_tokens = window > 0 ? sample_hist_.as<int32_t>() : nullptr;
  sp.n_penalty = window;
  const bool same = sp_set_ && sp.temperature == sp_.temperature && sp.top_k == sp_.top_k && sp.top_p == sp_.top_p &&
                    sp.min_p == sp_.min_p && sp.repeat_penalty == sp_.repeat_penalty &&
                    sp.penalty_tokens == sp_.penalty_tokens && sp.n_penalty == sp_.n_penalty;
  if (!same) {  // graphs captured with other parameters must not replay
    for (auto it = graphs_by_shape_.begin(); it != graphs_by_shape_.end();) {
      if (std::get<1>(it->first) == Head::kSample) {
        cudaGraphExecDestroy(it->second);
        it = graphs_by_shape_.erase(it);
      } else {
        ++it;
      }
    }
    sp_ = sp;
    sp_set_ = true;
  }
  // The window as the CPU sampler sees it (its last repeat_last_n tokens), padded with -1.
  const auto& h = s.history();
  const size_t first = h.size() > static_cast<size_t>(window) ? h.size() - window : 0;
  for (int32_t i = 0; i < window; ++i) {
    const size_t j = first + static_cast<size_t>(i);
    h_hist_[i] = j < h.size() ? h[j] : -1;
  }
}

int32_t GpuSession::eval_sample(const int32_t* tokens, int64_t n, engine::Sampler& s) {
  check(tokens, n);
  prepare_sampling(s);
  // One uniform draw per non-greedy token, from the sampler's own stream, as sample() takes it.
  *h_u_ = s.params().temperature > 0.0f ? s.draw() : 0.0;
  for (int64_t i0 = 0; i0 < n; i0 += b_->n_ubatch) {
    const int64_t nb = std::min(b_->n_ubatch, n - i0);
    step(tokens + i0, nb, i0 + nb == n ? Head::kSample : Head::kNone);
  }
  return *b_->h_argmax;
}

void GpuSession::warmup() {
  const int64_t n = std::min<int64_t>(warmup_tokens(), n_ctx() - 3);
  if (n < 1) return;
  const double t0 = wall_ms();
  reset();
  const std::vector<int32_t> t(static_cast<size_t>(n), 0);
  eval(t.data(), n);
  eval(t.data(), 1);
  eval_argmax(t.data(), 1);
  reset();
  moe_->reset_stats();
  log::info("cuda: warm-up {:.0f} ms (a {}-token prompt, a decode step of each head; --no-warmup skips it)",
            wall_ms() - t0, n);
}

int32_t GpuSession::eval_argmax(const int32_t* tokens, int64_t n) {
  check(tokens, n);
  for (int64_t i0 = 0; i0 < n; i0 += b_->n_ubatch) {
    const int64_t nb = std::min(b_->n_ubatch, n - i0);
    step(tokens + i0, nb, i0 + nb == n ? Head::kArgmax : Head::kNone);
  }
  return *b_->h_argmax;
}

}  // namespace ft::gpu
