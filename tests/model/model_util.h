// Helpers for the model tests: tiny models written by the test-model generator, and
// rewritten copies of a GGUF (extra / renamed / dropped tensors) for the loader's refusals.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

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

}  // namespace ft::test
