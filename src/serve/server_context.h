// What the endpoint handlers (api_*.cpp) share once the model is loaded.
#pragma once

#include <cstdint>
#include <string>

#include "serve/chat_parse.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace ft {
class Tokenizer;
}

namespace ft::serve {

struct ServerContext {
  Scheduler* sched = nullptr;
  const Tokenizer* tok = nullptr;  // null when the GGUF has no usable vocabulary
  Metrics* metrics = nullptr;
  std::string model_id;             // what /v1/models lists and requests may name
  int64_t created = 0;              // unix time the server became ready
  std::string chat_template;        // tokenizer.chat_template, or the ChatML fallback
  ChatFormat chat_format = ChatFormat::CONTENT_ONLY;
  std::string bos_text, eos_text;   // the special tokens' texts, for the template

  // The tokenizer, or a 400 saying this model has none (only token-id prompts work).
  const Tokenizer& need_tok(const char* param) const;
};

}  // namespace ft::serve
