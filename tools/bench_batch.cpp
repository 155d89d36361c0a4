// ft-bench-batch: decode throughput of the BatchRunner (engine/batch_runner.h; ft serve's continuous batching) as
// a function of the batch size B: B sequences each hold a prompt, then every step feeds one token to each; prints
// ms per step and tokens/s (and the time the prompts took, each fed alone in chunks), beside the single-sequence
// Session. --device cuda (a CUDA build): the GPU batch runner (gpu/batch_runner_gpu.h) over a GpuSession, decode
// steps replayed as CUDA graphs per batch size.
//   ft-bench-batch --model FILE [--batch 1,2,4,8,16,32] [--prompt 32] [--steps 50] [--threads 1] [--device cpu]
// On a memory-bound model (weights past the last-level cache) a step of B tokens reads the
// weights once, so tokens/s grows with B; on a cache-resident tiny model it cannot.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/batch_runner.h"
#include "engine/session.h"
#include "model/model.h"
#ifdef FT_HAVE_CUDA
#include "gpu/batch_runner_gpu.h"
#include "gpu/session.h"
#endif

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ft-bench-batch: CPU batched decode tokens/s by batch size"};
  std::string path;
  std::vector<int> batches = {1, 2, 4, 8, 16, 32};
  int prompt = 32, steps = 50, threads = 1;
  std::string device = "cpu";
  app.add_option("--model", path, "GGUF model (an arch the paged runner covers: llama, qwen3, qwen3moe)")->required();
  app.add_option("--batch", batches, "batch sizes")->delimiter(',');
  app.add_option("--prompt", prompt, "prompt tokens per sequence (default 32)");
  app.add_option("--steps", steps, "decode steps timed per batch size (default 50)");
  app.add_option("--threads", threads, "CPU threads (default 1)");
  app.add_option("--device", device, "cpu (default) or cuda (a CUDA build)")->check(CLI::IsMember({"cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  try {
    auto m = ft::model::load_model(path);
    ft::engine::SessionOptions so;
    int max_b = 1;
    for (int b : batches) max_b = std::max(max_b, b);
    so.n_ctx = prompt + steps + 8;
    so.n_threads = threads;
    so.act_quant = ft::quant::ActQuant::kQ8;  // ft serve's default numerics
    std::unique_ptr<ft::engine::Runner> runner;
    std::unique_ptr<ft::engine::BatchRunner> br;
    if (device == "cuda") {
#ifdef FT_HAVE_CUDA
      ft::gpu::GpuSessionOptions go;
      go.n_ctx = so.n_ctx;
      auto g = std::make_unique<ft::gpu::GpuSession>(*m, go);
      br = ft::gpu::make_gpu_batch_runner(*g, max_b, 16);
      runner = std::move(g);
#else
      throw ft::Error("ft-bench-batch: --device cuda needs a CUDA build (-DFT_CUDA=ON)");
#endif
    } else {
      runner = std::make_unique<ft::engine::Session>(*m, so);
      br = ft::engine::make_batch_runner(*runner, max_b, 16);
    }
    ft::engine::Runner& sess = *runner;
    fmt::print("{}\n", br->describe());
    const auto V = static_cast<int32_t>(m->hp.n_vocab);
    double tok_s_1 = 0.0;
    {  // warm-up: the first prompt and step pay one-time costs (library handles, graph captures)
      std::vector<int32_t> p(static_cast<size_t>(std::min(prompt, 8)), 1);
      const int64_t id = br->add_sequence(p.data(), static_cast<int64_t>(p.size()), false, nullptr);
      br->step({{id, p.data(), static_cast<int64_t>(p.size())}});
      br->step({{id, p.data(), 1}});
      br->remove_sequence(id);
    }
    for (int B : batches) {
      std::vector<int64_t> ids;
      std::vector<int32_t> next(static_cast<size_t>(B), 1);
      std::vector<ft::engine::BatchItem> items;
      const auto tp = std::chrono::steady_clock::now();
      for (int b = 0; b < B; ++b) {
        std::vector<int32_t> p(static_cast<size_t>(prompt));
        for (int i = 0; i < prompt; ++i) p[i] = (b * 131 + i * 29) % V;
        int64_t nc = 0;
        ids.push_back(br->add_sequence(p.data(), prompt, false, &nc));
        for (int64_t i = 0; i < prompt; i += br->max_step_tokens())  // a long prompt: in chunks a step takes
          br->step({{ids.back(), p.data() + i, std::min<int64_t>(prompt - i, br->max_step_tokens())}});
        items.push_back({ids.back(), &next[b], 1});
      }
      const double dp = seconds_since(tp);
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) br->step(items);
      const double dt = seconds_since(t0);
      const double tps = B * steps / dt;
      if (B == 1) tok_s_1 = tps;
      fmt::print("B={:<3} step {:8.3f} ms  {:8.1f} tok/s{}  (prompts: {:.1f} ms, {:.0f} tok/s)\n", B, dt / steps * 1e3,
                 tps, tok_s_1 > 0 ? fmt::format("  ({:.2f}x B=1)", tps / tok_s_1) : "", dp * 1e3, B * prompt / dp);
      for (int64_t id : ids) br->remove_sequence(id);
    }
    // Sequence 0's prompt: a prompt of one repeated token routes every token of an MoE to the same experts and
    // reads a fraction of the weights the batch runner's prompts read (Qwen3-30B-A3B: 26 against 47 ms).
    std::vector<int32_t> p(static_cast<size_t>(prompt));
    for (int i = 0; i < prompt; ++i) p[i] = (i * 29) % V;
    const auto tp = std::chrono::steady_clock::now();
    sess.eval(p.data(), prompt);
    fmt::print("Session prompt: {:.1f} ms ({:.0f} tok/s)\n", seconds_since(tp) * 1e3, prompt / seconds_since(tp));
    const auto t0 = std::chrono::steady_clock::now();
    int32_t t = 1;
    for (int s = 0; s < steps; ++s) t = sess.eval_argmax(&t, 1) % V;
    fmt::print("Session (single sequence) {:8.3f} ms/token\n", seconds_since(t0) / steps * 1e3);
  } catch (const ft::Error& e) {
    fmt::print(stderr, "ft-bench-batch: {}\n", e.what());
    return 2;
  }
  return 0;
}
