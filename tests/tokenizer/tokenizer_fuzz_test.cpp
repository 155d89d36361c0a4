// Robustness of the tokenizer's loader against a GGUF whose tokenizer.* keys lie: the default model's byte-level BPE
// vocabulary (models/default.gguf) and the Gemma 4 test vocabulary (SPM-style) with those keys mutated -- a key given
// another type, dropped, an array shortened or lengthened, an entry made empty, invalid UTF-8, a duplicate, a merge
// without a space, a token type or a special id out of range -- must build a tokenizer that encodes and decodes
// (ids in range, no crash, no hang) or fail with ft::Error. Deterministic; FT_TOK_MUTANTS=N (default 60 a vocabulary).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../mutants.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "testgen/model_gen.h"
#include "tokenizer/tokenizer.h"

namespace ft {
namespace {

using gguf::Value;
using gguf::ValueType;

std::string tmp_dir() {
  const auto d = std::filesystem::path(FT_BINARY_DIR) / "test-tmp" / "tokenizer" / std::to_string(::getpid());
  std::filesystem::create_directories(d);
  return d.string();
}

Value str_value(std::string s) {
  Value v;
  v.type = ValueType::STRING;
  v.str = std::move(s);
  return v;
}

// One mutation of a tokenizer.* value.
void mutate_value(Value& v, std::mt19937& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  if (v.is_array() && !v.arr.empty()) {
    Value& e = v.arr[pick(v.arr.size())];
    switch (pick(8)) {
      case 0: v.arr.resize(v.arr.size() / 2); return;                    // shorter than the others
      case 1: v.arr.push_back(v.arr.back()); return;                     // longer, a duplicate entry
      case 2: if (e.type == ValueType::STRING) e.str = ""; return;        // an empty token / merge
      case 3: if (e.type == ValueType::STRING) e.str = "\xff\xc3"; return;  // invalid UTF-8
      case 4: if (e.type == ValueType::STRING) e.str = "abc"; return;     // a merge without a space
      case 5: if (e.type == ValueType::STRING) e.str = v.arr[pick(v.arr.size())].str; return;  // a duplicate
      case 6:  // an integer entry out of range
        if (e.is_integer()) {
          e.i = -7;
          e.u = 0xFFFFFFFFu;
        }
        return;
      default: v.arr.clear(); return;
    }
  }
  switch (pick(6)) {
    case 0: v = str_value("x"); return;
    case 1:
      v = Value{};
      v.type = ValueType::UINT32;
      v.u = 0xFFFFFFFFu;
      return;
    case 2:
      v = Value{};
      v.type = ValueType::INT32;
      v.i = -1;
      return;
    case 3: v = str_value("gpt2"); return;
    case 4: v = str_value("llama"); return;
    default:
      v = Value{};
      v.type = ValueType::ARRAY;
      v.elem_type = ValueType::STRING;
      return;
  }
}

// "" when the tokenizer builds and round-trips text with ids in range (built counts it), or the load fails with
// ft::Error.
std::string outcome(const std::string& path, int* built = nullptr) {
  try {
    const auto f = gguf::File::open(path);
    const auto tok = Tokenizer::from_gguf(*f);
    if (!tok->can_encode()) return "";
    for (const char* text : {"And God said, Let there be light.", "<|im_start|>user\nhi<|im_end|>", "\xff\xfe x",
                             "  \n\n\t 123 \xf0\x9f\x99\x82", ""}) {
      const auto ids = tok->encode(text, true, true);
      for (int32_t id : ids)
        if (id < 0 || id >= tok->n_vocab()) return "encode gave id " + std::to_string(id);
      (void)tok->decode(ids, true);
      for (int32_t id : ids) (void)tok->token_to_piece(id, false);
    }
    if (built) ++*built;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    return std::string("a std::exception: ") + e.what();
  }
  return "";
}

void fuzz_vocab(const std::string& src, const std::string& tag) {
  const auto f = gguf::File::open(src);
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<size_t> tok_keys;
  for (const auto& [k, v] : f->metadata()) {
    if (k == "general.alignment") continue;
    if (k.starts_with("tokenizer.") && k != "tokenizer.chat_template") tok_keys.push_back(kv.size());
    kv.emplace_back(k, v);
  }
  ASSERT_FALSE(tok_keys.empty()) << src;
  ASSERT_EQ(outcome(src), "");
  const std::string dst = tmp_dir() + "/" + tag + "_mut.gguf";
  std::mt19937 rng(std::hash<std::string>{}(tag) & 0xFFFFu);
  int failures = 0, built = 0, tried = 0;
  for (int i = 0; i < test::mutant_count("FT_TOK_MUTANTS", 60) && failures < 5; ++i) {
    auto m = kv;
    std::string what;
    const int k = std::uniform_int_distribution<int>(1, 2)(rng);
    for (int j = 0; j < k; ++j) {
      const size_t at = tok_keys[std::uniform_int_distribution<size_t>(0, tok_keys.size() - 1)(rng)];
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
        what += m[at].first + " dropped; ";
        m[at].first = "dropped." + std::to_string(j) + m[at].first;
      } else {
        mutate_value(m[at].second, rng);
        what += m[at].first + " = " + m[at].second.to_string(3) + "; ";
      }
    }
    try {
      gguf::Writer w(f->alignment());
      for (const auto& [key, v] : m) w.set(key, v);
      for (const auto& t : f->tensors()) {
        if (t.name != "token_embd.weight") continue;  // the tokenizer reads metadata only; keep the file small
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + std::max(1, t.n_dims)),
                     std::vector<uint8_t>(t.data, t.data + t.nbytes));
      }
      w.write(dst);
    } catch (const Error&) {
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ++tried;
    const std::string o = outcome(dst, &built);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.empty() || s > 5.0) {
      ++failures;
      ADD_FAILURE() << tag << " mutant " << i << ": " << what << "\n-> " << (o.empty() ? "took " + std::to_string(s) + " s" : o);
    }
  }
  // Both outcomes occur: the mutants reach the encoder, not only the loader's refusals.
  std::printf("%s: %d mutants, %d built a tokenizer, %d refused\n", tag.c_str(), tried, built, tried - built);
  EXPECT_GT(built, 0);
  EXPECT_GT(tried - built, 0);
}

TEST(TokenizerFuzz, DefaultModelBpeVocabMutated) { fuzz_vocab(std::string(FT_SOURCE_DIR) + "/models/default.gguf", "bpe"); }

TEST(TokenizerFuzz, Gemma4SpmVocabMutated) {
  const std::string p = tmp_dir() + "/gemma4_src.gguf";
  auto spec = testgen::preset("tiny", testgen::Arch::kGemma4);
  spec.g4.n_merges = 200;  // a Gemma-4-style vocabulary, not model "none"
  testgen::generate_model(spec, p);
  fuzz_vocab(p, "gemma4");
}

}  // namespace
}  // namespace ft
