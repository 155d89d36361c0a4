// Generated token ids -> the text a response carries: whole UTF-8 characters only, and
// cut before the first stop string. Text that could still become a stop string is held
// back until the next tokens decide it, so a stream never shows part of a stop word.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ft::serve {

class TextStream {
 public:
  TextStream(const Tokenizer& tok, std::vector<std::string> stops);

  // Feeds one generated token and returns the text that may be sent now. Once a stop
  // string appeared, stopped() is true and later feeds return "".
  std::string feed(int32_t id);
  // At the end of the generation: the held-back text (unless stopped).
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& stop_word() const { return stop_word_; }

 private:
  std::string release();

  Tokenizer::StreamDecoder dec_;
  std::vector<std::string> stops_;
  std::string pending_;  // decoded, not yet sent
  bool stopped_ = false;
  std::string stop_word_;
};

// `s` with each byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD
// (a single token may be a lone byte of a multi-byte character).
std::string valid_utf8(const std::string& s);

}  // namespace ft::serve
