// Robustness: mutated real templates and random token soup must render or fail with
// ft::Error -- never crash, hang or throw anything else. Deterministic seeds; run
// under ASan by the asan preset.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/chat_template.h"
#include "serve/jinja/template.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace {

using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::filesystem::path(FT_SOURCE_DIR) / "tests/data/templates" / name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kPieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "{", "}", "'", "\"", "\\",
                         ",", ".", ":", "|", "=", "==", "*", "**", "//", "~", " if ", " else ", " for ", " in ",
                         " endfor ", " endif ", " set ", " macro ", " endmacro ", " not ", " is ", "loop", "ns.x",
                         "messages", "range(99999)", "caller()", "0", "-1", "1.5", "\n", " ", "\xff", "\xc3"};

// Renders; returns false (and records the failure) if anything but ft::Error escapes.
void render_or_error(const std::string& tmpl, const ojson& ctx, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  try {
    ft::jinja::Limits lim;
    lim.max_loop_iterations = 200'000;
    lim.max_string_bytes = 4 << 20;
    ft::jinja::Template(tmpl).render(ctx, lim);
  } catch (const ft::Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": unexpected exception: " << e.what() << "\n--- template ---\n" << tmpl;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 5.0) << what << ": took " << s << " s\n--- template ---\n" << tmpl;
}

TEST(JinjaFuzz, MutatedRealTemplatesRenderOrFailCleanly) {
  const ojson ctx = ft::serve::chat_template_context(
      ojson::parse(R"json([{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
          "function": {"name": "f", "arguments": "{\"a\": [1, {\"b\": null}]}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "ok"}])json"),
      ojson::parse(R"json([{"type": "function", "function": {"name": "f", "description": "d",
        "parameters": {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}}}}])json"),
      true, "<s>", "</s>", ojson{{"enable_thinking", true}});
  std::mt19937 rng(7);
  const char* files[] = {"Qwen-Qwen3-0.6B.jinja", "Qwen3.5-4B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                         "google-gemma-4-31B-it.jinja"};
  for (const char* file : files) {
    const std::string base = read_template(file);
    for (int trial = 0; trial < 60; ++trial) {
      std::string t = base;
      const int edits = 1 + int(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % (t.size() + 1);
        switch (rng() % 4) {
          case 0: t.erase(pos, rng() % 40); break;                                    // delete a run
          case 1: t.insert(pos, kPieces[rng() % std::size(kPieces)]); break;          // insert a token
          case 2: t.insert(pos, t.substr(rng() % t.size(), rng() % 200)); break;      // duplicate a slice
          case 3: if (pos < t.size()) t[pos] = char(rng() % 256); break;              // flip a byte
        }
      }
      render_or_error(t, ctx, std::string(file) + " mutant " + std::to_string(trial));
    }
  }
}

TEST(JinjaFuzz, RandomTokenSoupRendersOrFailsCleanly) {
  std::mt19937 rng(99);
  const ojson ctx = {{"messages", ojson::array({{{"role", "user"}, {"content", "x"}}})}, {"ns", {{"x", 1}}}};
  for (int trial = 0; trial < 400; ++trial) {
    std::string t;
    const int n = 1 + int(rng() % 40);
    for (int k = 0; k < n; ++k) t += kPieces[rng() % std::size(kPieces)];
    render_or_error(t, ctx, "soup " + std::to_string(trial));
  }
}

TEST(JinjaFuzz, HostileButValidTemplatesHitLimits) {
  const ojson ctx = ojson::object();
  // Each must stop with an error (a limit), not run away.
  for (const char* t : {
           "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
           "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
           "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
           "{% macro f() %}{% for i in range(10) %}{{ f() }}{% endfor %}{% endmacro %}{{ f() }}",
       }) {
    bool failed = false;
    try {
      ft::jinja::Limits lim;
      lim.max_loop_iterations = 50'000;
      lim.max_string_bytes = 4 << 20;
      ft::jinja::Template(t).render(ctx, lim);
    } catch (const ft::Error&) {
      failed = true;
    }
    EXPECT_TRUE(failed) << t;
  }
}

}  // namespace
