// Byte-pair merging of one pre-tokenized word by merge rank (lower rank merges
// first, ties go to the leftmost pair), as llama.cpp's llm_tokenizer_bpe_session.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ft::tok {

// Merge table from tokenizer.ggml.merges: the pair (left, right) -> rank.
class BpeRanks {
 public:
  void reserve(size_t n) { map_.reserve(n); }
  // Keeps the first rank when a pair is listed twice (as llama.cpp's emplace).
  void add(std::string_view left, std::string_view right, int rank);
  // Rank of the pair, or -1.
  int find(std::string_view left, std::string_view right) const;
  size_t size() const { return map_.size(); }

 private:
  // Key = 4-byte length of left, left, right: unambiguous for any bytes.
  static void make_key(std::string& key, std::string_view left, std::string_view right);
  std::unordered_map<std::string, int> map_;
};

// One final symbol of a word: bytes [offset, offset + length).
struct BpeSpan {
  uint32_t offset;
  uint32_t length;
  bool operator==(const BpeSpan&) const = default;
};

// Starts from one symbol per UTF-8 character of `word` (a character is cut at
// the end of the word if it is truncated) and merges with a priority queue keyed
// (rank, left index). Replaces `out` with the final symbols, in order.
void bpe_merge(std::string_view word, const BpeRanks& ranks, std::vector<BpeSpan>& out);

// Scalar twin: rescans all adjacent pairs after every merge (quadratic).
void bpe_merge_naive(std::string_view word, const BpeRanks& ranks, std::vector<BpeSpan>& out);

}  // namespace ft::tok
