// llama-bench-cpu: times llama.cpp's CPU library (the npm node-llama-cpp@3.22.1 build of
// v0.5.0) on a GGUF the same way `ft generate --json` times our engine: prefill of a
// prompt as one batch, then greedy decode of N tokens one at a time. Prints one JSON object.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {
void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int threads = 1, n_prompt = 64, n_gen = 128, reps = 1;
  CLI::App app{"Time llama.cpp's CPU library: prefill + greedy decode"};
  app.add_option("--model", model_path, "GGUF file")->required();
  app.add_option("--threads", threads, "threads (prefill and decode)");
  app.add_option("--prompt-len", n_prompt, "prompt tokens (ids 1..n)");
  app.add_option("--gen", n_gen, "tokens to decode");
  app.add_option("--reps", reps, "repetitions (best is reported)");
  CLI11_PARSE(app, argc, argv);

  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all_from_path(FT_LLAMA_LIB_DIR);
  llama_backend_init();
  auto mp = llama_model_default_params();
  const double t_load0 = now_s();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llama-bench-cpu: llama.cpp failed to load %s\n", model_path.c_str());
    return 2;
  }
  const double load_s = now_s() - t_load0;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  auto cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_prompt + n_gen + 16);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max(n_prompt, 32));
  cp.n_threads = cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama-bench-cpu: cannot create a context\n");
    return 2;
  }

  std::vector<llama_token> prompt(static_cast<size_t>(n_prompt));
  for (int i = 0; i < n_prompt; ++i) prompt[static_cast<size_t>(i)] = 1 + i % (n_vocab - 1);

  double best_prefill = 0, best_decode = 0;
  std::vector<llama_token> generated;
  for (int rep = 0; rep < reps; ++rep) {
    llama_memory_clear(llama_get_memory(ctx), true);
    generated.clear();
    const double t0 = now_s();
    if (llama_decode(ctx, llama_batch_get_one(prompt.data(), n_prompt)) != 0) return 3;
    const float* logits = llama_get_logits_ith(ctx, -1);
    const double t1 = now_s();
    llama_token tok = 0;
    for (int g = 0; g < n_gen; ++g) {
      int best = 0;
      for (int v = 1; v < n_vocab; ++v)
        if (logits[v] > logits[best]) best = v;
      tok = best;
      generated.push_back(tok);
      if (g + 1 == n_gen) break;
      if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 3;
      logits = llama_get_logits_ith(ctx, -1);
    }
    const double t2 = now_s();
    best_prefill = std::max(best_prefill, n_prompt / (t1 - t0));
    best_decode = std::max(best_decode, (n_gen - 1) / std::max(t2 - t1, 1e-9));
  }
  nlohmann::json j;
  j["engine"] = "llama.cpp v0.5.0 (node-llama-cpp 3.22.1 CPU build)";
  j["threads"] = threads;
  j["prefill_tokens"] = n_prompt;
  j["prefill_tok_s"] = best_prefill;
  j["decode_tokens"] = n_gen;
  j["decode_tok_s"] = best_decode;
  j["load_s"] = load_s;
  j["tokens"] = generated;
  std::printf("%s\n", j.dump().c_str());
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
