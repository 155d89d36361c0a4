#include "serve/api_generation.h"

#include "serve/api_error.h"

namespace ft::serve {

Generation::Generation(std::shared_ptr<Job> job, const Tokenizer* tok, std::vector<std::string> stops)
    : job_(std::move(job)) {
  if (tok) text_stream_ = std::make_unique<TextStream>(*tok, std::move(stops));
}

Generation::~Generation() {
  if (!finished_) job_->cancel();
}

void Generation::cancel() {
  cancelled_ = true;
  job_->cancel();
}

const std::string& Generation::stop_word() const {
  static const std::string none;
  return text_stream_ && text_stream_->stopped() ? text_stream_->stop_word() : none;
}

bool Generation::next(Piece& p) {
  p = Piece{};
  while (!finished_) {
    JobEvent ev;
    if (!job_->next(ev)) {
      finished_ = true;
      return false;
    }
    const bool word_stopped = text_stream_ && text_stream_->stopped();
    if (ev.done) {
      finished_ = true;
      if (ev.finish == Finish::kError) throw ApiError(500, "generation failed: " + ev.error);
      p.done = true;
      if (word_stopped) {
        stop_ = StopKind::kWord;
      } else {
        if (text_stream_) p.text = text_stream_->finish();
        if (text_stream_ && text_stream_->stopped())
          stop_ = StopKind::kWord;
        else if (ev.finish == Finish::kEog)
          stop_ = StopKind::kEos;
        else if (ev.finish == Finish::kLength)
          stop_ = StopKind::kLimit;
      }
      text_ += p.text;
      return true;
    }
    // Tokens the worker made before it saw the stop-string cancel are not part of the reply.
    if (word_stopped) continue;
    tokens_.push_back(ev.token);
    p.token = ev.token;
    p.logprob = ev.logprob;
    p.top = std::move(ev.top);
    if (text_stream_) {
      p.text = text_stream_->feed(ev.token);
      if (text_stream_->stopped()) job_->halt();
    }
    text_ += p.text;
    return true;
  }
  return false;
}

const char* stop_kind_name(StopKind k) {
  switch (k) {
    case StopKind::kNone: return "none";
    case StopKind::kEos: return "eos";
    case StopKind::kWord: return "word";
    case StopKind::kLimit: return "limit";
  }
  return "none";
}

}  // namespace ft::serve
