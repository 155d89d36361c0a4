#include "gpu/batch_runner_gpu.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "cuda/attention_batch.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/gemv.h"
#include "cuda/sample.h"
#include "gpu/batch_forward.h"
#include "gpu/forward.h"
#include "gpu/session.h"
#include "gpu/state.h"
#include "model/model.h"

namespace ft::gpu {
namespace {

template <class T>
T* pinned(size_t n) {
  void* p = nullptr;
  FT_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(n, 1) * sizeof(T), cudaHostAllocDefault));
  return static_cast<T*>(p);
}

class GpuBatchRunner : public engine::BatchRunner {
 public:
  GpuBatchRunner(GpuSession& s, int64_t max_seqs, int64_t page_size)
      : sess_(s), m_(s.model()), num_(s.numerics()), n_ctx_(s.n_ctx()), max_seqs_(std::max<int64_t>(1, max_seqs)),
        ps_(std::max<int64_t>(1, page_size)), graphs_on_(s.graphs()), slots_(static_cast<size_t>(max_seqs_)) {
    const int64_t V = m_.hp.n_vocab;
    b_ = std::make_unique<GpuBuffers>(m_, num_, n_ctx_, s.n_ubatch(), max_seqs_ * n_ctx_);
    const int64_t U = b_->n_ubatch;
    d_pos_ = cuda::DeviceBuffer(U * sizeof(int32_t));
    d_base_ = cuda::DeviceBuffer(U * sizeof(int32_t));
    d_out_ = cuda::DeviceBuffer(max_seqs_ * sizeof(int32_t));
    d_logits_ = cuda::DeviceBuffer(max_seqs_ * V * sizeof(float));
    d_argmax_ = cuda::DeviceBuffer(max_seqs_ * sizeof(int32_t));
    d_argmax_ws_ = cuda::DeviceBuffer(cuda::argmax_scratch_bytes(max_seqs_));
    FT_CUDA_CHECK(cudaMemset(d_argmax_ws_.get(), 0, d_argmax_ws_.bytes()));
    h_argmax_ = pinned<int32_t>(max_seqs_);
    h_pos_ = pinned<int32_t>(U);
    h_base_ = pinned<int32_t>(U);
    h_out_ = pinned<int32_t>(max_seqs_);
    h_logits_ = pinned<float>(max_seqs_ * V);
    rows_.pos = d_pos_.as<int32_t>();
    rows_.base = d_base_.as<int32_t>();
    rows_.out_rows = d_out_.as<int32_t>();
    rows_.logits = d_logits_.as<float>();
    // The batch attention's split over keys for a step's decode tokens (they come first) -- up to 16 of them
    // where max_seqs is smaller, for a short prompt chunk at depth beside them. FT_BATCH_ATTN_SPLIT=0: none.
    if (const char* e = std::getenv("FT_BATCH_ATTN_SPLIT"); e == nullptr || std::strcmp(e, "0") != 0) {
      const model::HParams& hp = m_.hp;
      rows_.attn_split_tokens = std::min<int64_t>(U, std::max<int64_t>(max_seqs_, 16));
      d_attn_ws_ = cuda::DeviceBuffer(cuda::attention_batch_workspace_bytes(
          rows_.attn_split_tokens, *std::max_element(hp.n_head.begin(), hp.n_head.end()), n_ctx_, hp.head_dim_v));
      cuda::attention_workspace_init(d_attn_ws_.get(), d_attn_ws_.bytes(), nullptr);
      rows_.attn_ws = d_attn_ws_.get();
    }
    b_->batch = &rows_;
    fwd_ = std::make_unique<GpuForward>(m_, s.weights(), *b_, num_, &s.moe());
    FT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Steps above kGemvMaxTokens run the prefill-shaped MoE path; only the fused backend's
    // is known to be capturable (the offload family streams layers on a copy stream).
    const std::string moe = s.moe().describe();
    graph_large_ = m_.hp.n_expert == 0 || moe.rfind("fused", 0) == 0;
    if (const char* e = std::getenv("FT_CUDA_GRAPHS"); e && std::strcmp(e, "0") == 0) graphs_on_ = false;
    if (const char* e = std::getenv("FT_BATCH_SOLO"); e && std::strcmp(e, "0") == 0) solo_on_ = false;
    FT_CUDA_CHECK(cudaDeviceSynchronize());
    constexpr double kMiB = 1024.0 * 1024.0;
    log::info("cuda batch: {} sequences x {} tokens, KV {:.1f} MiB, workspace {:.1f} MiB, up to {} tokens a step",
              max_seqs_, n_ctx_, static_cast<double>(b_->kv_bytes) / kMiB,
              static_cast<double>(b_->workspace_bytes + d_attn_ws_.bytes()) / kMiB, U);
  }

  ~GpuBatchRunner() override {
    for (auto& [k, g] : graphs_)
      if (g) cudaGraphExecDestroy(g);
    for (auto& [k, g] : solo_graphs_)
      if (g) cudaGraphExecDestroy(g);
    cudaFreeHost(h_pos_);
    cudaFreeHost(h_base_);
    cudaFreeHost(h_out_);
    cudaFreeHost(h_logits_);
    cudaFreeHost(h_argmax_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int64_t add_sequence(const int32_t* prompt, int64_t n, bool reuse, int64_t* n_cached) override {
    if (n <= 0) fail("batch runner: a sequence needs at least one prompt token");
    // The free slot sharing the longest prefix with the prompt, else the least recently
    // used free one. At most n - 1 tokens are reused: the last one gives the first logits.
    int64_t best = -1, best_len = 0, lru = -1;
    for (int64_t i = 0; i < max_seqs_; ++i) {
      const Slot& sl = slots_[i];
      if (sl.live) continue;
      if (reuse) {
        const int64_t lim = std::min<int64_t>(static_cast<int64_t>(sl.tokens.size()), n - 1);
        int64_t len = 0;
        while (len < lim && sl.tokens[len] == prompt[len]) ++len;
        if (len > best_len) {
          best = i;
          best_len = len;
        }
      }
      if (lru < 0 || sl.last_used < slots_[lru].last_used) lru = i;
    }
    if (lru < 0) fail("batch runner: {} sequences are running already", max_seqs_);
    const int64_t id = best >= 0 ? best : lru;
    Slot& sl = slots_[id];
    sl.tokens.resize(static_cast<size_t>(best >= 0 ? best_len : 0));
    sl.live = true;
    sl.last_used = ++clock_;
    if (n_cached) *n_cached = static_cast<int64_t>(sl.tokens.size());
    return id;
  }

  void remove_sequence(int64_t id) override {
    Slot& sl = slot(id);
    sl.live = false;
    sl.last_used = ++clock_;
  }

  const float* step(const std::vector<engine::BatchItem>& items) override {
    const int64_t V = m_.hp.n_vocab, U = b_->n_ubatch;
    if (items.empty()) fail("batch runner: a step needs at least one item");
    if (static_cast<int64_t>(items.size()) > max_seqs_) fail("batch runner: {} items > {} sequences", items.size(), max_seqs_);
    int64_t n_tok = 0;
    bool decode_only = true;
    std::set<int64_t> seen;
    for (const engine::BatchItem& it : items) {
      const Slot& sl = slot(it.seq);
      if (!seen.insert(it.seq).second) fail("batch runner: sequence {} appears twice in one step", it.seq);
      if (it.n <= 0) fail("batch runner: a step item needs at least one token");
      const auto n_past = static_cast<int64_t>(sl.tokens.size());
      if (n_past + it.n > n_ctx_)
        fail("context is full: {} tokens in the cache + {} new > --ctx-size {}", n_past, it.n, n_ctx_);
      for (int64_t t = 0; t < it.n; ++t)
        if (it.tokens[t] < 0 || it.tokens[t] >= V) fail("token id {} is out of range [0, {})", it.tokens[t], V);
      n_tok += it.n;
      decode_only = decode_only && it.n == 1;
    }
    if (n_tok > U) fail("batch runner: {} tokens in one step > {} (max_step_tokens)", n_tok, U);
    int64_t k = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const engine::BatchItem& it = items[i];
      const auto n_past = static_cast<int32_t>(slots_[it.seq].tokens.size());
      for (int64_t t = 0; t < it.n; ++t, ++k) {
        b_->h_tokens[k] = it.tokens[t];
        h_pos_[k] = n_past + static_cast<int32_t>(t);
        h_base_[k] = static_cast<int32_t>(it.seq * n_ctx_);
      }
      h_out_[i] = static_cast<int32_t>(k - 1);
    }
    const auto n_out = static_cast<int64_t>(items.size());
    const bool am = argmax_only_;
    argmax_done_ = false;
    // A step of one sequence: the session's one-sequence pass on that sequence's KV slot
    // (GpuForward::set_solo) -- the batch pass's attention and norms are unfused kernels, which
    // cost a lone request ~18% of its decode speed (H100 session 53, Llama-8B: 378 tok/s at B=1
    // against the session's 460), and its attention has no flash prefill. FT_BATCH_SOLO=0 turns
    // it off.
    const int64_t solo = solo_on_ && items.size() == 1 ? items[0].seq : -1;
    const bool deep =
        fwd_->plan_decode_attention(static_cast<int64_t>(slots_[items[0].seq].tokens.size()), n_tok,
                                    solo >= 0 ? sess_.attn_mma_min_keys() : 0);
    const bool graph = graphs_on_ && decode_only && (n_tok <= cuda::kGemvMaxTokens || graph_large_);
    auto run = [&] { enqueue(n_tok, n_out, am, solo); };
    cudaGraphExec_t g = nullptr;
    if (graph && solo >= 0)  // the slot's pointers are in the graph: one a slot
      g = graph_for(solo_graphs_, std::make_tuple(solo, deep, am), run, fmt::format("one sequence (slot {})", solo));
    else if (graph)
      g = graph_for(graphs_, std::make_tuple(n_tok, am), run, fmt::format("{} sequences", n_tok));
    if (g != nullptr)
      FT_CUDA_CHECK(cudaGraphLaunch(g, stream_));
    else
      run();
    FT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    argmax_done_ = am;
    for (const engine::BatchItem& it : items) {
      Slot& sl = slots_[it.seq];
      sl.tokens.insert(sl.tokens.end(), it.tokens, it.tokens + it.n);
    }
    return am ? nullptr : h_logits_;
  }

  // Two prompts of the session's warm-up length, a decode step of one (logits, then argmax: the solo graphs of its
  // slot) and one of both (the batch pass); the slots are left empty (no cached prefix of the warm-up's tokens).
  void warmup() override {
    const int64_t n = std::min<int64_t>({sess_.warmup_tokens(), n_ctx_ - 3, b_->n_ubatch});
    if (n < 1) return;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> t(static_cast<size_t>(n), 0);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < std::min<int64_t>(2, max_seqs_); ++i) {
      ids.push_back(add_sequence(t.data(), n, false, nullptr));
      step({{ids.back(), t.data(), n}});
    }
    step({{ids[0], t.data(), 1}});
    set_argmax_only(true);
    step({{ids[0], t.data(), 1}});
    std::vector<engine::BatchItem> all;
    for (int64_t id : ids) all.push_back({id, t.data(), 1});
    step(all);
    set_argmax_only(false);
    for (int64_t id : ids) {
      remove_sequence(id);
      slots_[id].tokens.clear();
    }
    sess_.moe().reset_stats();
    log::info("cuda batch: warm-up {:.0f} ms",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }

  // 64 greedy sequences of a 128k vocabulary: the argmax on the device replaces a 33 MB copy
  // of the logits and 8M compares on one CPU thread in every step.
  void set_argmax_only(bool on) override { argmax_only_ = on; }
  const int32_t* argmax_rows() const override { return argmax_done_ ? h_argmax_ : nullptr; }

  int64_t n_past(int64_t id) const override { return static_cast<int64_t>(slot(id).tokens.size()); }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_vocab() const override { return m_.hp.n_vocab; }
  int64_t max_sequences() const override { return max_seqs_; }
  int64_t max_step_tokens() const override { return b_->n_ubatch; }
  // Pages are accounting only here: each slot is a whole context of ceil(n_ctx / page) pages.
  engine::KvPageStats kv_stats() const override { return engine::whole_slot_kv_stats(ps_, n_ctx_, max_seqs_, slots_); }
  std::string describe() const override {
    return fmt::format("{}; batched on the GPU: {} sequences, one KV slot of {} tokens each{}", sess_.describe(),
                       max_seqs_, n_ctx_, graphs_on_ ? ", graphs per batch size" : "");
  }

 private:
  struct Slot {
    bool live = false;
    uint64_t last_used = 0;
    std::vector<int32_t> tokens;  // the text whose K/V rows the slot holds
  };
  Slot& slot(int64_t id) {
    if (id < 0 || id >= max_seqs_ || !slots_[id].live) fail("batch runner: no sequence {}", id);
    return slots_[id];
  }
  const Slot& slot(int64_t id) const { return const_cast<GpuBatchRunner*>(this)->slot(id); }

  // The step as stream work: the pinned inputs up, the forward, the logits down. solo >= 0: the
  // one-sequence pass on slot solo (its tokens from *b.pos on).
  void enqueue(int64_t n_tok, int64_t n_out, bool argmax, int64_t solo) {
    const size_t ti = static_cast<size_t>(n_tok) * sizeof(int32_t);
    FT_CUDA_CHECK(cudaMemcpyAsync(b_->tokens.get(), b_->h_tokens, ti, cudaMemcpyHostToDevice, stream_));
    if (solo >= 0) {
      FT_CUDA_CHECK(cudaMemcpyAsync(b_->pos.get(), h_pos_, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    } else {
      FT_CUDA_CHECK(cudaMemcpyAsync(d_pos_.get(), h_pos_, ti, cudaMemcpyHostToDevice, stream_));
      FT_CUDA_CHECK(cudaMemcpyAsync(d_base_.get(), h_base_, ti, cudaMemcpyHostToDevice, stream_));
      FT_CUDA_CHECK(cudaMemcpyAsync(d_out_.get(), h_out_, n_out * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    }
    rows_.n_out = n_out;
    fwd_->set_solo(solo >= 0 ? solo * n_ctx_ : -1);
    try {
      fwd_->run(n_tok, Head::kRows, stream_);
    } catch (...) {
      fwd_->set_solo(-1);
      throw;
    }
    fwd_->set_solo(-1);
    const int64_t V = m_.hp.n_vocab;
    if (argmax) {
      cuda::argmax(d_logits_.as<float>(), V, V, n_out, d_argmax_.as<int32_t>(), stream_, d_argmax_ws_.get());
      FT_CUDA_CHECK(cudaMemcpyAsync(h_argmax_, d_argmax_.get(), n_out * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                    stream_));
    } else {
      FT_CUDA_CHECK(cudaMemcpyAsync(h_logits_, d_logits_.get(), n_out * V * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream_));
    }
  }

  // The graph of key in graphs, captured from what run enqueues the first time; nullptr (logged once;
  // the key then runs eagerly from then on) when the capture fails.
  template <class Key, class F>
  cudaGraphExec_t graph_for(std::map<Key, cudaGraphExec_t>& graphs, const Key& key, F&& run, const std::string& what) {
    auto it = graphs.find(key);
    if (it == graphs.end()) it = graphs.emplace(key, capture_graph(run, what)).first;
    return it->second;
  }

  // Captures what run enqueues; nullptr when the capture fails (logged).
  template <class F>
  cudaGraphExec_t capture_graph(F&& run, const std::string& what) {
    cudaGraph_t g = nullptr;
    FT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    std::string why;
    try {
      run();
    } catch (const std::exception& e) {
      why = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream_, &g);
    cudaGraphExec_t exec = nullptr;
    if (why.empty() && end == cudaSuccess && g != nullptr) {
      const cudaError_t inst = cudaGraphInstantiate(&exec, g, 0);
      if (inst != cudaSuccess) why = cudaGetErrorString(inst);
    } else if (why.empty()) {
      why = cudaGetErrorString(end);
    }
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();  // a failed capture's error is not sticky; clear it
    if (!why.empty()) {
      log::warn("cuda batch: no CUDA graph for {} ({}); running that step without", what, why);
      return nullptr;
    }
    return exec;
  }

  GpuSession& sess_;
  const model::Model& m_;
  GpuNumerics num_;
  int64_t n_ctx_, max_seqs_, ps_;
  bool graphs_on_, graph_large_ = false, solo_on_ = true;
  std::vector<Slot> slots_;
  std::unique_ptr<GpuBuffers> b_;
  std::unique_ptr<GpuForward> fwd_;
  cudaStream_t stream_ = nullptr;
  BatchRows rows_;
  cuda::DeviceBuffer d_pos_, d_base_, d_out_, d_logits_, d_argmax_, d_argmax_ws_, d_attn_ws_;
  int32_t *h_pos_ = nullptr, *h_base_ = nullptr, *h_out_ = nullptr;
  float* h_logits_ = nullptr;
  int32_t* h_argmax_ = nullptr;
  bool argmax_only_ = false, argmax_done_ = false;
  // nullptr: the capture failed, that step runs eagerly.
  std::map<std::tuple<int64_t, bool>, cudaGraphExec_t> graphs_;              // (n_tok, argmax)
  std::map<std::tuple<int64_t, bool, bool>, cudaGraphExec_t> solo_graphs_;  // (slot, deep attention, argmax)
  uint64_t clock_ = 0;
};

std::unique_ptr<engine::BatchRunner> factory(engine::Runner& r, int64_t max_seqs, int64_t page_size) {
  auto* s = dynamic_cast<GpuSession*>(&r);
  if (s == nullptr || !gpu_batch_supports(s->model())) return nullptr;  // the scheduler serves those in turn
  return make_gpu_batch_runner(*s, max_seqs, page_size);
}

}  // namespace

bool gpu_batch_supports(const model::Model& m) {
  const std::string a = m.arch->name;
  return a == "llama" || a == "qwen3" || a == "qwen3moe";
}

std::unique_ptr<engine::BatchRunner> make_gpu_batch_runner(GpuSession& s, int64_t max_seqs, int64_t page_size) {
  if (!gpu_batch_supports(s.model()))
    fail("{}: GPU batching runs llama, qwen3 and qwen3moe, not '{}'", s.model().file->path(), s.model().arch->name);
  return std::make_unique<GpuBatchRunner>(s, max_seqs, page_size);
}

void register_gpu_batch_runner() { engine::register_batch_runner_factory(&factory); }

}  // namespace ft::gpu
