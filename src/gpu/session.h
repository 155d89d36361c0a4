// A sequence generated on the GPU: the engine::Runner of the CUDA backend.
//
// Construction uploads the weights (progress callback), sizes every device buffer and logs
// the memory report (weights, KV, workspace, free). eval() runs a prompt as micro-batches of
// up to n_ubatch tokens (GEMMs) and decode steps of 1..8 tokens (GEMVs). A decode step is
// captured once per (batch size, head) into a CUDA graph -- tokens and position travel
// through pinned host slots that the graph's own copies read -- and replayed afterwards;
// FT_CUDA_GRAPHS=0 turns graphs off.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/buffer.h"
#include "cuda/sample.h"
#include "engine/runner.h"
#include "gpu/forward.h"
#include "gpu/host_bank.h"
#include "gpu/moe_backend.h"
#include "gpu/state.h"
#include "gpu/weights.h"

namespace ft::model {
struct Model;
}

namespace ft::gpu {

struct GpuSessionOptions {
  int64_t n_ctx = 0;          // 0: min(context_length, 4096)
  std::string dtype = "auto";  // auto | float32 | bfloat16 | float16 (gpu/state.h)
  std::string kv_type = "auto";  // --kv-type: auto (the dtype's, gpu_numerics) | f32 | f16 | bf16
  int64_t n_ubatch = 512;
  // n_ubatch chosen by the MoE backend (the CLI's default): 512 where the experts live on the
  // GPU; kHostBankUbatch where prompts stream every expert from host RAM once per micro-batch.
  bool ubatch_auto = false;
  bool graphs = true;
  // Live keys from which one decode token takes the tensor-core decode attention (gpu/session.cpp
  // kMmaMinKeys); 0 never; -1: FT_ATTN_MMA_MIN_KEYS, else the default.
  int64_t attn_mma_min_keys = -1;
  std::function<void(uint64_t, uint64_t)> progress;  // weight upload
  MoeBackendOptions moe;  // --moe-backend, --moe-cache-size/-rate (gpu/moe_backend.h)
};

struct GpuMemoryReport {
  size_t weights = 0, kv = 0, workspace = 0, free_after = 0, total = 0;
  size_t taken = 0;  // device memory this session took (free before - free after), cuBLAS included
  size_t free_before = 0;  // free device memory before the session took any
  size_t moe = 0;    // the MoE backend's slot pools and bookkeeping
  size_t host = 0;   // pinned host banks of an offload-family MoE backend
  size_t declared() const { return weights + kv + workspace + moe; }
  // taken_bytes over declared(), as a signed percentage (+1.3: 1.3% more than declared).
  double over_declared_pct(size_t taken_bytes) const {
    return 100.0 * (static_cast<double>(taken_bytes) / static_cast<double>(declared()) - 1.0);
  }
};

// Whether the GPU forward pass runs this model's architecture (llama, qwen3, qwen3moe,
// qwen35, qwen35moe).
bool gpu_supports(const model::Model& m);

// Resolves --dtype for the GPU on an architecture (its GGUF name: gemma4's auto takes llama.cpp's
// CPU numerics, FT_GEMMA4_AUTO / FT_GEMMA4_Q8_PREFILL); throws on an unknown name.
GpuNumerics gpu_numerics(const std::string& dtype, const std::string& arch = "");

class GpuSession : public engine::Runner {
 public:
  GpuSession(const model::Model& m, const GpuSessionOptions& o);
  ~GpuSession() override;

  const float* eval(const int32_t* tokens, int64_t n, bool all_logits = false) override;
  int32_t eval_argmax(const int32_t* tokens, int64_t n) override;
  int32_t eval_sample(const int32_t* tokens, int64_t n, engine::Sampler& s) override;
  void reset() override { n_past_ = 0; }
  // A prompt of warmup_tokens() (the cuBLAS prefill), then a decode token of each head (logits, argmax: their CUDA
  // graphs); then reset, MoE statistics included.
  void warmup() override;
  // The warm-up's prompt (the batch runner's too): 16 tokens, 2 with the experts in host RAM (offload, cpu, hybrid),
  // since a prompt micro-batch past 8 tokens streams every expert over PCIe (~1 s for Qwen3-30B-A3B's).
  int64_t warmup_tokens() const { return host_banks_ ? 2 : 16; }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return b_->n_ctx; }
  int64_t n_vocab() const override;
  std::string describe() const override;

  const GpuMemoryReport& memory() const { return mem_; }
  // The backend of the routed experts (fused for dense models too: never called there).
  MoeBackend& moe() const { return *moe_; }
  // What a batch runner over this session shares (gpu/batch_runner_gpu.h).
  const model::Model& model() const { return m_; }
  const DeviceWeights& weights() const { return *w_; }
  const GpuNumerics& numerics() const { return num_; }
  int64_t n_ubatch() const { return b_->n_ubatch; }
  bool graphs() const { return graphs_; }
  // Live keys from which a decode token takes the tensor-core attention (0: never; session.cpp).
  int64_t attn_mma_min_keys() const { return mma_min_keys_; }

 private:
  void check(const int32_t* tokens, int64_t n) const;
  // Runs n (<= n_ubatch) tokens at n_past_ and copies the head's result to the pinned slots.
  void step(const int32_t* tokens, int64_t n, Head head);
  // The start-up measurement (moe_tune_candidates): builds each candidate's backend in turn,
  // times one-token steps and returns the fastest; leaves no backend, graph or cached token.
  MoeCandidate tune_moe(const MoeFactoryArgs& a, const std::vector<MoeCandidate>& c, std::string* log);
  void enqueue(int64_t n, Head head);

  const model::Model& m_;
  std::string dtype_;
  GpuNumerics num_;
  bool graphs_;
  int64_t mma_min_keys_;  // GpuSessionOptions::attn_mma_min_keys, resolved
  std::unique_ptr<DeviceWeights> w_;
  std::unique_ptr<GpuBuffers> b_;
  std::shared_ptr<const HostBanks> host_banks_;  // offload-family backends
  std::unique_ptr<MoeBackend> moe_;
  std::unique_ptr<GpuForward> fwd_;
  cudaStream_t stream_ = nullptr;
  // (n tokens, head, deep): deep = the tensor-core decode attention (mma_min_keys_).
  std::map<std::tuple<int64_t, Head, bool>, cudaGraphExec_t> graphs_by_shape_;
  std::vector<float> logits_;
  // Sampling on the device (eval_sample): the CPU sampler's draw and penalty window travel
  // through pinned slots; the parameters are baked into the captured graphs, which are
  // recaptured when they change.
  void prepare_sampling(const engine::Sampler& s);
  cuda::DeviceBuffer sample_ws_, sample_u_, sample_hist_;
  double* h_u_ = nullptr;
  int32_t* h_hist_ = nullptr;
  int32_t hist_cap_ = 0;
  cuda::SampleParams sp_;
  bool sp_set_ = false;
  int64_t n_past_ = 0;
  GpuMemoryReport mem_;
  // FT_STEP_CLOCK=1: one-token steps timed on the GPU (events around the graph) and on the
  // host (launch to sync), logged at the end: says how much of a step the GPU is idle for.
  struct StepClock {
    cudaEvent_t a = nullptr, b = nullptr;
    int64_t steps = 0;
    double gpu_ms = 0, wall_ms = 0, gap_ms = 0;  // gap: host time from one step's sync to the next's launch
    double last_end = 0;
  };
  std::unique_ptr<StepClock> clock_;
};

}  // namespace ft::gpu
