// tokenizer.json + tokenizer_config.json (+ config.json token ids) -> the tokenizer.ggml.*
// metadata llama.cpp's converter writes for a byte-level BPE ("gpt2") vocabulary:
// token list padded to config.vocab_size with [PAD<i>] (UNUSED), added tokens CONTROL when
// special (or looking special, "<|...|>") else USER_DEFINED, merges from either the string
// ("a b") or the pair (["a", "b"]) form, special token ids as gguf-py's SpecialVocab finds
// them, and the chat template.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hf/hf_config.h"

namespace ft::hf {

struct HfVocab {
  std::string pre;                    // tokenizer.ggml.pre: qwen2 / llama-bpe
  std::vector<std::string> tokens;    // index = id
  std::vector<int32_t> token_types;   // 1 NORMAL, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED
  std::vector<std::string> merges;    // "left right"
  // bos, eos, unk, sep, pad, cls, mask -> id (only those found), in gguf-py's order.
  std::vector<std::pair<std::string, int64_t>> special_ids;
  std::vector<std::pair<std::string, bool>> add_special;  // add_bos_token, ...
  std::optional<std::string> chat_template;
  std::optional<bool> add_space_prefix;  // llama: tokenizer_config add_prefix_space
};

// Throws ft::Error naming the file for a missing tokenizer.json, a model type other than
// BPE, an unknown pre-tokenizer regex, or ids outside config.vocab_size.
HfVocab read_vocab(const std::string& dir, const HfConfig& cfg);

// The Split regexes of the pre-tokenizers our tokenizer (and llama.cpp) implements.
extern const char* const kQwen2Regex;
extern const char* const kLlama3Regex;

}  // namespace ft::hf
