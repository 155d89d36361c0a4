#include "serve/chat_parse.h"

#include <algorithm>

namespace ft::serve {

namespace {

using ojson = nlohmann::ordered_json;

struct Tags {
  const char* think_open;
  const char* think_close;
  const char* tool_open;  // nullptr: the format has no tool calls
  const char* tool_close;
};

Tags tags_of(ChatFormat f) {
  switch (f) {
    case ChatFormat::GEMMA4: return {"<|channel>thought", "<channel|>", "<|tool_call>", "<tool_call|>"};
    case ChatFormat::QWEN: return {"<think>", "</think>", "<tool_call>", "</tool_call>"};
    case ChatFormat::CONTENT_ONLY: break;
  }
  return {"<think>", "</think>", nullptr, nullptr};
}

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Length of the longest suffix of s that is a proper prefix of tag: text that may
// still become the tag when the next delta arrives.
size_t partial_tag_suffix(const std::string& s, const char* tag) {
  const std::string t = tag;
  for (size_t len = std::min(s.size(), t.size() - 1); len > 0; --len)
    if (s.compare(s.size() - len, len, t, 0, len) == 0) return len;
  return 0;
}

// A call's arguments as JSON text. A model's bytes need not be UTF-8 (a byte-fallback token, a character cut
// by the token limit): those become U+FFFD, as in every JSON the server sends (sse.h dump_json), where a plain
// dump() throws json's type_error.316 out of the parser -- a 500, or a stream cut short.
std::string dump_args(const ojson& a) { return a.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// ---- Qwen: <tool_call>{"name": .., "arguments": {..}}</tool_call>, or Qwen3.5's
// <tool_call><function=NAME><parameter=K>\nV\n</parameter></function></tool_call>
bool parse_qwen_call(const std::string& body_in, std::string& name, std::string& args) {
  const std::string body = trim(body_in);
  if (!body.empty() && body[0] == '{') {
    auto j = ojson::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    name = j["name"].get<std::string>();
    const ojson a = j.contains("arguments") ? j["arguments"] : j.value("parameters", ojson::object());
    if (a.is_string()) {
      args = a.get<std::string>();
    } else {
      if (!a.is_object()) return false;
      args = dump_args(a);
    }
    return true;
  }
  const std::string fopen = "<function=";
  if (body.compare(0, fopen.size(), fopen) != 0) return false;
  const size_t name_end = body.find('>', fopen.size());
  if (name_end == std::string::npos) return false;
  name = trim(body.substr(fopen.size(), name_end - fopen.size()));
  if (name.empty()) return false;
  ojson a = ojson::object();
  size_t pos = name_end + 1;
  for (;;) {
    const size_t p = body.find("<parameter=", pos);
    if (p == std::string::npos) break;
    const size_t k_end = body.find('>', p);
    if (k_end == std::string::npos) return false;
    const std::string key = trim(body.substr(p + 11, k_end - p - 11));
    const size_t v_end = body.find("</parameter>", k_end);
    if (v_end == std::string::npos) return false;
    std::string value = body.substr(k_end + 1, v_end - k_end - 1);
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    // The template prints objects and lists as JSON and scalars as text: numbers,
    // booleans and JSON values come back typed, anything else is a string.
    auto parsed = ojson::parse(value, nullptr, false);
    a[key] = parsed.is_discarded() ? ojson(value) : parsed;
    pos = v_end + 12;
  }
  if (body.find("</function>", name_end) == std::string::npos) return false;
  args = dump_args(a);
  return true;
}

// ---- Gemma 4: call:NAME{key:value,...} with strings quoted as <|"|>...<|"|>
class GemmaArgs {
 public:
  explicit GemmaArgs(const std::string& s) : s_(s) {}
  bool value(ojson& out, int depth = 0) {
    if (depth > 64) return false;
    skip_ws();
    if (at(kQuote)) {
      const size_t end = s_.find(kQuote, p_ + kQuote.size());
      if (end == std::string::npos) return false;
      out = s_.substr(p_ + kQuote.size(), end - p_ - kQuote.size());
      p_ = end + kQuote.size();
      return true;
    }
    if (p_ < s_.size() && s_[p_] == '{') {
      ++p_;
      out = ojson::object();
      return members(out, '}', depth);
    }
    if (p_ < s_.size() && s_[p_] == '[') {
      ++p_;
      out = ojson::array();
      skip_ws();
      if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
      for (;;) {
        ojson item;
        if (!value(item, depth + 1)) return false;
        out.push_back(std::move(item));
        skip_ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
        return false;
      }
    }
    const size_t start = p_;
    while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']') ++p_;
    const std::string raw = trim(s_.substr(start, p_ - start));
    if (raw.empty()) return false;
    auto parsed = ojson::parse(raw, nullptr, false);
    out = parsed.is_discarded() ? ojson(raw) : parsed;
    return true;
  }
  // key:value pairs up to `close`; p_ is just after the opening brace.
  bool members(ojson& obj, char close, int depth) {
    skip_ws();
    if (p_ < s_.size() && s_[p_] == close) return ++p_, true;
    for (;;) {
      skip_ws();
      std::string key;
      if (at(kQuote)) {
        ojson k;
        if (!value(k, depth + 1)) return false;
        key = k.get<std::string>();
      } else {
        const size_t start = p_;
        while (p_ < s_.size() && s_[p_] != ':') ++p_;
        key = trim(s_.substr(start, p_ - start));
      }
      skip_ws();
      if (p_ >= s_.size() || s_[p_] != ':' || key.empty()) return false;
      ++p_;
      ojson v;
      if (!value(v, depth + 1)) return false;
      obj[key] = std::move(v);
      skip_ws();
      if (p_ < s_.size() && s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < s_.size() && s_[p_] == close) return ++p_, true;
      return false;
    }
  }
  bool done() {
    skip_ws();
    return p_ == s_.size();
  }
  size_t p_ = 0;

 private:
  bool at(const std::string& t) const { return s_.compare(p_, t.size(), t) == 0; }
  void skip_ws() {
    while (p_ < s_.size() && is_ws(s_[p_])) ++p_;
  }
  const std::string kQuote = "<|\"|>";
  const std::string& s_;
};

bool parse_gemma_call(const std::string& body_in, std::string& name, std::string& args) {
  const std::string body = trim(body_in);
  if (body.compare(0, 5, "call:") != 0) return false;
  const size_t brace = body.find('{');
  if (brace == std::string::npos) return false;
  name = trim(body.substr(5, brace - 5));
  if (name.empty()) return false;
  GemmaArgs parser(body);
  parser.p_ = brace + 1;
  ojson obj = ojson::object();
  if (!parser.members(obj, '}', 0) || !parser.done()) return false;
  args = dump_args(obj);
  return true;
}

}  // namespace

ChatFormat detect_chat_format(const std::string& tmpl) {
  if (tmpl.find("<|tool_call>") != std::string::npos || tmpl.find("<|turn>") != std::string::npos)
    return ChatFormat::GEMMA4;
  if (tmpl.find("<tool_call>") != std::string::npos) return ChatFormat::QWEN;
  return ChatFormat::CONTENT_ONLY;
}

bool prompt_opens_reasoning(const std::string& prompt, ChatFormat f) {
  const Tags t = tags_of(f);
  const size_t open = prompt.rfind(t.think_open);
  if (open == std::string::npos) return false;
  return prompt.find(t.think_close, open) == std::string::npos;
}

ChatStreamParser::ChatStreamParser(ChatFormat f, bool starts_in_reasoning)
    : format_(f), state_(starts_in_reasoning ? State::REASONING : State::CONTENT), skip_ws_(starts_in_reasoning) {}

std::vector<ChatDelta> ChatStreamParser::feed(const std::string& delta) {
  std::vector<ChatDelta> out;
  pending_ += delta;
  step(out, false);
  return out;
}

std::vector<ChatDelta> ChatStreamParser::finish() {
  std::vector<ChatDelta> out;
  step(out, true);
  return out;
}

// Emits text of the current segment (content or reasoning), holding back trailing
// whitespace until we know whether the segment goes on.
void ChatStreamParser::emit_text(std::vector<ChatDelta>& out, std::string text, bool at_segment_end) {
  if (skip_ws_) {
    size_t b = 0;
    while (b < text.size() && is_ws(text[b])) ++b;
    text.erase(0, b);
    if (text.empty()) return;
    skip_ws_ = false;
  }
  size_t e = text.size();
  while (e > 0 && is_ws(text[e - 1])) --e;
  if (e == 0) {
    held_ws_ += text;
  } else {
    ChatDelta d;
    d.kind = state_ == State::REASONING ? ChatDelta::Kind::REASONING : ChatDelta::Kind::CONTENT;
    d.text = held_ws_ + text.substr(0, e);
    held_ws_ = text.substr(e);
    out.push_back(std::move(d));
  }
  if (at_segment_end) held_ws_.clear();
}

void ChatStreamParser::step(std::vector<ChatDelta>& out, bool at_end) {
  const Tags t = tags_of(format_);
  for (;;) {
    if (state_ == State::TOOL_CALL) {
      const size_t close = pending_.find(t.tool_close);
      if (close == std::string::npos && !at_end) return;
      const std::string body = pending_.substr(0, close);
      std::string name, args;
      const bool ok = format_ == ChatFormat::GEMMA4 ? parse_gemma_call(body, name, args) : parse_qwen_call(body, name, args);
      const size_t consumed = close == std::string::npos ? pending_.size() : close + std::string(t.tool_close).size();
      if (ok) {
        ChatDelta d;
        d.kind = ChatDelta::Kind::TOOL_CALL;
        d.tool_index = n_tool_calls_++;
        d.tool_name = name;
        d.tool_arguments = args;
        out.push_back(std::move(d));
        skip_ws_ = true;
      } else {
        // Not a call we understand: the user sees the text as the model wrote it.
        state_ = State::CONTENT;
        emit_text(out, ws_before_tool_ + t.tool_open + pending_.substr(0, consumed), false);
      }
      ws_before_tool_.clear();
      pending_.erase(0, consumed);
      state_ = State::CONTENT;
      if (pending_.empty()) {
        if (at_end) emit_text(out, "", true);
        return;
      }
      continue;
    }

    // CONTENT or REASONING: look for the tag that ends or switches the segment.
    std::vector<const char*> wanted;
    if (state_ == State::CONTENT) {
      wanted.push_back(t.think_open);
      if (t.tool_open) wanted.push_back(t.tool_open);
    } else {
      wanted.push_back(t.think_close);
    }
    size_t best = std::string::npos;
    const char* hit = nullptr;
    for (const char* w : wanted) {
      const size_t p = pending_.find(w);
      if (p < best) {
        best = p;
        hit = w;
      }
    }
    if (hit) {
      const bool tool = hit == t.tool_open;
      emit_text(out, pending_.substr(0, best), !tool);
      if (tool) {  // whitespace before a call goes, unless the call turns out not to parse
        ws_before_tool_ = held_ws_;
        held_ws_.clear();
      }
      pending_.erase(0, best + std::string(hit).size());
      if (hit == t.think_open) {
        state_ = State::REASONING;
        skip_ws_ = true;
      } else if (hit == t.think_close) {
        state_ = State::CONTENT;
        skip_ws_ = true;
      } else {
        state_ = State::TOOL_CALL;
      }
      continue;
    }
    if (at_end) {
      // A reasoning block cut short keeps its text; trailing whitespace of the
      // final content is the model's and stays.
      const bool keep_ws = state_ == State::CONTENT;
      emit_text(out, pending_, false);
      pending_.clear();
      if (keep_ws && !held_ws_.empty()) {
        ChatDelta d;
        d.kind = ChatDelta::Kind::CONTENT;
        d.text = held_ws_;
        out.push_back(std::move(d));
      }
      held_ws_.clear();
      return;
    }
    size_t keep = 0;
    for (const char* w : wanted) keep = std::max(keep, partial_tag_suffix(pending_, w));
    emit_text(out, pending_.substr(0, pending_.size() - keep), false);
    pending_.erase(0, pending_.size() - keep);
    return;
  }
}

ChatParse parse_chat_output(const std::string& text, ChatFormat f, bool starts_in_reasoning) {
  ChatStreamParser p(f, starts_in_reasoning);
  std::vector<ChatDelta> deltas = p.feed(text);
  for (auto& d : p.finish()) deltas.push_back(std::move(d));
  ChatParse r;
  for (const auto& d : deltas) {
    switch (d.kind) {
      case ChatDelta::Kind::CONTENT: r.content += d.text; break;
      case ChatDelta::Kind::REASONING: r.reasoning += d.text; break;
      case ChatDelta::Kind::TOOL_CALL:
        r.tool_calls.push_back({{"name", d.tool_name}, {"arguments", d.tool_arguments}});
        break;
    }
  }
  return r;
}

}  // namespace ft::serve
