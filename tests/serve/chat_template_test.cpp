// render_chat's own work around the engine: the variables it passes, the message
// normalization, its error messages, and that the nlohmann::json overload agrees.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/chat_template.h"

namespace {

using ojson = nlohmann::ordered_json;

TEST(ChatTemplate, PassesTheStandardVariablesAndExtras) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ tools is none }}{{ add_generation_prompt }}{{ enable_thinking }}{{ eos_token }}";
  EXPECT_EQ(ft::serve::render_chat(tmpl, ojson::parse(R"([{"role": "user", "content": "hi"}])"), ojson(), true, "<s>",
                                   "</s>", ojson{{"enable_thinking", false}}),
            "<s>[user:hi]truetruefalse</s>");
  // The nlohmann::json overload renders the same (keys sorted, which this template
  // does not show).
  EXPECT_EQ(ft::serve::render_chat(tmpl, nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])"),
                                   nlohmann::json(), false, "", "", nlohmann::json::object()),
            "[user:hi]truefalse");
}

TEST(ChatTemplate, NormalizesOpenAiStyleMessages) {
  const ojson in = ojson::parse(R"json([
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [true]}"}},
      {"type": "function", "function": {"name": "g", "arguments": "not json"}}]},
    {"role": "tool"}])json");
  const ojson out = ft::serve::normalize_chat_messages(in);
  EXPECT_EQ(out[0]["content"], "");
  EXPECT_EQ(out[0]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":[true]})");
  EXPECT_EQ(out[0]["tool_calls"][1]["function"]["arguments"], "not json");  // left as the client sent it
  EXPECT_EQ(out[1]["content"], "");
  // Templates see the parsed arguments.
  EXPECT_EQ(ft::serve::render_chat("{{ messages[0].tool_calls[0].function.arguments | tojson }}", in, ojson(), false,
                                   "", "", ojson::object()),
            R"({"b": 1, "a": [true]})");
}

TEST(ChatTemplate, ErrorsSayWhatIsWrong) {
  auto error_of = [](auto&& fn) {
    try {
      fn();
    } catch (const ft::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const ojson msgs = ojson::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_NE(error_of([&] { ft::serve::render_chat("x", ojson::object(), ojson(), false, "", "", ojson()); })
                .find("messages must be an array"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ft::serve::render_chat("x", msgs, ojson::object(), false, "", "", ojson()); })
                .find("tools must be an array or null"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ft::serve::render_chat("x", ojson::array({1}), ojson(), false, "", "", ojson()); })
                .find("must be an object"),
            std::string::npos);
  const std::string e = error_of([&] {
    ft::serve::render_chat("{% if messages[0].role != 'system' %}\n  {{ raise_exception('need a system prompt') }}{% endif %}",
                           msgs, ojson(), false, "", "", ojson());
  });
  EXPECT_NE(e.find("line 2, column 6"), std::string::npos) << e;
  EXPECT_NE(e.find("need a system prompt"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { ft::serve::render_chat("{% for %}", msgs, ojson(), false, "", "", ojson()); })
                .find("syntax error at line 1"),
            std::string::npos);
}

}  // namespace
