// Tokenizer parity with llama.cpp's own tokenizer (C API, vocab_only) on the four
// target vocabularies: an extra corpus (ASCII, accents, CJK, emoji, code, digits,
// whitespace runs, malformed UTF-8, special tokens inside text), a sweep over
// every code point up to U+31FFF in letter/digit/space contexts (checks our
// category table against llama.cpp's), per-token pieces, attributes, the EOG set
// and whole-sequence detokenisation.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "ggml-backend.h"
#include "llama.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ft {
namespace {

const char* const kVocabs[] = {"llama-bpe", "qwen2", "qwen35", "gemma-4"};

std::string vocab_path(const std::string& name) {
  return std::string(FT_LLAMA_DIR) + "/models/ggml-vocab-" + name + ".gguf";
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

struct LlamaVocab {
  llama_model* model = nullptr;
  const llama_vocab* vocab = nullptr;
  explicit LlamaVocab(const std::string& path) {
    static const bool init = [] {
      llama_log_set(quiet_log, nullptr);
      ggml_backend_load_all_from_path(FT_LLAMA_LIB_DIR);
      llama_backend_init();
      return true;
    }();
    (void)init;
    auto mp = llama_model_default_params();
    mp.vocab_only = true;
    model = llama_model_load_from_file(path.c_str(), mp);
    if (model) vocab = llama_model_get_vocab(model);
  }
  ~LlamaVocab() {
    if (model) llama_model_free(model);
  }
  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) const {
    std::vector<llama_token> out(text.size() + 8);
    int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                           static_cast<int32_t>(out.size()), add_special, parse_special);
    if (n < 0) {
      out.resize(static_cast<size_t>(-n));
      n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), out.data(),
                         static_cast<int32_t>(out.size()), add_special, parse_special);
    }
    out.resize(static_cast<size_t>(n));
    return {out.begin(), out.end()};
  }
  std::string piece(int32_t id, bool special) const {
    char buf[512];
    const int n = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, special);
    if (n < 0) {
      std::string big(static_cast<size_t>(-n), '\0');
      llama_token_to_piece(vocab, id, big.data(), -n, 0, special);
      return big;
    }
    return std::string(buf, static_cast<size_t>(n));
  }
  std::string detokenize(const std::vector<int32_t>& ids, bool special) const {
    std::string out(ids.size() * 16 + 64, '\0');
    int n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), out.data(),
                             static_cast<int32_t>(out.size()), false, special);
    if (n < 0) {
      out.assign(static_cast<size_t>(-n), '\0');
      n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), out.data(),
                           static_cast<int32_t>(out.size()), false, special);
    }
    out.resize(static_cast<size_t>(n));
    return out;
  }
};

std::string cp(uint32_t c) {
  std::string s;
  tok::append_utf8(s, c);
  return s;
}

// Hand-picked texts covering each alternative of the pre-tokenizer patterns.
std::vector<std::string> base_corpus() {
  return {
      "",
      " ",
      "  ",
      "\t",
      "\n",
      "\n\n\n",
      " \n \n  \n",
      "Hello world",
      " Hello world",
      "Hello  world   and    more     spaces",
      "trailing spaces   ",
      "   leading spaces",
      "tabs\tand\t\ttabs\t",
      "windows\r\nline\r\n\r\nendings\r",
      "I'm sure they're here, we've seen what he'll do and she'd say it's fine. Don't!",
      "I'M SURE THEY'RE HERE, WE'VE SEEN IT'S 'LL 'D 'T",
      "'s 't 're 've 'm 'll 'd ' 'x '",
      "Hello , world ! How are you ? Fine . Thanks , ok",
      "He said ' hello ' and ' ' ' then 's 'm 're 've 'll 't 'd",
      "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 -42 +7 1e10 0x1F",
      "٠١٢٣٤٥٦٧٨٩ ①②③ ¼½¾ Ⅻ 𝟘𝟙𝟚",
      "café naïve résumé Zürich São Paulo Ærøskøbing Łódź İstanbul",
      "e\u0301 a\u0300\u0301\u0302 n\u0303 Z\u0351\u0352 \u0301\u0302 start mark",
      "中文测试，这是一个句子。日本語のテキストです。한국어 텍스트입니다.",
      "𠀀𠀁 𪚥 𰀀 \xF0\xAE\xAF\xA0",
      "Ελληνικά Русский текст עברית العربية हिन्दी भाषा ภาษาไทย ქართული",
      "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ ✨ 🧌 🫠 🪿",
      "math ∑∫∂√∞ ≤≥≠ → ← ↔ ⇒ ∀x∃y",
      "quotes “double” ‘single’ «guillemets» „low“ — dash – en … ellipsis",
      "int main() { return a[i] += b->c * 2; } // comment\n",
      "def f(x):\n    if x:\n        return [y**2 for y in x]\n    return None\n",
      "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>",
      "$var = @array; %hash; #hash ^caret `backtick` ~tilde |pipe| \\backslash",
      "https://example.com/path?query=1&b=2#frag user@mail.org",
      "!!! ??? ... ,,, ;;; ::: --- ___ +++ === *** ### $$$ %%% ^^^ &&& ||| ~~~",
      "a\u00A0b\u2003c\u3000d\u2028e\u2029f\xC2\x85g\x0Bh\x0Ci\x1Cj\u200Bk",
      "   \u3000\u3000  x",
      "\xE2\x96\x81 literal lower block \xE2\x96\x81\xE2\x96\x81x",
      "<0x41> <0x0A> looks like a byte token",
      std::string("nul\0byte", 8),
      "\x01\x02\x1F\x7F control chars",
      "\xEF\xBF\xBD replacement char",
      "stray \x80 continuation, truncated \xE2\x82 and \xF0\x9F\x98 seq",
      "overlong \xC0\x80 \xC1\xBF and surrogate \xED\xA0\x80 bad lead \xF8\x88 \xFF\xFE",
      "end with truncated \xE2",
      "unassigned \xCD\xB8 private \xEE\x80\x80 noncharacter \xEF\xBF\xBF plane15 \xF3\xB0\x80\x80",
      "ideographic description \xE2\xBF\xBC\xE2\xBF\xBD \xE3\x87\xAF new in 15.1",
      std::string(300, 'a'),
      std::string(200, ' ') + "x",
      std::string(100, '\n') + "x" + std::string(7, '\n'),
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
      "Supercalifragilisticexpialidocious antidisestablishmentarianism",
  };
}

// Random strings over a mixed alphabet (fixed seed): stresses the splitters and
// merge order beyond the hand-picked cases.
std::vector<std::string> random_corpus(size_t count) {
  const std::vector<std::string> alphabet = {
      "a", "b", "e", "t", "s", "A", "Z", " ", " ", " ", "  ", "\t", "\n", "\r", "'", "'s", "'T", "0", "1", "7", "99",
      ".", ",", "!", "?", "-", "_", "(", ")", "{", "\"", "é", "ß", "ñ", "中", "文", "日", "한", "ж", "λ", "\u0301",
      "\u0308", "😀", "👍", "🏽", "\u200D", "\u00A0", "\u3000", "€", "∑", "٣", "²", "\xE2\x96\x81", "\x80", "\xC3",
      "<", ">", "|", "ing", "tion", " the", "Hello", "\n\n"};
  std::mt19937 rng(1234);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    const size_t len = 1 + rng() % 40;
    std::string s;
    for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    out.push_back(std::move(s));
  }
  return out;
}

// Every code point from U+0080 to U+31FFF (surrogates excepted) in contexts that
// show its category: "a{c}b" (letter or mark joins the word), "1{c}2" (digit),
// " {c}" (punctuation / space), "{c}{c}" runs. Chunks of 128 code points.
std::vector<std::string> codepoint_sweep() {
  std::vector<std::string> out;
  std::string s;
  int in_chunk = 0;
  for (uint32_t c = 0x80; c < 0x32000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string u = cp(c);
    s += "a" + u + "b 1" + u + "2 " + u + u + "'s" + u + "\n";
    if (++in_chunk == 128) {
      out.push_back(std::move(s));
      s.clear();
      in_chunk = 0;
    }
  }
  if (!s.empty()) out.push_back(std::move(s));
  return out;
}

// Texts with the vocabulary's special tokens embedded (every one, a few per text).
std::vector<std::string> special_corpus(const Tokenizer& tok) {
  std::vector<std::string> specials;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.token_attr(id) & (Tokenizer::kAttrControl | Tokenizer::kAttrUserDefined | Tokenizer::kAttrUnknown)) {
      specials.push_back(tok.token_text(id));
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < specials.size(); i += 3) {
    std::string s = "Hello" + specials[i] + "world ";
    if (i + 1 < specials.size()) s += specials[i + 1] + specials[i + 1] + " x";
    if (i + 2 < specials.size()) s += "\n" + specials[i + 2];
    out.push_back(std::move(s));
  }
  // Partial / overlapping spellings.
  out.push_back("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  out.push_back("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  out.push_back("<bos><start_of_turn>user\nHi<end_of_turn>\n<|turn>model\n<turn|><|channel>x<channel|>");
  out.push_back("<|im_end <|im_end|| <<|im_end|>> <|eot_id|<|eot_id|>");
  return out;
}

// Compares encode under the three flag combinations a server uses; returns mismatches.
int compare_encode_with(const Tokenizer& tok, const LlamaVocab& llama, const std::vector<std::string>& texts,
                        const std::string& what) {
  int bad = 0;
  for (const std::string& text : texts) {
    for (auto [add, parse] : {std::pair{false, false}, std::pair{true, true}, std::pair{true, false}}) {
      const auto want = llama.tokenize(text, add, parse);
      const auto got = tok.encode(text, add, parse);
      if (got != want && ++bad <= 5) {
        ADD_FAILURE() << what << " add_special=" << add << " parse_special=" << parse << " text "
                      << fmt::format("{:?}", text.substr(0, 200)) << "\n  got " << fmt::format("{}", got)
                      << "\n want " << fmt::format("{}", want);
      }
    }
  }
  return bad;
}

class TokenizerOracle : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string path = vocab_path(GetParam());
    if (!std::filesystem::exists(path)) {
      GTEST_FAIL() << path << " is missing: run scripts/setup-oracle.sh";
    }
    file_ = gguf::File::open(path);
    tok_ = Tokenizer::from_gguf(*file_);
    llama_ = std::make_unique<LlamaVocab>(path);
    ASSERT_NE(llama_->vocab, nullptr) << "llama.cpp failed to load " << path;
  }

  int compare_encode(const std::vector<std::string>& texts, const char* what) {
    return compare_encode_with(*tok_, *llama_, texts, fmt::format("{} {}", GetParam(), what));
  }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<LlamaVocab> llama_;
};

TEST_P(TokenizerOracle, BaseCorpus) { EXPECT_EQ(compare_encode(base_corpus(), "base"), 0); }

TEST_P(TokenizerOracle, RandomCorpus) { EXPECT_EQ(compare_encode(random_corpus(400), "random"), 0); }

TEST_P(TokenizerOracle, SpecialTokensInText) { EXPECT_EQ(compare_encode(special_corpus(*tok_), "special"), 0); }

TEST_P(TokenizerOracle, CodepointSweep) {
  int bad = 0;
  for (const std::string& text : codepoint_sweep()) {
    const auto want = llama_->tokenize(text, false, false);
    const auto got = tok_->encode(text, false, false);
    if (got != want && ++bad <= 3) {
      // Narrow down to the first differing code point for the message.
      size_t i = 0;
      while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
      std::string ctx;
      for (size_t k = i; k < std::min(i + 4, want.size()); ++k) ctx += llama_->piece(want[k], true);
      ADD_FAILURE() << GetParam() << ": sweep differs at token " << i << " near " << fmt::format("{:?}", ctx);
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST_P(TokenizerOracle, VocabularyMetadata) {
  const llama_vocab* v = llama_->vocab;
  ASSERT_EQ(tok_->n_vocab(), llama_vocab_n_tokens(v));
  EXPECT_EQ(tok_->bos_id(), llama_vocab_bos(v));
  EXPECT_EQ(tok_->eos_id(), llama_vocab_eos(v));
  EXPECT_EQ(tok_->eot_id(), llama_vocab_eot(v));
  EXPECT_EQ(tok_->nl_id(), llama_vocab_nl(v));
  EXPECT_EQ(tok_->pad_id(), llama_vocab_pad(v));
  EXPECT_EQ(tok_->sep_id(), llama_vocab_sep(v));
  EXPECT_EQ(tok_->mask_id(), llama_vocab_mask(v));
  EXPECT_EQ(tok_->fim_pre_id(), llama_vocab_fim_pre(v));
  EXPECT_EQ(tok_->fim_suf_id(), llama_vocab_fim_suf(v));
  EXPECT_EQ(tok_->fim_mid_id(), llama_vocab_fim_mid(v));
  EXPECT_EQ(tok_->fim_pad_id(), llama_vocab_fim_pad(v));
  EXPECT_EQ(tok_->fim_rep_id(), llama_vocab_fim_rep(v));
  EXPECT_EQ(tok_->fim_sep_id(), llama_vocab_fim_sep(v));
  EXPECT_EQ(tok_->add_bos(), llama_vocab_get_add_bos(v));
  EXPECT_EQ(tok_->add_eos(), llama_vocab_get_add_eos(v));
  int bad = 0;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    const bool ok = tok_->is_eog(id) == llama_vocab_is_eog(v, id) &&
                    tok_->token_attr(id) == (static_cast<uint32_t>(llama_vocab_get_attr(v, id)) & 0x3F) &&
                    tok_->token_text(id) == llama_vocab_get_text(v, id) &&
                    tok_->token_to_piece(id, false) == llama_->piece(id, false) &&
                    tok_->token_to_piece(id, true) == llama_->piece(id, true);
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << GetParam() << ": token " << id << " " << fmt::format("{:?}", tok_->token_text(id))
                    << " eog " << tok_->is_eog(id) << "/" << llama_vocab_is_eog(v, id) << " attr "
                    << tok_->token_attr(id) << "/" << llama_vocab_get_attr(v, id) << " piece "
                    << fmt::format("{:?}/{:?}", tok_->token_to_piece(id, true), llama_->piece(id, true));
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_FALSE(tok_->eog_ids().empty());
}

TEST_P(TokenizerOracle, Detokenize) {
  std::vector<std::string> texts = base_corpus();
  for (auto& s : random_corpus(200)) texts.push_back(std::move(s));
  for (auto& s : special_corpus(*tok_)) texts.push_back(std::move(s));
  int bad = 0;
  for (const std::string& text : texts) {
    const auto ids = llama_->tokenize(text, true, true);
    for (bool special : {false, true}) {
      const std::string want = llama_->detokenize(ids, special);
      const std::string got = tok_->decode(ids, special);
      if (got != want && ++bad <= 5) {
        ADD_FAILURE() << GetParam() << " special=" << special << " " << fmt::format("{:?}", text.substr(0, 120))
                      << "\n  got  " << fmt::format("{:?}", got) << "\n  want " << fmt::format("{:?}", want);
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// Pre types without a llama.cpp test vocabulary of their own (missing pre ->
// DEFAULT, "default", the llama3 alias "llama-v3", "megrez"), checked on the
// Qwen2 vocabulary re-written with that tokenizer.ggml.pre.
TEST(TokenizerOracleRewritten, OtherPreTypes) {
  const std::string src_path = vocab_path("qwen2");
  if (!std::filesystem::exists(src_path)) GTEST_FAIL() << src_path << " is missing: run scripts/setup-oracle.sh";
  const auto src = gguf::File::open(src_path);
  for (const std::string pre : {"", "default", "llama-v3", "megrez"}) {
    gguf::Writer w;
    for (const auto& [key, value] : src->metadata()) {
      if (key != "tokenizer.ggml.pre") w.set(key, value);
    }
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    const std::string path = std::string(FT_BINARY_DIR) + "/tokenizer_oracle_pre_" + (pre.empty() ? "none" : pre) + ".gguf";
    w.write(path);
    const auto file = gguf::File::open(path);
    const auto tok = Tokenizer::from_gguf(*file);
    const tok::PreType want_pre = pre == "llama-v3" ? tok::PreType::kLlama3
                                  : pre == "megrez"  ? tok::PreType::kQwen2
                                                     : tok::PreType::kDefault;
    EXPECT_EQ(tok->pre_type(), want_pre) << pre;
    const LlamaVocab llama(path);
    ASSERT_NE(llama.vocab, nullptr) << path;
    std::vector<std::string> texts = base_corpus();
    for (auto& t : random_corpus(300)) texts.push_back(std::move(t));
    EXPECT_EQ(compare_encode_with(*tok, llama, texts, "pre '" + pre + "'"), 0);
    int bad = 0;
    for (const std::string& text : texts) {
      const auto ids = llama.tokenize(text, true, true);
      bad += tok->decode(ids, false) != llama.detokenize(ids, false);
    }
    EXPECT_EQ(bad, 0) << "decode, pre '" << pre << "'";
    std::filesystem::remove(path);
  }
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerOracle, ::testing::ValuesIn(kVocabs), [](const auto& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
});

}  // namespace
}  // namespace ft
