// Tokenizer::from_gguf: reads the tokenizer.* keys and derives everything
// llama.cpp's llama_vocab::impl::load derives (pre type settings, special ids,
// attribute promotions, the end-of-generation set, caches).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ft {
namespace {

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyPre = "tokenizer.ggml.pre";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyMerges = "tokenizer.ggml.merges";

// tokenizer.ggml.token_type (gguf-py TokenType) -> attribute.
uint32_t attr_from_type(int64_t t) {
  switch (t) {
    case 1: return Tokenizer::kAttrNormal;
    case 2: return Tokenizer::kAttrUnknown;
    case 3: return Tokenizer::kAttrControl;
    case 4: return Tokenizer::kAttrUserDefined;
    case 5: return Tokenizer::kAttrUnused;
    case 6: return Tokenizer::kAttrByte;
    default: return Tokenizer::kAttrUndefined;
  }
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  const auto model = file.get_string(kKeyModel);
  if (!model) fail("{}: missing metadata key {}", file.path(), kKeyModel);
  t->model_name_ = *model;

  if (*model == "none" || *model == "no_vocab") {
    // Placeholder vocabulary (e.g. a model converted without one): ids only.
    t->kind_ = Kind::kNone;
    uint64_t n = 0;
    if (const auto arch = file.get_string("general.architecture")) {
      const std::string key = *arch + ".vocab_size";
      if (const auto v = file.get_uint(key)) {
        if (*v > 0x7FFFFFFF) fail("{}: metadata key {} = {} is not a vocabulary size", file.path(), key, *v);
        n = *v;
      } else {
        log::warn("{}: {} is \"{}\" and {} is missing: the vocabulary is empty", file.path(), kKeyModel,
                  *model, key);
      }
    }
    t->texts_.assign(n, std::string());
    t->attrs_.assign(n, kAttrUndefined);
    return t;
  }
  if (*model != "gpt2" && *model != "gemma4") {
    fail("{}: metadata key {} is \"{}\"; supported tokenizers: gpt2, gemma4, none, no_vocab", file.path(),
         kKeyModel, *model);
  }
  t->load_bpe(file, *model);
  t->load_specials(file);
  t->finish();
  return t;
}

void Tokenizer::load_bpe(const gguf::File& file, const std::string& model) {
  kind_ = Kind::kBpe;

  // Pre-tokenizer: the type decides the split, the byte map and the defaults.
  const auto pre = file.get_string(kKeyPre);
  pre_name_ = model == "gemma4" ? "gemma4" : pre.value_or("");
  clean_spaces_ = true;
  if (pre_name_.empty()) {
    log::warn("{}: {} is missing, using the 'default' pre-tokenizer: GENERATION QUALITY WILL BE DEGRADED, "
              "consider regenerating the model",
              file.path(), kKeyPre);
    pre_ = tok::PreType::kDefault;
  } else if (pre_name_ == "default") {
    pre_ = tok::PreType::kDefault;
  } else if (is_one_of(pre_name_, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                   "midm-2.0", "lfm2", "jina-v5-nano"})) {
    pre_ = tok::PreType::kLlama3;
    ignore_merges_ = true;
    add_bos_ = true;
  } else if (is_one_of(pre_name_, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"})) {
    pre_ = tok::PreType::kQwen2;
    clean_spaces_ = false;
  } else if (pre_name_ == "megrez") {  // QWEN2 split, but llama.cpp keeps clean_spaces on
    pre_ = tok::PreType::kQwen2;
  } else if (pre_name_ == "qwen35") {
    pre_ = tok::PreType::kQwen35;
    clean_spaces_ = false;
  } else if (is_one_of(pre_name_, {"gemma4", "granite-embed-multi-311m"})) {
    pre_ = tok::PreType::kGemma4;
    escape_whitespaces_ = true;
    byte_encode_ = false;
  } else {
    fail("{}: metadata key {} is \"{}\"; supported pre-tokenizers: llama-bpe (and aliases), qwen2 (and "
         "aliases), qwen35, gemma4, default",
         file.path(), kKeyPre, pre_name_);
  }

  const auto merges = file.get_string_array(kKeyMerges);
  if (!merges) fail("{}: missing metadata key {} (required for tokenizer \"{}\")", file.path(), kKeyMerges, model);
  ranks_.reserve(merges->size());  // rehashing cost ~10% of loading Gemma 4's 514K merges
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& m = (*merges)[i];
    // Split at the first space at index >= 1 (a merge's left part may itself be " ").
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      ranks_.add("", "", static_cast<int>(i));  // as llama.cpp: a malformed entry ranks the empty pair
    } else {
      ranks_.add(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1), static_cast<int>(i));
    }
  }

  auto tokens = file.get_string_array(kKeyTokens);
  if (!tokens) fail("{}: missing metadata key {}", file.path(), kKeyTokens);
  if (tokens->size() > 0x7FFFFFFF) fail("{}: {} has {} entries, too many", file.path(), kKeyTokens, tokens->size());
  const size_t n = tokens->size();
  texts_ = std::move(*tokens);
  attrs_.assign(n, kAttrNormal);
  if (const auto types = file.get_int_array(kKeyTypes)) {
    if (types->size() < n) {
      fail("{}: metadata key {} has {} entries, expected at least {} (one per token)", file.path(), kKeyTypes,
           types->size(), n);
    }
    for (size_t i = 0; i < n; ++i) attrs_[i] = attr_from_type((*types)[i]);
  }

  text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (texts_[i].empty()) {
      log::warn("{}: empty token at index {}", file.path(), i);
      texts_[i] = fmt::format("[EMPTY_{}]", i);
    }
    const auto [it, inserted] = text_to_id_.emplace(texts_[i], static_cast<int32_t>(i));
    if (!inserted) {
      fail("{}: metadata key {}: token {} has the same text as token {} ({:?}); token texts must be unique",
           file.path(), kKeyTokens, i, it->second, texts_[i]);
    }
  }

  if (const auto v = file.get_bool("tokenizer.ggml.add_space_prefix")) add_space_prefix_ = *v;

  // Fallback for bytes no merge covers: byte-level vocabularies look up the one
  // byte (only printable ASCII can match after the byte map), SPM-style ones <0xXX>.
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = byte_encode_ ? find_token(std::string(1, static_cast<char>(b)))
                                : find_token(fmt::format("<0x{:02X}>", b));
  }

  // Defaults before the file's explicit ids: GPT-2's legacy 11 for gpt2, none for gemma4.
  if (model == "gpt2") bos_ = eos_ = 11;
  std::vector<int32_t> ids;
  encode_fragment("\n", ids);
  nl_ = ids.empty() ? pad_ : ids[0];
  if (ids.empty()) log::warn("{}: the vocabulary has no newline token", file.path());
}

void Tokenizer::load_specials(const gguf::File& file) {
  const int32_t n = n_vocab();
  struct Slot {
    const char* key;
    int32_t* id;
  };
  const Slot slots[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},         {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},         {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},     {"tokenizer.ggml.seperator_token_id", &sep_},
      {"tokenizer.ggml.padding_token_id", &pad_},     {"tokenizer.ggml.mask_token_id", &mask_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_}, {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_}, {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_}, {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},  {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (const Slot& s : slots) {
    if (*s.id >= n) {
      log::warn("{}: default special token {} = {} is out of the vocabulary, disabling", file.path(), s.key, *s.id);
      *s.id = kNull;
    }
    const auto v = file.get_uint(s.key);
    if (!v) continue;
    if (*v >= static_cast<uint64_t>(n)) {
      log::warn("{}: bad special token {} = {} (vocabulary has {}), using default id {}", file.path(), s.key, *v,
                n, *s.id);
    } else {
      *s.id = static_cast<int32_t>(*v);
    }
  }

  if (const auto v = file.get_bool("tokenizer.ggml.add_bos_token")) add_bos_ = *v;
  if (const auto v = file.get_bool("tokenizer.ggml.add_eos_token")) add_eos_ = *v;
  if (pre_ == tok::PreType::kGemma4 && !add_bos_) {
    // llama.cpp PR 21500: Gemma 4 always gets its BOS.
    log::warn("{}: overriding tokenizer.ggml.add_bos_token to true for Gemma 4", file.path());
    add_bos_ = true;
  }
}

void Tokenizer::finish() {
  auto promote_control = [&](int32_t id) {
    if (!(attrs_[id] & kAttrControl)) {
      log::debug("control-looking token {} '{}' was not control-type; overriding", id, texts_[id]);
      attrs_[id] |= kAttrControl;
    }
  };
  // The token spelled like the first of `texts` the vocabulary has. llama.cpp
  // takes the first match in its hash map's iteration order; list order gives the
  // same choice on the target vocabularies (Llama 3: <|eot_id|> over
  // <|end_of_text|>, Qwen: <|im_end|> over <|endoftext|>; checked by the oracle test).
  auto first_of = [&](std::initializer_list<std::string_view> texts) {
    for (std::string_view s : texts) {
      const int32_t id = find_token(s);
      if (id != kNull) return id;
    }
    return kNull;
  };
  struct Detect {
    int32_t* id;
    std::initializer_list<std::string_view> texts;
  };
  const Detect detect[] = {
      {&eot_,
       {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
        "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
      {&eom_, {"<|eom_id|>"}},
      {&fim_pre_,
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
        "<|prefix|>"}},
      {&fim_suf_,
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
        "<|suffix|>"}},
      {&fim_mid_,
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
        "<|middle|>"}},
      {&fim_pad_, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&fim_rep_, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&fim_sep_, {"<|file_sep|>"}},
  };
  for (const Detect& d : detect) {
    if (*d.id != kNull) continue;
    *d.id = first_of(d.texts);
    if (*d.id != kNull) promote_control(*d.id);
  }

  // Control tokens named "...unused..." are unused.
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if ((attrs_[id] & kAttrControl) && texts_[id].find("unused") != std::string::npos) attrs_[id] |= kAttrUnused;
  }

  // End-of-generation set.
  std::set<int32_t> eog;
  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_}) {
    if (id != kNull) eog.insert(id);
  }
  static constexpr std::string_view kEogTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["};
  for (std::string_view s : kEogTexts) {
    const int32_t id = find_token(s);
    if (id == kNull) continue;
    eog.insert(id);
    promote_control(id);
  }
  // gpt-oss: these are always rendered.
  for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = find_token(s);
    if (id != kNull) attrs_[id] = kAttrUserDefined;
  }
  for (int32_t id : {eos_, eot_, eom_}) {
    if (id != kNull && eog.insert(id).second) {
      log::debug("special token {} is not in the end-of-generation set; adding it", id);
    }
  }
  // o200k_harmony / solar-open: <|end|> ends a message, not the generation.
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = kNull;
    for (int32_t id : eog) {
      const std::string& s = texts_[id];
      if (s == "<|return|>") has_return = true;
      else if (s == "<|call|>" || s == "<|calls|>") has_call = true;
      else if (s == "<|flush|>") has_flush = true;
      else if (s == "<|end|>") end_id = id;
    }
    if (end_id != kNull && has_call && (has_return || has_flush)) {
      eog.erase(end_id);
      attrs_[end_id] = kAttrUserDefined;
    }
  }
  // Gemma 4 (and paddleocr): </s> is an ordinary token when <|tool_response> is present.
  {
    bool has_tool_response = false;
    int32_t s_id = kNull;
    for (int32_t id : eog) {
      if (texts_[id] == "<|tool_response>") has_tool_response = true;
      else if (texts_[id] == "</s>") s_id = id;
    }
    if (has_tool_response && s_id != kNull) {
      eog.erase(s_id);
      attrs_[s_id] = kAttrNormal;
    }
  }
  eog_ids_.assign(eog.begin(), eog.end());

  // Special-token partition order: longest text first. llama.cpp's std::sort
  // leaves equal lengths in unspecified order; we break ties by id.
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (attrs_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_ids_.push_back(id);
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(),
                   [&](int32_t a, int32_t b) { return texts_[a].size() > texts_[b].size(); });

  pieces_.resize(texts_.size());
  for (int32_t id = 0; id < n_vocab(); ++id) pieces_[id] = piece_for_cache(id);
}

}  // namespace ft
