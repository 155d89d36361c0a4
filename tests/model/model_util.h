// Helpers for the model tests: tiny models written by the test-model generator, rewritten
// copies of a GGUF (extra / renamed / dropped tensors) for the loader's refusals, and the
// logits of every prompt position with their comparisons.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/session.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "testgen/model_gen.h"

namespace ft::test {

inline std::string tmp_path(const std::string& name) {
  // ctest runs each test in its own process, in parallel: keep their files apart.
  const auto d = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "model" / std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return (d / name).string();
}

// Copies every key and tensor of `src` into a writer, letting `keep` drop tensors and `extra`
// add some, and writes it to `dst`.
inline void rewrite_gguf(const std::string& src, const std::string& dst,
                         const std::function<bool(const gguf::TensorInfo&)>& keep,
                         const std::function<void(gguf::Writer&)>& extra) {
  auto f = gguf::File::open(src);
  gguf::Writer w(f->alignment());
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : f->tensors()) {
    if (keep && !keep(t)) continue;
    std::vector<int64_t> ne(t.ne, t.ne + std::max(1, t.n_dims));
    w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  if (extra) extra(w);
  w.write(dst);
}

// Logits after every token of p: the prompt as one eval (in micro-batches of the session's
// n_ubatch), or token by token.
inline std::vector<float> all_logits(engine::Session& s, const std::vector<int32_t>& p, bool batch) {
  const int64_t V = s.n_vocab(), n = static_cast<int64_t>(p.size());
  std::vector<float> out(n * V);
  if (batch) {
    const float* l = s.eval(p.data(), n, true);
    std::copy(l, l + n * V, out.begin());
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float* l = s.eval(&p[i], 1);
      std::copy(l, l + V, out.begin() + i * V);
    }
  }
  return out;
}

// Largest |a[i] - b[i]|; infinity when the sizes differ.
inline float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// max - min of a: the scale a tolerance is taken from.
inline float spread(const std::vector<float>& a) {
  float lo = a[0], hi = a[0];
  for (float x : a) lo = std::min(lo, x), hi = std::max(hi, x);
  return hi - lo;
}

}  // namespace ft::test
