// Unit tests of the Jinja engine's pieces: expressions, whitespace control, loops,
// scoping, macros, filters, methods, tests, and errors with template positions.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/jinja/template.h"

#include <string>

namespace {

using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const ojson& ctx = ojson::object(), const ft::jinja::Limits& lim = {}) {
  return ft::jinja::Template(src).render(ctx, lim);
}

// The error message of rendering src, or "" when it renders.
std::string error_of(const std::string& src, const ojson& ctx = ojson::object(), const ft::jinja::Limits& lim = {}) {
  try {
    render(src, ctx, lim);
  } catch (const ft::Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaEngine, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}"), "7|9|3|3.5|1024");
  EXPECT_EQ(render("{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 1.5 + 1 }}|{{ 2.0 * 2 }}|{{ -(3) }}"), "-1|1|2.5|4.0|-3");
  EXPECT_EQ(render("{{ 10 - 2 - 3 }}|{{ 0.1 + 0.2 }}|{{ 3 if false else 1.0 }}"), "5|0.30000000000000004|1.0");
}

TEST(JinjaEngine, LiteralsPrintLikeHuggingFace) {
  EXPECT_EQ(render("{{ true }} {{ false }} {{ none }}|{{ [1, 'x', none, true] }}|{{ {'a': 1, 'b': [2]} }}"),
            "true false |[1, \"x\", null, true]|{\"a\": 1, \"b\": [2]}");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ \"c\\n\" }}{{ '\\x41\\u00e9' }}"), "abc\nA\xc3\xa9");
  EXPECT_EQ(render("{{ x }}|{{ x.y.z }}|{{ none.y }}", {{"x", nullptr}}), "||");
}

TEST(JinjaEngine, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 1 == 1.0 }}{{ 1 != 2 }}{{ none == undefined_name }}"),
            "truefalsetruetruetruetrue");
  EXPECT_EQ(render("{{ 'b' in 'abc' }}{{ 'k' in {'k': 1} }}{{ 3 not in [1, 2] }}{{ 2 in [1, 2] }}{{ 'x' in nothing }}"),
            "truetruetruetruefalse");
  EXPECT_EQ(render("{{ 0 or 'y' }}|{{ 1 and 'z' }}|{{ [] or 'e' }}|{{ not [] }}|{{ not not 'a' }}"), "y|z|e|true|true");
  EXPECT_EQ(render("{{ 'a' if 1 > 2 else 'b' }}|{{ 'c' if false }}|{{ 'd' if true }}"), "b||d");
}

TEST(JinjaEngine, IndexingAndSlicing) {
  const ojson ctx = {{"xs", {1, 2, 3, 4}}, {"s", "h\xc3\xa9llo"}, {"d", {{"k", "v"}}}};
  EXPECT_EQ(render("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:3] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[9] }}", ctx),
            "14[2, 3][4, 3, 2, 1][1, 3]");
  EXPECT_EQ(render("{{ s[1] }}|{{ s[::-1] }}|{{ s[1:3] }}|{{ d.k }}{{ d['k'] }}|{{ d.missing }}", ctx),
            "\xc3\xa9|oll\xc3\xa9h|\xc3\xa9l|vv|");
}

TEST(JinjaEngine, WhitespaceControlAndHfPreprocessing) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a  {{- 'x' -}}  b {#- note -#}  c"), "axbc");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: blanks before one.
  EXPECT_EQ(render("{% if true %}\nx\n    {% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("  {{ 'k' }}\n"), "  k");  // expressions keep their indentation; final newline dropped
  EXPECT_EQ(render("{# c #}\nz"), "z");
  EXPECT_EQ(render("a{% generation %} b {% endgeneration %}c"), "a b c");
}

TEST(JinjaEngine, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.length }}{{ 'F' if loop.first }}{{ 'L' if loop.last }}"
                   "{{ loop.previtem or '-' }}{{ loop.nextitem or '-' }};{% endfor %}"),
            "10323F-b;21213ac;32103Lb-;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{% endfor %}"), "13579");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
                   {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1,a=2,ba");
  EXPECT_EQ(render("{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}|{{ range(2) }}"), "321|[0, 1]");
}

TEST(JinjaEngine, ScopingAndNamespace) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "21");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% if true %}{% set y = 'in-if' %}{% endif %}{{ y }}"), "in-if");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}A{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[A2]");
}

TEST(JinjaEngine, MacrosAndCall) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy') }}"),
            "Hi Ann! Hi Bo? Hi Cy!");
  EXPECT_EQ(render("{% macro m() %}{{ kwargs.x }}{{ varargs }}{% endmacro %}{{ m(1, 2, x=3) }}"), "3[1, 2]");
  EXPECT_EQ(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(render("{% macro fact(n) %}{{ 1 if n <= 1 else n * (fact(n - 1) | int) }}{% endmacro %}{{ fact(5) }}"),
            "120");
  EXPECT_NE(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "");
}

TEST(JinjaEngine, Filters) {
  const ojson ctx = {{"o", {{"b", 1}, {"a", {1, "x"}}}}, {"s", "  pad  "}};
  EXPECT_EQ(render("{{ o | tojson }}|{{ o | tojson(indent=2) }}", ctx),
            "{\"b\": 1, \"a\": [1, \"x\"]}|{\n  \"b\": 1,\n  \"a\": [\n    1,\n    \"x\"\n  ]\n}");
  EXPECT_EQ(render("{{ o | tojson(separators=(',', ':'), sort_keys=true) }}|{{ '\xc3\xa9\"' | tojson(ensure_ascii=true) }}", ctx),
            "{\"a\":[1,\"x\"],\"b\":1}|\"\\u00e9\\\"\"");
  EXPECT_EQ(render("[{{ s | trim }}]{{ s | length }}{{ [1, 2] | length }}{{ o | length }}", ctx), "[pad]722");
  EXPECT_EQ(render("{{ ['a', 'b'] | join(', ') }}|{{ [1, 2] | join }}|{{ missing | default('d') }}|{{ '' | default('e', true) }}"),
            "a, b|12|d|e");
  EXPECT_EQ(render("{{ 'ab' | upper }}{{ 'CD' | lower }}{{ 'hello world' | title }}{{ 'x' | capitalize }}"),
            "ABcdHello WorldX");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'A': 2} | dictsort %}{{ k }}{% endfor %}|{{ [3, 1, 2] | sort }}|"
                   "{{ [1, 1, 2] | unique }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|{{ [1, 2] | reverse }}"),
            "Ab|[1, 2, 3]|[1, 2]|12|[2, 1]");
  const ojson people = {{"p", {{{"n", "a"}, {"on", true}}, {{"n", "b"}, {"on", false}}, {{"n", "c"}}}}};
  EXPECT_EQ(render("{{ p | selectattr('on') | map(attribute='n') | join }}|{{ p | rejectattr('on') | map(attribute='n') | join }}|"
                   "{{ p | selectattr('n', 'equalto', 'c') | length }}",
                   people),
            "a|bc|1");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'aXbX' | replace('X', '-') }}|{{ '42' | int + 1 }}|{{ '2.5' | float }}"),
            "a\n  b\n\n  c|a-b-|43|2.5");
  EXPECT_EQ(render("{% filter upper %}shout{% endfilter %}"), "SHOUT");
}

TEST(JinjaEngine, Methods) {
  EXPECT_EQ(render("[{{ '\\n x \\n'.strip() }}][{{ '\\nx\\n '.strip('\\n') }}][{{ 'xxy'.lstrip('x') }}][{{ 'yxx'.rstrip('x') }}]"),
            "[x][x\n ][y][y]");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}"),
            "[\"a\", \"b\", \"\", \"c\"][\"a\", \"b\"][\"a\", \"b,c\"]");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'aaa'.replace('a', 'b', 2) }}"),
            "truetruebba");
  EXPECT_EQ(render("{{ d.get('k') }}{{ d.get('no', 'dflt') }}{{ d.get('no') }}{{ d.keys() }}{{ d.values() }}{{ d.items() }}",
                   {{"d", {{"k", "v"}}}}),
            "vdflt[\"k\"][\"v\"][[\"k\", \"v\"]]");
  EXPECT_EQ(render("{{ 'abc'.length }}{{ [1, 2].length }}{{ 'ab'.upper() }}"), "32AB");
}

TEST(JinjaEngine, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is string }}{{ {} is mapping }}"
                   "{{ [] is sequence }}{{ 'a' is iterable }}{{ 1.5 is number }}{{ 1 is integer }}{{ true is boolean }}",
                   {{"x", 1}, {"n", nullptr}}),
            "truetruetruetruetruetruetruetruetruetrue");
  EXPECT_EQ(render("{{ false is false }}{{ 1 is true }}{{ 3 is odd }}{{ 4 is even }}{{ 2 is not odd }}{{ 'ab' is lower }}"),
            "truefalsetruetruetruetrue");
}

TEST(JinjaEngine, GlobalsAndContext) {
  const std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
  EXPECT_EQ(render("{{ True }}{{ False }}{{ None }}{{ messages[0].role }}", {{"messages", {{{"role", "user"}}}}}),
            "truefalseuser");
  // Key order of objects is kept (tool schemas print as the client sent them).
  EXPECT_EQ(render("{{ t | tojson }}", ojson::parse(R"({"t": {"z": 1, "a": 2}})")), "{\"z\": 1, \"a\": 2}");
}

TEST(JinjaEngine, ErrorsNameTheTemplatePosition) {
  std::string e = error_of("line one\n  {{ raise_exception('Bad role: ' ~ r) }}", {{"r", "robot"}});
  EXPECT_NE(e.find("line 2, column 6"), std::string::npos) << e;
  EXPECT_NE(e.find("Bad role: robot"), std::string::npos) << e;
  e = error_of("{% if x %}\nunclosed");
  EXPECT_NE(e.find("syntax error"), std::string::npos) << e;
  EXPECT_NE(e.find("endif"), std::string::npos) << e;
  e = error_of("ok\n{{ 1 + }}");
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  e = error_of("{% frobnicate %}");
  EXPECT_NE(e.find("unknown statement 'frobnicate'"), std::string::npos) << e;
  EXPECT_NE(error_of("{{ 'unterminated }}"), "");
  EXPECT_NE(error_of("{{ x | nosuchfilter }}", {{"x", "s"}}).find("nosuchfilter"), std::string::npos);
  e = error_of("a\nb {{ 1 ~ none }}");
  EXPECT_NE(e.find("line 2, column"), std::string::npos) << e;
  EXPECT_NE(error_of("{{ x is frob }}"), "");
  EXPECT_NE(error_of("{% for x in 5 %}{% endfor %}"), "");
  EXPECT_NE(error_of("{% set x.y = 1 %}", {{"x", {{"y", 0}}}}), "");  // only namespaces take attributes
}

TEST(JinjaEngine, LimitsStopRunawayTemplates) {
  ft::jinja::Limits lim;
  lim.max_loop_iterations = 10'000;
  lim.max_string_bytes = 1 << 20;
  EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {}, lim)
                .find("loop iterations"),
            std::string::npos);
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nest deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000) }}").find("range"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='xy') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", {}, lim)
                .find("limit"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nests deeper"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(3000, '[')).size(), 1u);  // plain text: renders as is
  EXPECT_EQ(render(std::string(3000, '[')), std::string(3000, '['));
}

}  // namespace
