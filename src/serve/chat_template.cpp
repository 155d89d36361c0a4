#include "serve/chat_template.h"

#include "core/error.h"

namespace ft::serve {

std::string render_chat(const std::string&, const nlohmann::json&, const nlohmann::json&, bool,
                        const std::string&, const std::string&, const nlohmann::json&) {
  fail("render_chat: not implemented yet");
}

}  // namespace ft::serve
