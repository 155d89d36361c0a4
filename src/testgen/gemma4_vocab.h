// A small Gemma-4-style vocabulary (tokenizer.ggml.model = "gemma4") for test models:
// <pad> <eos> <bos> <unk>, the 256 byte-fallback tokens <0x00>..<0xFF> (BYTE), every
// character of the embedded training text with spaces escaped to U+2581 '▁', the newline
// runs "\n\n" and "\n\n\n" (Gemma 4 looks newline runs up whole), then merges learned
// greedily on that text split before each '▁' and at newlines. Deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft::testgen {

struct Gemma4Vocab {
  std::vector<std::string> tokens;   // index = token id (raw UTF-8, '▁' for spaces)
  std::vector<int32_t> token_types;  // 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 6 BYTE
  std::vector<std::string> merges;   // "left right", rank = index
  int32_t pad_id = 0, eos_id = 1, bos_id = 2, unk_id = 3;
};

Gemma4Vocab build_gemma4_vocab(int n_merges);

}  // namespace ft::testgen
