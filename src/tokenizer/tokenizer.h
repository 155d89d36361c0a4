// Text <-> token ids for the GGUF vocabularies of our target models, matching
// llama.cpp v0.5.0 token for token (spec: shared/spec/tokenizer.md).
//
// Supported: tokenizer.ggml.model "gpt2" (byte-level BPE) with the pre-tokenizers
// LLAMA3 (llama-bpe and aliases), QWEN2 (qwen2 and aliases), QWEN35, DEFAULT
// (missing or "default" pre) and GEMMA4 (pre "gemma4"), model "gemma4", and the
// "none"/"no_vocab" placeholder. Other models (SPM "llama", "bert", "t5", ...)
// and pre-tokenizers are refused with an ft::Error naming the key.
//
// Instances are immutable after from_gguf, so encode/decode may run on many
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"

namespace ft::gguf {
class File;
}

namespace ft {

class Tokenizer {
 public:
  static constexpr int32_t kNull = -1;  // "no such token" (LLAMA_TOKEN_NULL)

  // Token attributes, a bit set as llama_token_attr.
  enum Attr : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1 << 0,
    kAttrUnused = 1 << 1,
    kAttrNormal = 1 << 2,
    kAttrControl = 1 << 3,
    kAttrUserDefined = 1 << 4,
    kAttrByte = 1 << 5,
  };

  // Reads the tokenizer.* keys of `file`. Throws ft::Error naming the key on
  // missing, mistyped or unsupported metadata.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // Text -> ids. add_special: prepend BOS / append EOS per add_bos()/add_eos().
  // parse_special: text spelling a CONTROL/UNKNOWN token becomes that token
  // (USER_DEFINED tokens are always matched). Throws for "none" vocabularies.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Bytes of one token (may be part of a UTF-8 character). CONTROL and UNKNOWN
  // tokens give "" unless `special`. Throws on an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id, bool special) const;
  // Whole sequence, with llama.cpp's clean_spaces rules where the pre type uses
  // them (llama_detokenize with remove_special = false, unparse_special = special).
  std::string decode(const std::vector<int32_t>& ids, bool special) const;

  bool can_encode() const { return kind_ != Kind::kNone; }
  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& token_text(int32_t id) const;
  uint32_t token_attr(int32_t id) const;
  bool is_control(int32_t id) const { return token_attr(id) & kAttrControl; }
  bool is_byte(int32_t id) const { return token_attr(id) & kAttrByte; }
  bool is_user_defined(int32_t id) const { return token_attr(id) & kAttrUserDefined; }
  // The id whose text is exactly `text`, or kNull.
  int32_t find_token(std::string_view text) const;

  // End of generation: eos, eot, eom, fim pad/rep/sep and the tokens llama.cpp
  // recognises by text (<|eot_id|>, <|im_end|>, <turn|>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }  // sorted

  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t eot_id() const { return eot_; }
  int32_t eom_id() const { return eom_; }
  int32_t unk_id() const { return unk_; }
  int32_t sep_id() const { return sep_; }
  int32_t pad_id() const { return pad_; }
  int32_t mask_id() const { return mask_; }
  int32_t nl_id() const { return nl_; }  // the first id of encode("\n")
  int32_t fim_pre_id() const { return fim_pre_; }
  int32_t fim_suf_id() const { return fim_suf_; }
  int32_t fim_mid_id() const { return fim_mid_; }
  int32_t fim_pad_id() const { return fim_pad_; }
  int32_t fim_rep_id() const { return fim_rep_; }
  int32_t fim_sep_id() const { return fim_sep_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  const std::string& model_name() const { return model_name_; }  // tokenizer.ggml.model
  const std::string& pre_name() const { return pre_name_; }      // tokenizer.ggml.pre as used
  tok::PreType pre_type() const { return pre_; }

  // Turns a stream of generated ids into text that only ever contains whole
  // UTF-8 characters: bytes of a character split across tokens (byte-fallback
  // tokens, or byte-level tokens cutting a code point) are held back until the
  // character is complete. No clean_spaces (llama.cpp's streaming does none).
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(tok), special_(special) {}
    std::string feed(int32_t id);
    // The held-back bytes (an incomplete character), emptying the buffer.
    std::string flush();

   private:
    const Tokenizer& tok_;
    bool special_;
    std::string pending_;
  };

 private:
  enum class Kind { kNone, kBpe };
  struct Fragment {
    int32_t token;  // kNull: raw text [offset, offset + length)
    size_t offset;
    size_t length;
  };

  Tokenizer() = default;
  void load_bpe(const gguf::File& file, const std::string& model);
  void load_specials(const gguf::File& file);
  void finish();
  void check_id(int32_t id) const;
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_fragment(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out, std::vector<tok::BpeSpan>& spans) const;
  std::string piece_for_cache(int32_t id) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  Kind kind_ = Kind::kNone;
  std::string model_name_;
  std::string pre_name_;
  tok::PreType pre_ = tok::PreType::kDefault;
  bool byte_encode_ = true;         // GPT-2 byte map (false: raw UTF-8 + <0xXX> fallback)
  bool ignore_merges_ = false;      // LLAMA3: a word that is a token is taken whole
  bool clean_spaces_ = true;
  bool escape_whitespaces_ = false;  // GEMMA4: ' ' -> U+2581 before splitting
  bool add_space_prefix_ = false;    // decode drops one leading space (SPM-style files only)
  bool add_bos_ = false;
  bool add_eos_ = false;

  std::vector<std::string> texts_;
  std::vector<uint32_t> attrs_;
  std::vector<std::string> pieces_;  // token_to_piece(id, special = true)
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> text_to_id_;
  tok::BpeRanks ranks_;
  int32_t byte_ids_[256];              // fallback token of each byte, or kNull
  std::vector<int32_t> special_ids_;   // CONTROL/USER_DEFINED/UNKNOWN, longest text first
  std::vector<int32_t> eog_ids_;

  int32_t bos_ = kNull, eos_ = kNull, eot_ = kNull, eom_ = kNull, unk_ = kNull, sep_ = kNull;
  int32_t pad_ = kNull, mask_ = kNull, nl_ = kNull;
  int32_t fim_pre_ = kNull, fim_suf_ = kNull, fim_mid_ = kNull, fim_pad_ = kNull, fim_rep_ = kNull,
          fim_sep_ = kNull;
};

}  // namespace ft
