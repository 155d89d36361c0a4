// ft bench: prompt-processing and decode speed of a model, in the shape of llama-bench's
// table so the two can sit side by side (bench/h200.sh runs both on the same files).
//
//   pp<P>        P prompt tokens in one eval (micro-batches of 512), from an empty cache
//   tg<N>[@d<D>] N greedy decode steps, each feeding back the argmax, after a D-token prefill
//
// Each test runs --reps times after one untimed warm-up; t/s is the mean (± std). Decode rows
// also give the weight bytes one token reads (every tensor, routed experts counted at
// n_used / n_expert, embeddings at one row) and, with
// --bw-gbs (the measured read bandwidth), that traffic as % of the roofline.
// FT_CHAIN_TRACE=PREFIX (a build with -DFT_CHAIN_TRACE=ON): the last repetition's timed decode
// steps of each tg test as a kernel timeline in PREFIX.<test>.csv (cuda/chain_trace.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/arg_checks.h"
#include "cli/commands.h"
#include "cli/runner_factory.h"
#include "core/error.h"
#include "format/gguf.h"
#include "model/model.h"
#ifdef FT_HAVE_CUDA
#include "cuda/chain_trace.h"
#endif

namespace ft::cli {
namespace {

struct BenchOptions {
  std::string model;
  RunnerOptions run;  // --device, --dtype, --moe-*
  std::vector<int> prompt = {512};
  std::vector<int> gen = {128};
  std::vector<int> depth = {0};
  int reps = 3;
  int threads = 0;
  int64_t ctx_size = 0;
  double bw_gbs = 0.0;
  bool json = false;
};

// Whether this build and FT_CHAIN_TRACE ask for the decode chain's timeline.
bool chain_trace() {
#ifdef FT_HAVE_CUDA
  return cuda::chain_trace_wanted();
#else
  return false;
#endif
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Weight bytes one decode token reads: every tensor of the file once (projections, norms,
// scales, the Gated DeltaNet ssm_* tensors, shared experts, per-layer inputs, ...), but the
// routed experts (*_exps*) at n_used / n_expert of their layer and the token embedding
// tables (token_embd, per_layer_token_embd) at one row -- plus the whole of token_embd when
// the output head is tied to it.
double bytes_per_token(const model::Model& m) {
  const auto& ts = m.file->tensors();
  const bool tied = std::none_of(ts.begin(), ts.end(), [](const gguf::TensorInfo& t) { return t.name == "output.weight"; });
  double b = 0;
  for (const gguf::TensorInfo& t : ts) {
    const double n = static_cast<double>(t.nbytes);
    // "blk.<il>.ffn_..._exps...": the layer's share of its routed experts.
    const int64_t il = t.name.rfind("blk.", 0) == 0 ? std::strtoll(t.name.c_str() + 4, nullptr, 10) : -1;
    if (t.name.find("_exps") != std::string::npos && il >= 0 &&
        il < static_cast<int64_t>(m.hp.n_expert_used.size()) && m.hp.n_expert > 0) {
      b += n * static_cast<double>(m.hp.n_expert_used[il]) / static_cast<double>(m.hp.n_expert);
    } else if (t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight") {
      b += n / static_cast<double>(t.ne[1]) + (tied && t.name == "token_embd.weight" ? n : 0.0);
    } else {
      b += n;
    }
  }
  return b;
}

struct Stat {
  double mean = 0, sd = 0;
};
Stat stat(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

std::vector<int32_t> tokens_of(int64_t n, int64_t n_vocab, int64_t salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((1 + 7919 * (i + salt)) % n_vocab);
  return t;
}

void prefill(engine::Runner& r, int64_t n, int64_t n_vocab) {
  if (n <= 0) return;
  const auto t = tokens_of(n, n_vocab, 3);
  r.eval_argmax(t.data(), n);
}

int run_bench(const BenchOptions& o) {
  if (o.reps < 1) fail("--reps must be >= 1, got {}", o.reps);
  model::LoadOptions lo;
  auto m = model::load_model(o.model, lo);
  int max_need = 0;
  for (int p : o.prompt) max_need = std::max(max_need, p);
  for (int d : o.depth)
    for (int g : o.gen) max_need = std::max(max_need, d + g + 1);
  RunnerOptions ro = o.run;
  ro.threads = o.threads;
  ro.n_ctx = o.ctx_size > 0 ? o.ctx_size : max_need;
  double last = 0;
  ro.progress = [&](uint64_t done, uint64_t total) {
    const double t = now_s();
    if (done != total && t - last < 0.5) return;
    last = t;
    std::fprintf(stderr, "\ruploading %s: %llu / %llu MiB", o.model.c_str(),
                 static_cast<unsigned long long>(done >> 20), static_cast<unsigned long long>(total >> 20));
    if (done == total) std::fputc('\n', stderr);
  };
  auto runner = make_runner(*m, ro);
  engine::Runner& r = *runner;
  const int64_t V = m->hp.n_vocab;
  const double bpt = bytes_per_token(*m);
  const std::string name = o.model.substr(o.model.find_last_of('/') + 1);

  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    std::printf("| model | backend | test | t/s | GB/token | %% roofline |\n|---|---|---|---|---|---|\n");
    std::fflush(stdout);
  }
  auto emit = [&](const std::string& test, const Stat& s, bool decode) {
    const double gb = decode ? bpt / 1e9 : 0.0;
    const double roof = decode && o.bw_gbs > 0 ? 100.0 * s.mean * gb / o.bw_gbs : 0.0;
    if (o.json) {
      rows.push_back({{"model", name}, {"test", test}, {"tok_s", s.mean}, {"tok_s_sd", s.sd},
                      {"gb_per_token", gb}, {"roofline_pct", roof}, {"backend", r.describe()}});
    } else {
      std::printf("| %s | %s | %s | %.2f ± %.2f | %s | %s |\n", name.c_str(), r.describe().c_str(),
                  test.c_str(), s.mean, s.sd, decode ? fmt::format("{:.3f}", gb).c_str() : "",
                  roof > 0 ? fmt::format("{:.1f}", roof).c_str() : "");
      std::fflush(stdout);
    }
  };

  for (int p : o.prompt) {
    if (p <= 0) continue;
    const auto t = tokens_of(p, V, 1);
    std::vector<double> tps;
    for (int rep = -1; rep < o.reps; ++rep) {
      r.reset();
      const double t0 = now_s();
      r.eval_argmax(t.data(), p);
      if (rep >= 0) tps.push_back(p / (now_s() - t0));
    }
    emit(fmt::format("pp{}", p), stat(tps), false);
  }
  // FT_BENCH_PAUSE_MS=N (a diagnostic knob): N ms of idle before each decode row, so a transient
  // left by the rows before it (clocks after a prefill) can be told from a lasting state.
  const char* pause_env = std::getenv("FT_BENCH_PAUSE_MS");
  const int pause_ms = pause_env != nullptr ? std::max(0, std::atoi(pause_env)) : 0;
  for (int d : o.depth) {
    for (int g : o.gen) {
      if (g <= 0) continue;
      if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      const std::string test = d > 0 ? fmt::format("tg{}@d{}", g, d) : fmt::format("tg{}", g);
      std::vector<double> tps;
      for (int rep = -1; rep < o.reps; ++rep) {
        r.reset();
        prefill(r, d, V);
        int32_t next = static_cast<int32_t>(1 % V);
        next = r.eval_argmax(&next, 1);  // graph capture happens here, untimed
        [[maybe_unused]] const bool trace = rep == o.reps - 1 && chain_trace();
#ifdef FT_HAVE_CUDA
        if (trace) cuda::chain_trace_start();
#endif
        const double t0 = now_s();
        for (int i = 0; i < g; ++i) next = r.eval_argmax(&next, 1);
        if (rep >= 0) tps.push_back(g / (now_s() - t0));
#ifdef FT_HAVE_CUDA
        if (trace) {
          const std::string path = fmt::format("{}.{}.csv", std::getenv("FT_CHAIN_TRACE"), test);
          const int64_t n = cuda::chain_trace_dump(path);
          std::fprintf(stderr, "chain trace: %lld launches of %d steps -> %s\n", static_cast<long long>(n), g,
                       path.c_str());
        }
#endif
      }
      emit(test, stat(tps), true);
    }
  }
  if (o.json) std::printf("%s\n", rows.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

Command register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* sub = app.add_subcommand("bench", "Prompt-processing and decode speed (llama-bench style)");
  sub->add_option("--model,-m", o->model, "GGUF model file")->required();
  add_runner_options(*sub, o->run);
  sub->add_option("-p,--n-prompt", o->prompt, "prompt lengths (default 512)")->delimiter(',');
  sub->add_option("-n,--n-gen", o->gen, "decode lengths (default 128)")->delimiter(',');
  sub->add_option("-d,--n-depth", o->depth, "decode after this many cached tokens (default 0)")->delimiter(',');
  sub->add_option("-r,--reps", o->reps, "repetitions (default 3)");
  sub->add_option("--threads,-t", o->threads, "CPU threads")->check(threads_range());
  sub->add_option("--ctx-size", o->ctx_size, "KV cache size (default: what the tests need)");
  sub->add_option("--bw-gbs", o->bw_gbs, "measured memory read bandwidth in GB/s, for % of roofline");
  sub->add_flag("--json", o->json, "one JSON array instead of the table");
  return {sub, [o] { return run_bench(*o); }};
}

}  // namespace ft::cli
