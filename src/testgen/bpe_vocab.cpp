#include "testgen/bpe_vocab.h"

#include <map>
#include <set>
#include <utility>

namespace ft::testgen {
namespace {

bool printable_byte(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

enum class Cls { kLetter, kDigit, kSpace, kOther };
Cls classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return Cls::kLetter;
  if (c >= '0' && c <= '9') return Cls::kDigit;
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return Cls::kSpace;
  return Cls::kOther;
}

// Rough ASCII version of the qwen2 pre-tokenizer: " word", single digits,
// " punct+", whitespace runs. Only used to learn merges, so exactness is not needed.
std::vector<std::string> pre_split(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool lead_space = c == ' ' && i + 1 < text.size() && classify(static_cast<unsigned char>(text[i + 1])) != Cls::kSpace &&
                            classify(static_cast<unsigned char>(text[i + 1])) != Cls::kDigit;
    if (lead_space) ++j;
    const Cls k = classify(static_cast<unsigned char>(text[j]));
    if (k == Cls::kDigit) {
      ++j;
    } else {
      while (j < text.size() && classify(static_cast<unsigned char>(text[j])) == k) ++j;
    }
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

uint32_t gpt2_byte_to_codepoint(uint8_t b) {
  if (printable_byte(b)) return b;
  uint32_t n = 0;
  for (int x = 0; x < b; ++x)
    if (!printable_byte(x)) ++n;
  return 256 + n;
}

const std::string& bpe_training_text() {
  static const std::string text =
      "The river ran past the old mill and under the stone bridge, where the children of the village "
      "used to sit in the evening and count the boats that went down to the sea. In the summer the water "
      "was low and warm, and the boats were few; in the spring it was high and fast, and the men who worked "
      "the mill had to watch the wheel all night. There were stories about the bridge. Some said it was "
      "built in a single night by a man who had made a bargain with the river, and that the river would "
      "one day come to collect. Others said it was only the work of patient masons who came from the city "
      "with their carts and their tools, and who left when the last stone was set.\n"
      "Anna did not believe either story. She was twelve, and she believed in numbers. She counted the "
      "stones of the bridge (there were 1024 on the upstream side, and 1031 on the other), she counted "
      "the boats (on a good day, 37), and she counted the days until her brother would come home from "
      "the coast. He had written that he would be back before the first frost, and it was already the "
      "middle of October. Every morning she walked to the bridge, looked down the river, and wrote the "
      "date in her notebook: 12 October, 13 October, 14 October. Every evening she wrote the number of "
      "boats under the date.\n"
      "On the twentieth of October a small boat with a red sail came up the river against the current. "
      "That was strange, because boats did not usually come up the river; they went down. The man in the "
      "boat was tired and thin, and he was rowing as well as sailing. Anna ran down the bank and called to "
      "him, and when he looked up she saw that it was her brother.\n"
      "\"You came the wrong way,\" she said, when he had tied the boat to the old post under the bridge.\n"
      "\"There is no wrong way home,\" he said. \"There is only the long way and the short way, and I took "
      "the long way because the short way was closed.\" He laughed, and then he asked her how many boats "
      "she had counted that day. She looked in her notebook. \"Two,\" she said. \"Yours is the second.\"\n"
      "Questions and answers: What is the capital of France? Paris. What is two plus two? Four. How many "
      "days are in a week? Seven. Which planet is known as the red planet? Mars. Who wrote the story of "
      "the river and the bridge? Nobody knows; it is told in the village, and every teller changes it a "
      "little, which is how stories stay alive.\n";
  return text;
}

BpeVocab build_byte_bpe_vocab(int n_merges) {
  BpeVocab v;
  // 1. byte tokens, in bytes_to_unicode order: printable bytes first, then the rest.
  for (int b = 0; b < 256; ++b)
    if (printable_byte(b)) v.tokens.push_back(utf8(static_cast<uint32_t>(b)));
  for (int b = 0; b < 256; ++b)
    if (!printable_byte(b)) v.tokens.push_back(utf8(gpt2_byte_to_codepoint(static_cast<uint8_t>(b))));
  v.token_types.assign(v.tokens.size(), 1);
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());

  // 2. words as symbol sequences (byte-level unicode), with counts.
  std::map<std::vector<std::string>, int> words;
  for (const auto& piece : pre_split(bpe_training_text())) {
    std::vector<std::string> syms;
    for (unsigned char c : piece) syms.push_back(utf8(gpt2_byte_to_codepoint(c)));
    ++words[syms];
  }

  // 3. greedy merges: most frequent adjacent pair, ties -> smallest pair (deterministic).
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [w, cnt] : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += cnt;
    std::pair<std::string, std::string> best;
    int best_cnt = 1;
    for (const auto& [p, cnt] : pairs)
      if (cnt > best_cnt) {
        best = p;
        best_cnt = cnt;
      }
    if (best_cnt < 2) break;
    const std::string merged = best.first + best.second;
    v.merges.push_back(best.first + " " + best.second);
    if (known.insert(merged).second) {
      v.tokens.push_back(merged);
      v.token_types.push_back(1);
    }
    std::map<std::vector<std::string>, int> next;
    for (const auto& [w, cnt] : words) {
      std::vector<std::string> nw;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) {
          nw.push_back(merged);
          ++i;
        } else {
          nw.push_back(w[i]);
        }
      }
      next[nw] += cnt;
    }
    words = std::move(next);
  }

  // 4. special tokens.
  auto add_special = [&](const std::string& s) {
    v.tokens.push_back(s);
    v.token_types.push_back(3);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  v.bos_id = v.pad_id = add_special("<|endoftext|>");
  add_special("<|im_start|>");
  v.eos_id = add_special("<|im_end|>");
  return v;
}

}  // namespace ft::testgen
