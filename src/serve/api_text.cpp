#include "serve/api_text.h"

#include <algorithm>

namespace ft::serve {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stops) : dec_(tok) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string TextStream::feed(int32_t id) {
  if (stopped_) return "";
  pending_ += dec_.feed(id);
  return release();
}

std::string TextStream::finish() {
  if (stopped_) return "";
  pending_ += dec_.flush();
  // A stop string may complete only with the flushed bytes.
  std::string out = release();
  if (stopped_) return out;
  out += pending_;
  pending_.clear();
  return out;
}

std::string TextStream::release() {
  // The earliest stop string wins (and the longest at that position).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > stop_word_.size())) {
      best = at;
      stop_word_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is the start of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k)
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && c != 0xC0 && c != 0xC1 && c <= 0xF4;  // no overlong 2-byte forms
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace ft::serve
