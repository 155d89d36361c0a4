// A small byte-level BPE vocabulary (tokenizer.ggml.model = "gpt2", pre = "qwen2")
// for test models: 256 byte tokens in GPT-2 bytes_to_unicode order, merges learned
// greedily from an embedded English text, then the Qwen special tokens
// <|endoftext|>, <|im_start|>, <|im_end|> (CONTROL). Deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft::testgen {

struct BpeVocab {
  std::vector<std::string> tokens;   // index = token id (byte-level unicode text)
  std::vector<int32_t> token_types;  // 1 NORMAL, 3 CONTROL
  std::vector<std::string> merges;   // "left right", rank = index
  int32_t eos_id = -1;               // <|im_end|>
  int32_t bos_id = -1;               // <|endoftext|> (not added: add_bos_token = false)
  int32_t pad_id = -1;               // <|endoftext|>
};

// Learns up to `n_merges` merges (stops early when no pair occurs twice).
BpeVocab build_byte_bpe_vocab(int n_merges);

// GPT-2 byte -> unicode code point (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
uint32_t gpt2_byte_to_codepoint(uint8_t b);
// The embedded training text (also handy as a prompt source in tests).
const std::string& bpe_training_text();

}  // namespace ft::testgen
