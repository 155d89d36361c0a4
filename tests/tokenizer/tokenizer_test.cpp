// Tokenizer loading rules and errors on small synthetic GGUFs, decode rules,
// the stream decoder and encode speed on the real vocabularies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "tokenizer/unicode.h"
#include "vocab_files.h"

namespace ft {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A byte-level vocabulary: ids 0..255 are the byte-map characters, then merges
// spelling "hello", then special tokens.
struct Synthetic {
  gguf::Writer w;
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;

  static std::vector<std::string> tokens() {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(tok::byte_to_unicode(static_cast<uint8_t>(b)));
    for (const char* s : {"he", "ll", "hell", "hello", "<|im_end|>", "<tool>", "<|endoftext|>", "Ġw"}) t.push_back(s);
    return t;
  }
  static constexpr int32_t kHello = 259, kImEnd = 260, kTool = 261, kEndOfText = 262, kSpaceW = 263;

  explicit Synthetic(const char* pre = "qwen2") {
    w.set_string("general.architecture", "qwen3");
    w.set_string("tokenizer.ggml.model", "gpt2");
    if (pre) w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", tokens());
    std::vector<int32_t> types(tokens().size(), 1);
    types[kImEnd] = 3;
    types[kTool] = 4;
    types[kEndOfText] = 3;
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {"h e", "l l", "he ll", "hell o", "Ġ w"});
    w.set_u32("tokenizer.ggml.eos_token_id", kEndOfText);
  }
  std::unique_ptr<Tokenizer> load() {
    bytes = w.to_bytes();
    file = gguf::File::from_memory(bytes.data(), bytes.size(), "synthetic.gguf");
    return Tokenizer::from_gguf(*file);
  }
  std::string error() {
    try {
      load();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST(TokenizerLoad, SyntheticBasics) {
  Synthetic s;
  const auto t = s.load();
  EXPECT_EQ(t->n_vocab(), 264);
  EXPECT_EQ(t->encode("hello", false, false), (std::vector<int32_t>{Synthetic::kHello}));
  EXPECT_EQ(t->encode("hello w", false, false), (std::vector<int32_t>{Synthetic::kHello, Synthetic::kSpaceW}));
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->bos_id(), 11);  // GPT-2 legacy default
  EXPECT_EQ(t->eos_id(), Synthetic::kEndOfText);
  EXPECT_TRUE(t->is_eog(Synthetic::kImEnd));
  EXPECT_TRUE(t->is_eog(Synthetic::kEndOfText));
  EXPECT_FALSE(t->is_eog(Synthetic::kHello));
  EXPECT_EQ(t->eot_id(), Synthetic::kImEnd);
  EXPECT_EQ(t->nl_id(), 10);  // the byte-map token of '\n' (Ċ)
  EXPECT_EQ(t->find_token("hell"), 258);
  EXPECT_EQ(t->find_token("nope"), Tokenizer::kNull);
  EXPECT_THAT([&] { t->token_text(264); }, ::testing::Throws<Error>());
}

TEST(TokenizerLoad, SpecialPartition) {
  Synthetic s;
  const auto t = s.load();
  const int32_t h = Synthetic::kHello;
  // parse_special: CONTROL text becomes the token.
  EXPECT_EQ(t->encode("hello<|im_end|>hello", false, true), (std::vector<int32_t>{h, Synthetic::kImEnd, h}));
  // Without it the CONTROL text is ordinary text, but USER_DEFINED tokens still match.
  const auto plain = t->encode("hello<|im_end|><tool>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), Synthetic::kImEnd), 0);
  EXPECT_EQ(plain.back(), Synthetic::kTool);
  EXPECT_EQ(plain.front(), h);
  // Pieces: CONTROL hidden unless special, USER_DEFINED always shown.
  EXPECT_EQ(t->token_to_piece(Synthetic::kImEnd, false), "");
  EXPECT_EQ(t->token_to_piece(Synthetic::kImEnd, true), "<|im_end|>");
  EXPECT_EQ(t->token_to_piece(Synthetic::kTool, false), "<tool>");
  EXPECT_EQ(t->token_to_piece(Synthetic::kSpaceW, false), " w");
}

TEST(TokenizerLoad, AddBosOverridesAndGemma4ForcesIt) {
  {
    Synthetic s;
    s.w.set_bool("tokenizer.ggml.add_bos_token", true);
    s.w.set_u32("tokenizer.ggml.bos_token_id", Synthetic::kImEnd);
    const auto t = s.load();
    EXPECT_TRUE(t->add_bos());
    EXPECT_EQ(t->encode("hello", true, false), (std::vector<int32_t>{Synthetic::kImEnd, Synthetic::kHello}));
    EXPECT_EQ(t->encode("hello", false, false), (std::vector<int32_t>{Synthetic::kHello}));
  }
  {
    Synthetic s("llama-bpe");
    s.w.set_bool("tokenizer.ggml.add_bos_token", false);
    EXPECT_FALSE(s.load()->add_bos());
  }
  {
    Synthetic s("gemma4");
    s.w.set_bool("tokenizer.ggml.add_bos_token", false);
    EXPECT_TRUE(s.load()->add_bos());
  }
  {
    Synthetic s;
    s.w.set_bool("tokenizer.ggml.add_eos_token", true);
    const auto t = s.load();
    EXPECT_EQ(t->encode("hello", true, false), (std::vector<int32_t>{Synthetic::kHello, Synthetic::kEndOfText}));
  }
}

// tokenizer.ggml.model "gpt2" with pre "gemma4" (what the project's generator
// may write) behaves like a Gemma-4 file: ▁ escaping, raw UTF-8, <0xXX> fallback,
// newline runs looked up whole, forced BOS.
TEST(TokenizerLoad, Gemma4PreOnGpt2Model) {
  std::vector<std::string> toks = {"<pad>", "<eos>", "<bos>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    toks.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  const int32_t base = static_cast<int32_t>(toks.size());
  for (const char* s : {"▁", "h", "i", "▁h", "▁hi", "hi", "\n", "\n\n\n", "<turn|>"}) {
    toks.push_back(s);
    types.push_back(1);
  }
  types.back() = 3;
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gemma4");
  w.set_string_array("tokenizer.ggml.tokens", toks);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {"▁ h", "▁h i", "h i"});
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "g4.gguf");
  const auto t = Tokenizer::from_gguf(*f);
  EXPECT_TRUE(t->add_bos());
  const int32_t hi = base + 4, nl3 = base + 7, turn_end = base + 8;
  const auto ids = t->encode(" hi\n\n\nx", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, hi, nl3, 3 + 'x'}));
  EXPECT_EQ(t->decode(ids, false), " hi\n\n\nx");
  EXPECT_EQ(t->decode(ids, true), "<bos> hi\n\n\nx");
  EXPECT_TRUE(t->is_eog(turn_end));
  EXPECT_TRUE(t->is_eog(1));
  EXPECT_EQ(t->nl_id(), base + 6);
}

TEST(TokenizerLoad, OutOfRangeSpecialIdKeepsDefault) {
  Synthetic s;
  s.w.set_u32("tokenizer.ggml.bos_token_id", 100000);
  EXPECT_EQ(s.load()->bos_id(), 11);
}

TEST(TokenizerLoad, ErrorsNameTheKey) {
  {
    Synthetic s;
    s.w = gguf::Writer();
    s.w.set_string("general.architecture", "qwen3");
    EXPECT_THAT(s.error(), HasSubstr("tokenizer.ggml.model"));
  }
  {
    Synthetic s;
    s.w.set_string("tokenizer.ggml.model", "llama");
    EXPECT_THAT(s.error(), AllOf(HasSubstr("tokenizer.ggml.model"), HasSubstr("llama")));
  }
  {
    Synthetic s("deepseek-llm");
    EXPECT_THAT(s.error(), AllOf(HasSubstr("tokenizer.ggml.pre"), HasSubstr("deepseek-llm")));
  }
  {
    Synthetic s;
    s.w.set_u32("tokenizer.ggml.model", 3);
    EXPECT_THAT(s.error(), HasSubstr("tokenizer.ggml.model"));
  }
  {
    Synthetic s;
    s.w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1});
    EXPECT_THAT(s.error(), HasSubstr("tokenizer.ggml.token_type"));
  }
  {
    Synthetic s;
    auto toks = Synthetic::tokens();
    toks[Synthetic::kImEnd] = "he";
    s.w.set_string_array("tokenizer.ggml.tokens", toks);
    EXPECT_THAT(s.error(), AllOf(HasSubstr("tokenizer.ggml.tokens"), HasSubstr("unique")));
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    const auto bytes = w.to_bytes();
    const auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "nomerges.gguf");
    try {
      Tokenizer::from_gguf(*f);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("tokenizer.ggml.merges"), HasSubstr("nomerges.gguf")));
    }
  }
}

TEST(TokenizerLoad, NoVocab) {
  gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  w.set_string("tokenizer.ggml.model", "none");
  w.set_u32("qwen3.vocab_size", 1000);
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "novocab.gguf");
  const auto t = Tokenizer::from_gguf(*f);
  EXPECT_EQ(t->n_vocab(), 1000);
  EXPECT_FALSE(t->can_encode());
  EXPECT_THAT([&] { t->encode("hi", true, true); }, ::testing::ThrowsMessage<Error>(HasSubstr("no vocabulary")));
  EXPECT_EQ(t->token_to_piece(5, false), "");
  EXPECT_EQ(t->token_to_piece(5, true), "<5>");
  EXPECT_EQ(t->decode({1, 2}, true), "<1><2>");
  EXPECT_EQ(t->decode({1, 2}, false), "");
  EXPECT_FALSE(t->is_eog(0));
  EXPECT_EQ(t->bos_id(), Tokenizer::kNull);
  EXPECT_THAT([&] { t->token_to_piece(1000, true); }, ::testing::Throws<Error>());
}

// clean_spaces: on for LLAMA3 (and GEMMA4), off for Qwen.
TEST(TokenizerDecode, CleanSpaces) {
  for (const char* name : {"llama-bpe", "qwen2"}) {
    if (!test::require_vocab(name)) return;
  }
  const std::string text = "Hello , world ! ok . it ' s I 'm we 're they 've x 't y 'd z 'll";
  const auto llama = test::load_vocab("llama-bpe");
  EXPECT_EQ(llama.tok->decode(llama.tok->encode(text, false, false), false),
            "Hello, world! ok. it's I'm we're they've x 't y 'd z 'll");
  const auto qwen = test::load_vocab("qwen2");
  EXPECT_EQ(qwen.tok->decode(qwen.tok->encode(text, false, false), false), text);
  // BOS/EOS stay in the ids; their text only shows with special.
  const auto ids = llama.tok->encode("Hi", true, false);
  ASSERT_EQ(ids.front(), llama.tok->bos_id());
  EXPECT_EQ(llama.tok->decode(ids, false), "Hi");
  EXPECT_EQ(llama.tok->decode(ids, true), "<|begin_of_text|>Hi");
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Emoji and rare characters are cut across byte-level / byte-fallback tokens;
// every chunk the stream decoder returns must still be whole characters.
TEST(StreamDecoder, HoldsBackSplitCharacters) {
  const std::string text = "Troll 🧌, melting 🫠 goose 🪿 family 👨‍👩‍👧‍👦 flag 🇫🇷 rare 𰻞𰻞 \xF0\x9F\xAB\xA9 done";
  for (const char* name : test::kVocabNames) {
    if (!test::require_vocab(name)) return;
    const auto v = test::load_vocab(name);
    const auto ids = v.tok->encode(text, false, false);
    int partial_pieces = 0;
    for (int32_t id : ids) partial_pieces += !valid_utf8(v.tok->token_to_piece(id, false));
    EXPECT_GT(partial_pieces, 0) << name << ": the text no longer splits a character; pick rarer ones";
    Tokenizer::StreamDecoder dec(*v.tok);
    std::string joined;
    for (int32_t id : ids) {
      const std::string chunk = dec.feed(id);
      EXPECT_TRUE(valid_utf8(chunk)) << name << " chunk " << ::testing::PrintToString(chunk);
      joined += chunk;
    }
    joined += dec.flush();
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(StreamDecoder, ByteFallbackEmojiComesOutWhole) {
  if (!test::require_vocab("gemma-4")) return;
  const auto v = test::load_vocab("gemma-4");
  // U+1FAE9 is unassigned in Unicode 15.1: not in the vocabulary, so four <0xXX> tokens.
  const std::string emoji = "\xF0\x9F\xAB\xA9";
  const auto ids = v.tok->encode(emoji, false, false);
  ASSERT_EQ(ids.size(), 4u);
  for (int32_t id : ids) EXPECT_TRUE(v.tok->is_byte(id)) << v.tok->token_text(id);
  Tokenizer::StreamDecoder dec(*v.tok);
  EXPECT_EQ(dec.feed(ids[0]), "");
  EXPECT_EQ(dec.feed(ids[1]), "");
  EXPECT_EQ(dec.feed(ids[2]), "");
  EXPECT_EQ(dec.feed(ids[3]), emoji);
  EXPECT_EQ(dec.flush(), "");
  // A truncated character is handed out by flush.
  EXPECT_EQ(dec.feed(ids[0]), "");
  EXPECT_EQ(dec.flush(), "\xF0");
}

// encode is const and shares the tokenizer across threads (the server does):
// four threads must get what one thread gets.
TEST(TokenizerThreads, ConcurrentEncodeAgrees) {
  if (!test::require_vocab("qwen2")) return;
  const auto v = test::load_vocab("qwen2");
  const auto vectors = test::read_vectors("qwen2");
  std::vector<std::vector<int32_t>> want;
  for (const auto& [text, ids] : vectors) want.push_back(v.tok->encode(text, true, true));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < vectors.size(); ++i) bad[t] += v.tok->encode(vectors[i].first, true, true) != want[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// 100 KB of mixed text must tokenise well under a second.
TEST(TokenizerSpeed, HundredKilobytes) {
  const std::string chunk =
      "The quick brown fox jumps over the lazy dog. It's 2024, and we've got 1,234,567 reasons!\n"
      "int main() { return x[i] * 42; }  // comment\n"
      "中文测试，这是一个句子。日本語のテキスト。한국어. Ελληνικά, русский текст.\n"
      "emoji 😀👍🏽 and   spaces\t\ttabs\n\n";
  std::string text;
  while (text.size() < 100 * 1024) text += chunk;
  for (const char* name : test::kVocabNames) {
    if (!test::require_vocab(name)) return;
    const auto v = test::load_vocab(name);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = v.tok->encode(text, true, true);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu bytes -> %zu tokens in %.1f ms\n", name, text.size(), ids.size(), ms);
    EXPECT_LT(ms, 1000.0) << name;
    EXPECT_GT(ids.size(), text.size() / 8);
  }
}

}  // namespace
}  // namespace ft
