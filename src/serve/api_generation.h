// One generation as an endpoint sees it: the job's token events turned into text deltas
// (through TextStream: stop strings, whole characters), with the tokens, the finish reason
// and the counts a response reports. Shared by every completion-style endpoint, streaming
// or not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/api_text.h"
#include "serve/scheduler.h"

namespace ft::serve {

struct Piece {
  bool done = false;        // the last piece (text may still be non-empty)
  int32_t token = -1;       // !done
  std::string text;         // text to send now (may be empty while held back)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

enum class StopKind { kNone, kEos, kWord, kLimit };

class Generation {
 public:
  Generation(std::shared_ptr<Job> job, const Tokenizer* tok, std::vector<std::string> stops);
  ~Generation();  // cancels the job if it is still running (the handler gave up)

  // Blocks for the next piece. Returns false once the done piece was returned. Throws a
  // 500 ApiError when the engine failed.
  bool next(Piece& p);
  // Cancels the job: the client went away.
  void cancel();

  StopKind stop_kind() const { return stop_; }
  const std::string& stop_word() const;
  // OpenAI's finish_reason: "stop" (end of generation or a stop string) or "length".
  const char* finish_reason() const { return stop_ == StopKind::kLimit ? "length" : "stop"; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::string& text() const { return text_; }
  JobStats stats() const { return job_->stats(); }
  int64_t n_generated() const { return static_cast<int64_t>(tokens_.size()); }
  bool cancelled() const { return cancelled_; }

 private:
  std::shared_ptr<Job> job_;
  std::unique_ptr<TextStream> text_stream_;  // null without a tokenizer
  std::vector<int32_t> tokens_;
  std::string text_;
  StopKind stop_ = StopKind::kNone;
  bool finished_ = false;
  bool cancelled_ = false;
};

const char* stop_kind_name(StopKind k);  // llama-server's stop_type: none, eos, word, limit

}  // namespace ft::serve
