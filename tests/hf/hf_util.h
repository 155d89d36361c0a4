// Helpers for the HF checkpoint tests: per-process temp dirs, greedy runs in-process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/session.h"
#include "model/model.h"

namespace ft::test {

inline std::string hf_tmp(const std::string& name) {
  // ctest runs tests as parallel processes: keep their files apart.
  const auto d = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "hf" / std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return (d / name).string();
}

inline void write_file(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

struct Greedy {
  std::vector<float> prompt_logits;
  std::vector<int32_t> tokens;
};

// Prompt logits and n greedy tokens (fp32 activations, one thread).
inline Greedy run_greedy(const model::Model& m, const std::vector<int32_t>& prompt, int n) {
  engine::SessionOptions so;
  so.n_threads = 1;
  so.n_ctx = 128;
  engine::Session s(m, so);
  Greedy g;
  const float* l = s.eval(prompt.data(), static_cast<int64_t>(prompt.size()));
  g.prompt_logits.assign(l, l + m.hp.n_vocab);
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (int64_t v = 1; v < m.hp.n_vocab; ++v)
      if (l[v] > l[best]) best = static_cast<int32_t>(v);
    g.tokens.push_back(best);
    l = s.eval(&best, 1);
  }
  return g;
}

}  // namespace ft::test
