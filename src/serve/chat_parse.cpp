#include "serve/chat_parse.h"

#include "core/error.h"

namespace ft::serve {

ChatFormat detect_chat_format(const std::string&) { fail("detect_chat_format: not implemented yet"); }

ChatParse parse_chat_output(const std::string&, ChatFormat, bool) { fail("parse_chat_output: not implemented yet"); }

ChatStreamParser::ChatStreamParser(ChatFormat f, bool starts_in_reasoning)
    : format_(f), state_(starts_in_reasoning ? State::REASONING : State::CONTENT) {}

std::vector<ChatDelta> ChatStreamParser::feed(const std::string&) { fail("ChatStreamParser: not implemented yet"); }
std::vector<ChatDelta> ChatStreamParser::finish() { fail("ChatStreamParser: not implemented yet"); }
void ChatStreamParser::step(std::vector<ChatDelta>&, bool) {}

}  // namespace ft::serve
