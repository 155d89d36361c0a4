// ft generate: load a model, prefill a prompt as one batch, decode token by token.
//
// Without --json the text streams to stdout and timings go to stderr. With --json exactly one
// JSON object goes to stdout:
//   {"tokens": [...], "text": "...", "prompt_tokens": [...],
//    "timings": {"prefill_tokens", "prefill_tok_s", "decode_tokens", "decode_tok_s" (the steps after
//                the first), "decode_first_ms", "load_s"},
//    "tf_tokens": [...]}                                       (only with --force-tokens)
// Teacher forcing (--force-tokens A,B,...): the given tokens are fed instead of the model's
// choices; tf_tokens[i] is the argmax of the logits that predicted forced token i (so
// tf_tokens[0] is the argmax after the prompt) and the run stops after the forced tokens.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/arg_checks.h"
#include "cli/commands.h"
#include "cli/runner_factory.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "format/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace ft::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_tokens;
  int max_tokens = 128;
  bool ignore_eos = false;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  int threads = 0;
  RunnerOptions run;  // --device, --dtype, --moe-*
  bool stats = false;
  int64_t ctx_size = 0;
  bool json = false;
  std::optional<std::string> force_tokens;
  std::string logits_out;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int32_t> parse_ids(const std::string& s, const char* option) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string item = s.substr(i, j - i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX)
      fail("{}: '{}' is not a token id (expected comma-separated non-negative integers)", option,
           item);
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return ids;
}

void write_logits(const std::string& path, const float* logits, int64_t n) {
  std::string s = "[";
  s.reserve(static_cast<size_t>(n) * 12);
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ',';
    if (std::isfinite(logits[i]))
      s += fmt::format("{}", logits[i]);
    else
      s += "null";
  }
  s += "]\n";
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(s.data(), static_cast<std::streamsize>(s.size())))
    fail("--logits-out: cannot write {}", path);
}

int run_generate(const GenerateOptions& o) {
  if (o.prompt.has_value() == o.prompt_tokens.has_value())
    fail("give exactly one of --prompt TEXT or --prompt-tokens ID,ID,...");
  if (o.max_tokens < 0) fail("--max-tokens must be >= 0, got {}", o.max_tokens);
  if (o.ctx_size < 0) fail("--ctx-size must be >= 0, got {}", o.ctx_size);

  // Load (with a progress line on stderr for big files).
  const double t_load0 = now_s();
  model::LoadOptions lo;
  double last_report = 0.0;
  auto progress = [&](const char* what) {
    return [&, what](uint64_t done, uint64_t total) {
      if (total < (512ull << 20)) return;
      const double t = now_s();
      if (done != total && t - last_report < 0.5) return;
      last_report = t;
      std::fprintf(stderr, "\r%s %s: %llu / %llu MiB", what, o.model.c_str(),
                   static_cast<unsigned long long>(done >> 20), static_cast<unsigned long long>(total >> 20));
      if (done == total) std::fputc('\n', stderr);
    };
  };
  lo.progress = progress("loading");
  auto m = model::load_model(o.model, lo);
  std::unique_ptr<Tokenizer> tok;
  std::string tok_error;
  try {
    tok = Tokenizer::from_gguf(*m->file);
  } catch (const Error& e) {
    tok_error = e.what();  // fine for --prompt-tokens; text output is then empty
  }
  const double load_s = now_s() - t_load0;

  std::vector<int32_t> prompt;
  if (o.prompt) {
    if (!tok) fail("{}", tok_error);
    if (!tok->can_encode())
      fail("{}: the model has no vocabulary (tokenizer.ggml.model 'none'); use --prompt-tokens",
           o.model);
    prompt = tok->encode(*o.prompt, /*add_special=*/true, /*parse_special=*/true);
    if (prompt.empty()) fail("--prompt: the text encodes to no tokens");
  } else {
    prompt = parse_ids(*o.prompt_tokens, "--prompt-tokens");
  }
  std::vector<int32_t> forced;
  if (o.force_tokens) forced = parse_ids(*o.force_tokens, "--force-tokens");
  const int64_t n_vocab = m->hp.n_vocab;
  for (int32_t id : prompt)
    if (id >= n_vocab) fail("--prompt-tokens: token id {} is out of range [0, {})", id, n_vocab);
  for (int32_t id : forced)
    if (id >= n_vocab) fail("--force-tokens: token id {} is out of range [0, {})", id, n_vocab);

  RunnerOptions ro = o.run;
  ro.n_ctx = o.ctx_size;
  ro.threads = o.threads;
  ro.progress = progress("uploading");
  const double t_up0 = now_s();
  std::unique_ptr<engine::Runner> runner = make_runner(*m, ro);
  engine::Runner& sess = *runner;
  const double load_total_s = load_s + (now_s() - t_up0);
  if (static_cast<int64_t>(prompt.size()) > sess.n_ctx())
    fail("the prompt has {} tokens, more than --ctx-size {}", prompt.size(), sess.n_ctx());

  engine::SamplerParams sp;
  sp.temperature = o.temperature;
  sp.top_k = o.top_k;
  sp.top_p = o.top_p;
  sp.min_p = o.min_p;
  sp.repeat_penalty = o.repeat_penalty;
  sp.seed = o.seed;
  engine::Sampler sampler(sp);
  for (int32_t id : prompt) sampler.accept(id);

  // Greedy without penalties needs only the argmax, and any other choice only the sampler:
  // a GPU computes either where the logits are. Teacher forcing and --logits-out need the
  // logits themselves.
  const bool teacher = o.force_tokens.has_value();
  const bool argmax_only = o.temperature <= 0.0f && o.repeat_penalty == 1.0f && !teacher &&
                           o.logits_out.empty();
  const bool sample_only = !argmax_only && !teacher && o.logits_out.empty();
  const double t_pf0 = now_s();
  const float* logits = nullptr;
  int32_t next = -1;
  if (argmax_only)
    next = sess.eval_argmax(prompt.data(), static_cast<int64_t>(prompt.size()));
  else if (sample_only)
    next = sess.eval_sample(prompt.data(), static_cast<int64_t>(prompt.size()), sampler);
  else
    logits = sess.eval(prompt.data(), static_cast<int64_t>(prompt.size()));
  const double prefill_s = now_s() - t_pf0;
  if (!o.logits_out.empty()) write_logits(o.logits_out, logits, n_vocab);

  std::unique_ptr<Tokenizer::StreamDecoder> stream;
  if (tok) stream = std::make_unique<Tokenizer::StreamDecoder>(*tok);
  std::string text;
  std::vector<int32_t> out, tf;
  const int64_t n_gen = teacher ? static_cast<int64_t>(forced.size()) : o.max_tokens;
  // The first decode step apart: it pays one-time costs (the GPU session captures and
  // instantiates its one-token CUDA graph there: ~0.1 s for Qwen3-30B-A3B with offload on the
  // H200, session 9, which put 1.7 ms on every token of a 64-token run). decode_tok_s is the
  // steady rate of the steps after it; decode_first_ms the first step.
  int64_t n_decode = 0;
  double decode_s = 0.0, first_s = 0.0;
  for (int64_t i = 0; i < n_gen; ++i) {
    int32_t id;
    if (teacher) {
      tf.push_back(engine::argmax(logits, static_cast<int32_t>(n_vocab)));
      id = forced[i];
    } else if (argmax_only || sample_only) {
      id = next;
    } else {
      id = sampler.sample(logits, static_cast<int32_t>(n_vocab));
    }
    sampler.accept(id);
    out.push_back(id);
    if (stream) {
      const std::string piece = stream->feed(id);
      text += piece;
      if (!o.json) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
    }
    if (!teacher && !o.ignore_eos && tok && tok->is_eog(id)) break;
    if (i + 1 == n_gen || sess.n_past() >= sess.n_ctx()) break;
    const double t0 = now_s();
    if (argmax_only)
      next = sess.eval_argmax(&id, 1);
    else if (sample_only)
      next = sess.eval_sample(&id, 1, sampler);
    else
      logits = sess.eval(&id, 1);
    if (n_decode == 0)
      first_s = now_s() - t0;
    else
      decode_s += now_s() - t0;
    ++n_decode;
  }
  if (stream) {
    const std::string rest = stream->flush();
    text += rest;
    if (!o.json) std::fwrite(rest.data(), 1, rest.size(), stdout);
  }

  const double prefill_tps = prefill_s > 0 ? static_cast<double>(prompt.size()) / prefill_s : 0.0;
  const double decode_tps = n_decode > 1 && decode_s > 0 ? static_cast<double>(n_decode - 1) / decode_s
                            : first_s > 0                 ? 1.0 / first_s
                                                          : 0.0;
  if (o.json) {
    nlohmann::json j;
    j["tokens"] = out;
    j["text"] = text;
    j["prompt_tokens"] = prompt;
    j["timings"] = {{"prefill_tokens", prompt.size()}, {"prefill_tok_s", prefill_tps},
                    {"decode_tokens", n_decode},       {"decode_tok_s", decode_tps},
                    {"decode_first_ms", first_s * 1e3}, {"load_s", load_total_s}};
    j["runner"] = sess.describe();
    if (teacher) j["tf_tokens"] = tf;
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fprintf(stdout, "%s\n", s.c_str());
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);  // the text ends before the timing line on a terminal
    std::fprintf(stderr,
                 "load %.2f s | prefill %zu tokens, %.1f tok/s | decode %lld tokens, %.1f tok/s after the first (first "
                 "%.1f ms) | %s\n",
                 load_total_s, prompt.size(), prefill_tps, static_cast<long long>(n_decode), decode_tps,
                 first_s * 1e3, sess.describe().c_str());
  }
  if (o.stats) std::fputs(runner_moe_stats(sess).c_str(), stderr);
  return 0;
}

}  // namespace

Command register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* sub = app.add_subcommand("generate", "Generate text from a GGUF model (CPU or GPU)");
  sub->add_option("--model", o->model, "GGUF model file")->required();
  sub->add_option("--prompt", o->prompt, "prompt text (tokenised with BOS and special tokens)");
  sub->add_option("--prompt-tokens", o->prompt_tokens, "prompt token ids, comma-separated (fed as is)");
  sub->add_option("--max-tokens", o->max_tokens, "tokens to generate (default 128)");
  sub->add_flag("--ignore-eos", o->ignore_eos, "do not stop at end-of-generation tokens");
  sub->add_option("--temperature", o->temperature, "sampling temperature (default 0.8; 0 = greedy)")
      ->check(temperature_range());
  sub->add_option("--top-k", o->top_k, "top-k (default 40; 0 = off)")->check(count_range());
  sub->add_option("--top-p", o->top_p, "top-p (default 0.95; 1 = off)")->check(probability_range());
  sub->add_option("--min-p", o->min_p, "min-p (default 0.05; 0 = off)")->check(probability_range());
  sub->add_option("--repeat-penalty", o->repeat_penalty, "repetition penalty (default 1 = off)")
      ->check(penalty_range());
  sub->add_option("--seed", o->seed, "sampling seed (default 0)");
  sub->add_option("--threads", o->threads, "threads (default: physical cores)")->check(threads_range());
  add_runner_options(*sub, o->run);
  sub->add_flag("--stats", o->stats, "print the MoE backend's statistics (hits, misses, bytes moved) at the end");
  sub->add_option("--ctx-size", o->ctx_size, "KV cache size in tokens (default min(context_length, 4096))");
  sub->add_flag("--json", o->json, "print one JSON object with tokens, text and timings");
  sub->add_option("--force-tokens", o->force_tokens, "teacher forcing: feed these ids, report argmaxes");
  sub->add_option("--logits-out", o->logits_out, "write the logits after the prompt as a JSON array");
  return {sub, [o] { return run_generate(*o); }};
}

}  // namespace ft::cli
