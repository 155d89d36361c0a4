// Helpers shared by the whole-model tests against llama.cpp (parity_test.cpp,
// hf_parity_test.cpp): running `ft` and `llama-oracle` as processes, where their binaries and
// the generated models live, and reading their JSON answers.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "oracle_isa.h"  // pins both sides to AVX2 on AVX-512 machines (why: there)

namespace ft::oracle_test {

struct Proc {
  int rc = -1;
  std::string out;  // stdout (stderr is dropped)
};

inline Proc run(const std::string& cmd) {
  Proc r;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// FT_BIN_DIR overrides where ft and llama-oracle live (binaries carried to the GPU machine).
inline std::string bin(const char* name) {
  const char* d = std::getenv("FT_BIN_DIR");
  return std::string(d && *d ? d : FT_BINARY_DIR) + "/" + name;
}

// A test's folder of generated models: $FT_PARITY_MODELS/NAME, else BUILD/parity-models/NAME.
inline std::filesystem::path models_dir(const std::string& name) {
  const char* md = std::getenv("FT_PARITY_MODELS");
  const auto d = std::filesystem::path(md && *md ? md : std::string(FT_BINARY_DIR) + "/parity-models") / name;
  std::filesystem::create_directories(d);
  return d;
}

inline std::string join(const std::vector<int>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

// Logits from JSON (null = non-finite -> NaN).
inline std::vector<float> to_floats(const nlohmann::json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(x.is_number() ? x.get<float>() : NAN);
  return v;
}

// llama.cpp's greedy run: prompt logits, n_predict tokens, each step's top-2 margin.
struct Oracle {
  bool ok = false;
  std::vector<float> logits;
  std::vector<int> tokens;
  std::vector<float> margins;
};

inline Oracle run_oracle(const std::string& model, const std::vector<int>& prompt, int n_predict) {
  Oracle o;
  const Proc r = run(bin("llama-oracle") + " --model " + model + " --prompt-tokens " + join(prompt) +
                     " --n-predict " + std::to_string(n_predict));
  if (r.rc != 0) return o;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return o;
  o.logits = to_floats(j["prompt_logits"]);
  o.tokens = j["tokens"].get<std::vector<int>>();
  o.margins = to_floats(j["margins"]);
  o.ok = true;
  return o;
}

// `ft generate`'s greedy run (one thread): prompt logits (through --logits-out at
// logits_path) and the free-running tokens, or with `force` the teacher-forced argmaxes.
struct Ours {
  bool ok = false;
  int rc = -1;
  std::vector<float> logits;
  std::vector<int> tokens;
};

inline Ours run_ours(const std::string& model, const std::vector<int>& prompt, int n_tokens, const std::string& device,
                     const std::string& dtype, const std::vector<int>* force, const std::string& logits_path) {
  Ours o;
  std::string cmd = bin("ft") + " generate --model " + model + " --prompt-tokens " + join(prompt) +
                    " --max-tokens " + std::to_string(n_tokens) + " --temperature 0 --ignore-eos --threads 1 --json --device " +
                    device + " --dtype " + dtype + " --logits-out " + logits_path;
  if (force) cmd += " --force-tokens " + join(*force);
  std::filesystem::remove(logits_path);
  const Proc r = run(cmd);
  o.rc = r.rc;
  if (r.rc != 0) return o;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return o;
  o.tokens = j[force ? "tf_tokens" : "tokens"].get<std::vector<int>>();
  std::ifstream f(logits_path);
  std::stringstream ss;
  ss << f.rdbuf();
  const auto lj = nlohmann::json::parse(ss.str(), nullptr, false);
  if (lj.is_discarded()) return o;
  o.logits = to_floats(lj);
  o.ok = true;
  return o;
}

}  // namespace ft::oracle_test
