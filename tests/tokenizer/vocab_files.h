// Access to llama.cpp's vocabulary test files (made by scripts/setup-oracle.sh).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ft::test {

inline const char* const kVocabNames[] = {"llama-bpe", "qwen2", "qwen35", "gemma-4"};

inline std::string vocab_path(const std::string& name) {
  return std::string(FT_LLAMA_DIR) + "/models/ggml-vocab-" + name + ".gguf";
}

// Fails the test (not skips) when the oracle files are missing: CI always has them.
inline bool require_vocab(const std::string& name) {
  const std::string path = vocab_path(name);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/setup-oracle.sh to fetch llama.cpp's vocabulary files";
    return false;
  }
  return true;
}

struct LoadedVocab {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

inline LoadedVocab load_vocab(const std::string& name) {
  LoadedVocab v;
  v.file = gguf::File::open(vocab_path(name));
  v.tok = Tokenizer::from_gguf(*v.file);
  return v;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// test-tokenizer-0 format: .inp holds texts separated by "\n__ggml_vocab_test__\n",
// .out one line of space-separated ids per text.
inline std::vector<std::pair<std::string, std::vector<int32_t>>> read_vectors(const std::string& name) {
  const std::string inp = read_file(vocab_path(name) + ".inp");
  const std::string out = read_file(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<int32_t>> ids;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ws(line);
    std::vector<int32_t> row;
    for (long v; ws >> v;) row.push_back(static_cast<int32_t>(v));
    ids.push_back(std::move(row));
  }
  std::vector<std::pair<std::string, std::vector<int32_t>>> result;
  EXPECT_EQ(texts.size(), ids.size()) << name << ": .inp and .out disagree on the number of tests";
  for (size_t i = 0; i < std::min(texts.size(), ids.size()); ++i) result.emplace_back(texts[i], ids[i]);
  return result;
}

}  // namespace ft::test
