// llama-oracle: runs llama.cpp (CPU libraries of node-llama-cpp v0.5.0) on a GGUF
// and prints one JSON object, the reference for the parity tests.
//
//   llama-oracle --model M --prompt-tokens 1,2,3 [--n-predict 32] [--force-tokens 5,6,7]
//                [--kv-f16] [--stop-at-eos] [--threads 1]
//   llama-oracle --model M --tokenize "text" [--no-special]
//
// Output fields:
//   prompt_logits  logits after the last prompt token (full vector)
//   tokens         greedy continuation (n_predict tokens; no EOS stop unless --stop-at-eos)
//   margins        top-2 log-prob margin (= top-2 logit difference) at each generated step
//   tf_tokens      with --force-tokens F: argmax at each forced step; tf_tokens[0] is the
//                  argmax after the prompt, tf_tokens[i] the argmax after F[i-1]
//                  (one entry per forced token)
//   tf_margins     top-2 margins at those steps
//   tokens (tokenize mode) the token ids of the text
//
// Settings chosen for determinism: 1 thread (2 threads spin on the 2-core CI box),
// F32 KV cache (option --kv-f16 for llama.cpp's default), flash attention off,
// n_batch = n_ubatch >= prompt length so the prompt is one ubatch.
#include <CLI/CLI.hpp>
#include <ggml-backend.h>
#include <llama.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

std::vector<llama_token> parse_tokens(const std::string& s) {
  std::vector<llama_token> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t') {
      if (!cur.empty()) out.push_back(static_cast<llama_token>(std::stol(cur)));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

struct Top2 {
  int id = 0;
  float margin = 0;
};

Top2 top2(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  float second = -INFINITY;
  for (int i = 0; i < n; ++i)
    if (i != best && logits[i] > second) second = logits[i];
  return {best, logits[best] - second};
}

// Decodes `toks` starting at position `pos0`; requests logits for the last token
// only, or for every token when `all_logits`.
bool decode(llama_context* ctx, const std::vector<llama_token>& toks, int pos0, bool all_logits) {
  llama_batch b = llama_batch_init(static_cast<int32_t>(toks.size()), 0, 1);
  for (size_t i = 0; i < toks.size(); ++i) {
    b.token[i] = toks[i];
    b.pos[i] = pos0 + static_cast<int>(i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = all_logits || i + 1 == toks.size();
  }
  b.n_tokens = static_cast<int32_t>(toks.size());
  const int rc = llama_decode(ctx, b);
  llama_batch_free(b);
  if (rc != 0) std::fprintf(stderr, "llama-oracle: llama_decode failed (%d)\n", rc);
  return rc == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"llama.cpp reference runs for the parity tests (prints JSON)"};
  std::string model_path, prompt_s, force_s, tokenize_text;
  int n_predict = 32, threads = 1, n_ctx = 0;
  bool kv_f16 = false, stop_eos = false, no_special = false, verbose = false;
  app.add_option("--model,-m", model_path, "GGUF model")->required();
  app.add_option("--prompt-tokens,-p", prompt_s, "prompt token ids, comma or space separated");
  app.add_option("--n-predict,-n", n_predict, "greedy tokens to generate");
  app.add_option("--force-tokens", force_s, "teacher-forced continuation token ids");
  app.add_option("--tokenize", tokenize_text, "tokenize TEXT and print {\"tokens\": [...]}");
  app.add_flag("--no-special", no_special, "tokenize: add_special = parse_special = false");
  app.add_option("--threads,-t", threads, "threads (default 1)");
  app.add_option("--ctx", n_ctx, "context size (default: enough for prompt + generation)");
  app.add_flag("--kv-f16", kv_f16, "F16 KV cache (llama.cpp's default) instead of F32");
  app.add_flag("--stop-at-eos", stop_eos, "stop generating at an end-of-generation token");
  app.add_flag("--verbose,-v", verbose, "llama.cpp log output");
  CLI11_PARSE(app, argc, argv);

  if (!verbose) llama_log_set(quiet_log, nullptr);
  // FT_LLAMA_LIB_DIR in the environment: the libraries moved (a copy carried to another machine).
  const char* libdir = std::getenv("FT_LLAMA_LIB_DIR");
  ggml_backend_load_all_from_path(libdir && *libdir ? libdir : FT_LLAMA_LIB_DIR);
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llama-oracle: llama.cpp failed to load %s\n", model_path.c_str());
    return 3;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  nlohmann::json out;

  if (!tokenize_text.empty()) {
    const bool special = !no_special;
    std::vector<llama_token> toks(tokenize_text.size() + 16);
    int n = llama_tokenize(vocab, tokenize_text.c_str(), static_cast<int32_t>(tokenize_text.size()), toks.data(),
                           static_cast<int32_t>(toks.size()), special, special);
    if (n < 0) {
      toks.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab, tokenize_text.c_str(), static_cast<int32_t>(tokenize_text.size()), toks.data(),
                         static_cast<int32_t>(toks.size()), special, special);
    }
    toks.resize(static_cast<size_t>(std::max(n, 0)));
    out["tokens"] = toks;
    std::printf("%s\n", out.dump().c_str());
    llama_model_free(model);
    return 0;
  }

  const auto prompt = parse_tokens(prompt_s);
  const auto forced = parse_tokens(force_s);
  if (prompt.empty()) {
    std::fprintf(stderr, "llama-oracle: --prompt-tokens is required (non-empty)\n");
    return 2;
  }
  for (auto t : prompt)
    if (t < 0 || t >= n_vocab) {
      std::fprintf(stderr, "llama-oracle: prompt token %d out of range [0, %d)\n", t, n_vocab);
      return 2;
    }
  const int need = static_cast<int>(prompt.size() + std::max<size_t>(static_cast<size_t>(n_predict), forced.size())) + 8;
  auto cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(std::max(n_ctx, need));
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max<size_t>(512, prompt.size() + forced.size()));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = cp.type_v = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama-oracle: failed to create a context for %s\n", model_path.c_str());
    return 3;
  }

  // Free-running greedy generation.
  if (!decode(ctx, prompt, 0, false)) return 3;
  const float* logits = llama_get_logits_ith(ctx, -1);
  out["prompt_logits"] = std::vector<float>(logits, logits + n_vocab);
  std::vector<llama_token> gen;
  std::vector<float> margins;
  int pos = static_cast<int>(prompt.size());
  for (int i = 0; i < n_predict; ++i) {
    const Top2 t = top2(logits, n_vocab);
    gen.push_back(t.id);
    margins.push_back(t.margin);
    if (stop_eos && llama_vocab_is_eog(vocab, t.id)) break;
    if (i + 1 == n_predict) break;
    if (!decode(ctx, {t.id}, pos++, false)) return 3;
    logits = llama_get_logits_ith(ctx, -1);
  }
  out["tokens"] = gen;
  out["margins"] = margins;

  // Teacher forcing: prompt + forced tokens in one batch, logits at every forced step.
  if (!forced.empty()) {
    llama_memory_clear(llama_get_memory(ctx), true);
    std::vector<llama_token> all = prompt;
    all.insert(all.end(), forced.begin(), forced.end() - 1);  // the last forced token predicts nothing we compare
    llama_batch b = llama_batch_init(static_cast<int32_t>(all.size()), 0, 1);
    for (size_t i = 0; i < all.size(); ++i) {
      b.token[i] = all[i];
      b.pos[i] = static_cast<int>(i);
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = i + 1 >= prompt.size();
    }
    b.n_tokens = static_cast<int32_t>(all.size());
    if (llama_decode(ctx, b) != 0) {
      std::fprintf(stderr, "llama-oracle: llama_decode failed (teacher forcing)\n");
      return 3;
    }
    llama_batch_free(b);
    std::vector<llama_token> tf;
    std::vector<float> tf_margins;
    for (size_t i = prompt.size() - 1; i < all.size(); ++i) {
      const Top2 t = top2(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), n_vocab);
      tf.push_back(t.id);
      tf_margins.push_back(t.margin);
    }
    out["tf_tokens"] = tf;
    out["tf_margins"] = tf_margins;
  }

  std::printf("%s\n", out.dump().c_str());
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
