#include "testgen/gemma4_vocab.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>

#include "testgen/bpe_vocab.h"

namespace ft::testgen {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581

// UTF-8 characters of s, spaces escaped to '▁'.
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(c == ' ' ? kSpace : s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

Gemma4Vocab build_gemma4_vocab(int n_merges) {
  Gemma4Vocab v;
  std::set<std::string> seen;
  auto add = [&](const std::string& t, int32_t type) {
    if (seen.insert(t).second) {
      v.tokens.push_back(t);
      v.token_types.push_back(type);
    }
  };
  add("<pad>", 3);
  add("<eos>", 3);
  add("<bos>", 3);
  add("<unk>", 2);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 6);
  add("\n\n", 1);
  add("\n\n\n", 1);

  // Words: a '▁' starts a new one, newlines stand alone (merges never cross them).
  std::vector<std::vector<std::string>> words;
  for (const std::string& c : chars_of(bpe_training_text())) {
    add(c, 1);
    if (c == "\n" || words.empty() || c == kSpace || words.back().back() == "\n") words.emplace_back();
    words.back().push_back(c);
  }
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> count;
    for (const auto& w : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) ++count[{w[i], w[i + 1]}];
    std::pair<std::string, std::string> best;
    int best_n = 1;
    for (const auto& [p, n] : count)
      if (n > best_n) best = p, best_n = n;  // ties: the smallest pair (map order)
    if (best_n < 2) break;
    const std::string joined = best.first + best.second;
    v.merges.push_back(best.first + " " + best.second);
    add(joined, 1);
    for (auto& w : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) {
          out.push_back(joined);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      w = std::move(out);
    }
  }
  return v;
}

}  // namespace ft::testgen
